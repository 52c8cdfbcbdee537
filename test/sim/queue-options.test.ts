import { describe, expect, it } from 'vitest';
import { loadCatalogFile } from '../../src/cloud/catalog-file.js';
import type { QueueCaps } from '../../src/queue/caps.js';
import { singleClassConfig } from '../../src/queue/wfq.js';
import { NoPackingScheduler } from '../../src/scheduler/baselines/no-packing.js';
import { p99JctHours, queueConfigFor, QUEUE_KINDS } from '../../src/sim/queue-options.js';
import { schedulerCaps } from '../../src/round/plan-caps.js';
import { runSimulation, type SimulationOptions as RunOptions } from '../../src/sim/run-simulation.js';
import { groundTruthFor } from '../../src/sim/run-request.js';
import { executeRun } from '../../src/sim/run-request.js';
import { createScheduler } from '../../src/scheduler/registry.js';
import { loadTrace } from '../../src/sim/traces/load.js';
import type { JobOutcome, RunResult } from '../../src/world/run-result.js';
import { testCatalog, trace, traceJob } from './sim-fixtures.js';

const flat = (): number => 1; // no interference: timings are hand-checkable

function outcome(result: RunResult, id: string): JobOutcome {
  const j = result.jobs.find((o) => o.id === id);
  if (j === undefined) throw new Error(`no job ${id}`);
  return j;
}

/** Everything but the wall time, which differs between runs. */
function deterministicPart(r: RunResult): unknown {
  return { summary: { ...r.summary, wallSeconds: 0 }, series: r.series, jobs: r.jobs };
}

describe('admission in the simulator', () => {
  const catalog = loadCatalogFile();
  const synthetic = loadTrace(undefined, {
    format: 'synthetic',
    jobs: 12,
    seed: 3,
    instanceCatalog: catalog,
  });
  const groundTruth = groundTruthFor({});
  const sizes = synthetic.jobs.map((j) => j.durationSeconds * j.tasks.length);
  const run = (name: 'eva' | 'no-packing', extra: Partial<RunOptions> = {}, caps?: QueueCaps): RunResult =>
    runSimulation({
      trace: synthetic,
      catalog,
      groundTruth,
      scheduler: createScheduler(name, {
        catalog,
        interferenceProfile: groundTruth,
        caps: caps === undefined ? undefined : schedulerCaps(caps),
      }),
      ...extra,
    });

  it('with a queue but no caps, admits everyone: the run is identical to the run without a queue', () => {
    const plain = run('eva');
    const queued = run('eva', { queue: { caps: {}, config: singleClassConfig('srpt') } });
    expect(deterministicPart(queued)).toEqual(deterministicPart(plain));
    expect(plain.queue).toBeUndefined();
    expect(queued.queue?.unfairness).toBeNull(); // no cap, no fair share
    expect(queued.queue?.p99JctHours).toBeGreaterThan(0);
  });

  for (const name of ['no-packing', 'eva'] as const) {
    it(`${name}: a cap at 60% of the uncapped peak $/h is never exceeded and every job finishes`, () => {
      const uncapped = run(name);
      const cap = 0.6 * uncapped.summary.peakCostPerHour;
      // Binding: the uncapped run goes over it.
      expect(Math.max(...uncapped.series.costPerHour)).toBeGreaterThan(cap);
      for (const kind of ['fifo', 'srpt', 'wfq'] as const) {
        const caps: QueueCaps = { maxCostPerHour: cap };
        const capped = run(name, { queue: { caps, config: queueConfigFor(kind, sizes) } }, caps);
        expect(Math.max(...capped.series.costPerHour), `${kind}`).toBeLessThanOrEqual(cap + 1e-9);
        expect(capped.summary.peakCostPerHour).toBeLessThanOrEqual(cap + 1e-9);
        expect(capped.jobs.every((j) => j.endSeconds !== null)).toBe(true);
        // Waiting costs time: the capped run is slower on average.
        expect(capped.summary.meanJctHours).toBeGreaterThan(uncapped.summary.meanJctHours);
        expect(capped.queue?.unfairness).toBeGreaterThanOrEqual(0);
      }
    });
  }

  it('an instance cap holds at every time too', () => {
    const caps: QueueCaps = { maxInstances: 3 };
    const capped = run('eva', { queue: { caps, config: queueConfigFor('fifo', sizes) } }, caps);
    expect(Math.max(...capped.series.runningInstances)).toBeLessThanOrEqual(3);
    expect(capped.jobs.every((j) => j.endSeconds !== null)).toBe(true);
  });

  it('executeRun wires --queue and the caps through (worker path)', () => {
    const uncapped = executeRun({ scheduler: 'eva', trace: { format: 'synthetic', jobs: 12, seed: 3 } });
    const cap = 0.6 * uncapped.summary.peakCostPerHour;
    const capped = executeRun({
      scheduler: 'eva',
      trace: { format: 'synthetic', jobs: 12, seed: 3 },
      queue: { kind: 'wfq', caps: { maxCostPerHour: cap } },
    });
    expect(uncapped.queue).toBeUndefined();
    expect(capped.summary.peakCostPerHour).toBeLessThanOrEqual(cap + 1e-9);
    expect(capped.queue?.p99JctHours).toBeGreaterThanOrEqual(capped.summary.p95JctHours);
    expect(capped.queue?.unfairness).not.toBeNull();
  });
});

describe('orderings under a one-instance cap (hand-made trace)', () => {
  // Long L1 runs; long L2 arrives, then short S. One small.x at a time ($3.6/h, cap 1 instance).
  const jobs = trace(
    traceJob('L1', { arrivalSeconds: 0, iterations: 3000 }),
    traceJob('L2', { arrivalSeconds: 100, iterations: 3000 }),
    traceJob('S', { arrivalSeconds: 200, iterations: 300 }),
  );
  const catalog = testCatalog();
  const runWith = (kind: 'fifo' | 'srpt'): RunResult =>
    runSimulation({
      trace: jobs,
      catalog,
      groundTruth: flat,
      scheduler: new NoPackingScheduler(catalog),
      queue: { caps: { maxInstances: 1 }, config: queueConfigFor(kind, []) },
    });
  const fifo = runWith('fifo');
  const srpt = runWith('srpt');

  it('fifo runs L2 before S; srpt runs S before L2', () => {
    expect(outcome(fifo, 'S').startSeconds).toBeGreaterThan(outcome(fifo, 'L2').endSeconds as number);
    expect(outcome(srpt, 'L2').startSeconds).toBeGreaterThan(outcome(srpt, 'S').endSeconds as number);
    // L1 is unaffected, and one instance at a time.
    expect(outcome(srpt, 'L1')).toEqual(outcome(fifo, 'L1'));
    expect(Math.max(...fifo.series.runningInstances, ...srpt.series.runningInstances)).toBe(1);
  });

  it('srpt lowers the short job JCT and the mean, at the long job expense', () => {
    expect(outcome(srpt, 'S').jctSeconds as number).toBeLessThan(outcome(fifo, 'S').jctSeconds as number);
    expect(outcome(srpt, 'L2').jctSeconds as number).toBeGreaterThan(
      outcome(fifo, 'L2').jctSeconds as number,
    );
    expect(srpt.summary.meanJctHours).toBeLessThan(fifo.summary.meanJctHours);
  });

  it('unfairness of a lone job is its setup overhead: 100·(1072/1000 − 1) = 7.2%', () => {
    // Round at 0 launches small.x: up at 10 + 20 + 30 = 60, fetch 2 + build 3 → 65, init 7 → 72, 1000 s of work.
    const alone = runSimulation({
      trace: trace(traceJob('A', { iterations: 1000 })),
      catalog,
      groundTruth: flat,
      scheduler: new NoPackingScheduler(catalog),
      queue: { caps: { maxCostPerHour: 3.6 }, config: queueConfigFor('fifo', []) },
    });
    expect(outcome(alone, 'A').jctSeconds).toBe(1072);
    expect(alone.queue?.unfairness).toBeCloseTo(7.2, 9);
  });
});

describe('queue configs and metrics', () => {
  it('wfq: two size classes split at the 85th percentile size, weights .85/.15, fifo inside', () => {
    const sizes = Array.from({ length: 20 }, (_, i) => 10 * (i + 1));
    const c = queueConfigFor('wfq', sizes);
    expect(c.classes.map((k) => k.id)).toEqual(['small', 'large']);
    expect(c.classes[0]?.maxSizeSeconds).toBe(170); // nearest rank: the 17th of 20
    expect(c.classes[1]?.maxSizeSeconds).toBeUndefined();
    expect(c.classes[0]?.weight).toBeCloseTo(0.85, 12);
    expect(c.classes[1]?.weight).toBeCloseTo(0.15, 12);
    expect(c.classes.every((k) => k.ordering === 'fifo')).toBe(true);
  });

  it('single-class kinds map to their ordering', () => {
    for (const kind of QUEUE_KINDS.filter((k) => k !== 'wfq'))
      expect(queueConfigFor(kind, []).classes.map((k) => k.ordering)).toEqual([kind]);
  });

  it('schedulerCaps keeps what Eva plans under: the plan caps, and the quotas for the types it may buy', () => {
    expect(schedulerCaps({ maxCostPerHour: 5, quotas: [{ group: 'p', maxGpus: 8 }] })).toEqual({
      maxCostPerHour: 5,
      quotas: [{ group: 'p', maxGpus: 8 }],
    });
    expect(
      schedulerCaps({
        quotas: [{ group: 'big', maxVcpus: 8 }],
        familyGroups: { p5: 'big' },
        maxInstances: 2,
      }),
    ).toEqual({ quotas: [{ group: 'big', maxVcpus: 8 }], familyGroups: { p5: 'big' }, maxInstances: 2 });
    expect(schedulerCaps({ maxInstances: 2, quotas: [] })).toEqual({ maxInstances: 2 });
  });

  it('p99JctHours is the nearest-rank 99th percentile in hours, null with no finished job', () => {
    const jobs: JobOutcome[] = Array.from({ length: 200 }, (_, i) => ({
      id: `j${i}`,
      name: `j${i}`,
      arrivalSeconds: 0,
      startSeconds: 0,
      endSeconds: (i + 1) * 36,
      jctSeconds: (i + 1) * 36,
      migrations: 0,
      successful: true,
      predictedStartSeconds: null,
      predictedEndSeconds: null,
    }));
    expect(p99JctHours(jobs)).toBeCloseTo((198 * 36) / 3600, 12); // rank ceil(0.99·200) = 198
    expect(p99JctHours([{ ...(jobs[0] as JobOutcome), endSeconds: null, jctSeconds: null }])).toBeNull();
  });
});
