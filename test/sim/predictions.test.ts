import { describe, expect, it } from 'vitest';
import { singleClassConfig } from '../../src/queue/wfq.js';
import { EvaScheduler } from '../../src/scheduler/eva.js';
import { NoPackingScheduler } from '../../src/scheduler/baselines/no-packing.js';
import { schedulerCaps } from '../../src/round/plan-caps.js';
import { predictionErrors, runSimulation, successfulSojournMeanHours } from '../../src/sim/run-simulation.js';
import { constantPairwise } from '../../src/world/ground-truth.js';
import type { QueueCaps } from '../../src/queue/caps.js';
import type { JobOutcome, RunResult } from '../../src/world/run-result.js';
import type { Trace } from '../../src/world/trace.js';
import { testCatalog, trace, traceJob, traceTask } from './sim-fixtures.js';

/**
 * Completion-time predictions (PCS §4): each job's end is predicted when a round first sees it, by running a copy
 * of the world forward with the same admission and scheduler, the scheduler's learned rates and no arrivals.
 */
const catalog = testCatalog();

function outcome(result: RunResult, id: string): JobOutcome {
  const j = result.jobs.find((o) => o.id === id);
  if (j === undefined) throw new Error(`no job ${id}`);
  return j;
}

/** Twelve single-task jobs of 1,000–3,000 s arriving over ~40 minutes: a queue forms under one instance. */
function staggered(): Trace {
  return trace(
    ...Array.from({ length: 12 }, (_, i) =>
      traceJob(`j${i}`, { arrivalSeconds: i * 200, iterations: 1000 + ((i * 7) % 5) * 500 }),
    ),
  );
}

describe('completion-time predictions in the simulator', () => {
  it('are exact when the world follows the model (fifo, no co-location, later arrivals never overtake)', () => {
    const caps: QueueCaps = { maxInstances: 1 };
    const r = runSimulation({
      trace: staggered(),
      catalog,
      groundTruth: constantPairwise(0.5), // never used: no-packing never co-locates
      scheduler: new NoPackingScheduler(catalog),
      queue: { caps, config: singleClassConfig('fifo'), predict: true },
    });
    for (const j of r.jobs) {
      expect(j.predictedEndSeconds, j.id).not.toBeNull();
      expect(j.predictedEndSeconds, j.id).toBe(j.endSeconds);
    }
    expect(r.queue?.predErrAvg).toBe(0);
    expect(r.queue?.predErrP99).toBe(0);
    // A queue did form: the last job waited for the eleven before it.
    const last = outcome(r, 'j11');
    expect((last.startSeconds ?? 0) - last.arrivalSeconds).toBeGreaterThan(10_000);
  });

  it('are exact with Eva packing and learned interference when its table already matches the truth', () => {
    // Eva's prior per co-located task equals the truth's pairwise rate, so its expected rates are the true ones.
    const jobs = Array.from({ length: 8 }, (_, i) =>
      traceJob(`e${i}`, {
        arrivalSeconds: 0,
        iterations: 2000 + i * 400,
        workload: i % 2 === 0 ? 'a' : 'b',
        tasks: [traceTask('node0', { demand: { any: [0, 2, 8] } })],
      }),
    );
    const caps: QueueCaps = { maxCostPerHour: 11 };
    const r = runSimulation({
      trace: trace(...jobs),
      catalog,
      groundTruth: constantPairwise(0.9),
      scheduler: new EvaScheduler(catalog, { defaultRate: 0.9, caps: schedulerCaps(caps) }),
      queue: { caps, config: singleClassConfig('fifo'), predict: true },
    });
    // Co-located: several jobs ran together on one instance, at the (interfered) rate Eva expected.
    expect(r.summary.instancesLaunched).toBe(1);
    expect(r.jobs.filter((j) => j.startSeconds === outcome(r, 'e0').startSeconds).length).toBeGreaterThan(1);
    for (const j of r.jobs) expect(j.predictedEndSeconds, j.id).toBe(j.endSeconds);
  });

  it('do not change the run: with and without predictions the outcomes are identical', () => {
    const run = (predict: boolean) =>
      runSimulation({
        trace: staggered(),
        catalog,
        groundTruth: constantPairwise(0.8),
        scheduler: new EvaScheduler(catalog, { caps: { maxInstances: 2 } }),
        queue: { caps: { maxInstances: 2 }, config: singleClassConfig('srpt'), predict },
      });
    const a = run(true);
    const b = run(false);
    expect(a.jobs.map((j) => j.endSeconds)).toEqual(b.jobs.map((j) => j.endSeconds));
    expect(a.summary.totalCost).toBe(b.summary.totalCost);
    expect(b.jobs.every((j) => j.predictedEndSeconds === null)).toBe(true);
    expect(b.queue?.predErrAvg).toBeNull();
    expect(a.queue?.predErrAvg).not.toBeNull();
  });

  it('miss when later arrivals overtake (srpt): the error is measured, not hidden', () => {
    const t = trace(
      traceJob('first', { arrivalSeconds: 0, iterations: 3000 }),
      traceJob('queued', { arrivalSeconds: 0, iterations: 4000 }),
      traceJob('short', { arrivalSeconds: 600, iterations: 500 }),
    );
    const r = runSimulation({
      trace: t,
      catalog,
      groundTruth: constantPairwise(1),
      scheduler: new NoPackingScheduler(catalog),
      queue: {
        caps: { maxInstances: 1 },
        config: singleClassConfig('srpt', { srptAgingPerSecond: 0 }),
        predict: true,
      },
    });
    const queued = outcome(r, 'queued');
    // Predicted to start after `first`; `short` arrived later and went first, so it finished later than predicted.
    expect(queued.endSeconds ?? 0).toBeGreaterThan(queued.predictedEndSeconds ?? Infinity);
    expect(outcome(r, 'first').predictedEndSeconds).toBe(outcome(r, 'first').endSeconds);
    expect(r.queue?.predErrAvg).toBeGreaterThan(0);
  });
});

describe('predictions of jobs with a declared success model', () => {
  it('use the expected size (the predictor does not know where the job will stop)', () => {
    // Two stages of 1,000 s, continuing with probability 0.5: expected size 1,500 s; this one stops after stage 1.
    const job = {
      ...traceJob('staged', { iterations: 1000 }),
      success: { kind: 'stages' as const, stageSeconds: [1000, 1000], continueProbabilities: [0.5] },
      successful: false,
    };
    const r = runSimulation({
      trace: trace(job),
      catalog,
      groundTruth: constantPairwise(1),
      scheduler: new NoPackingScheduler(catalog),
      queue: { caps: { maxInstances: 1 }, config: singleClassConfig('success-rank'), predict: true },
    });
    const o = outcome(r, 'staged');
    expect(o.successful).toBe(false);
    expect((o.predictedEndSeconds ?? 0) - (o.endSeconds ?? 0)).toBe(500);
    expect(r.queue?.successfulSojournMeanHours).toBeNull();
  });
});

describe('prediction and sojourn metrics', () => {
  const job = (
    id: string,
    jct: number | null,
    predictedJct: number | null,
    successful = true,
  ): JobOutcome => ({
    id,
    name: id,
    arrivalSeconds: 100,
    startSeconds: 100,
    endSeconds: jct === null ? null : 100 + jct,
    jctSeconds: jct,
    migrations: 0,
    successful,
    predictedStartSeconds: null,
    predictedEndSeconds: predictedJct === null ? null : 100 + predictedJct,
  });

  it('predErrAvg / predErrP99 are PCS Pred_err: |actual − predicted| / predicted JCT in percent', () => {
    const m = predictionErrors([
      job('a', 1000, 1100), // 100/1100 = 9.09 %
      job('b', 2000, 1000), // 100 %: a 2× under-prediction
      job('c', 500, 500), // 0 %
      job('d', null, 700), // unfinished: ignored
      job('e', 800, null), // no prediction: ignored
    ]);
    expect(m.predErrAvg).toBeCloseTo((100 / 11 + 100 + 0) / 3, 10);
    expect(m.predErrP99).toBeCloseTo(100, 10);
    expect(predictionErrors([job('x', null, null)])).toEqual({ predErrAvg: null, predErrP99: null });
  });

  it('leaves out jobs that stopped unsuccessfully, as the controller does: they never completed', () => {
    const m = predictionErrors([job('a', 1000, 1100), job('f', 300, 1000, false)]);
    expect(m.predErrAvg).toBeCloseTo(100 / 11, 10);
    expect(predictionErrors([job('f', 300, 1000, false)])).toEqual({ predErrAvg: null, predErrP99: null });
  });

  it('successfulSojournMeanHours averages only the successful jobs', () => {
    const jobs = [job('a', 3600, null), job('b', 7200, null), job('c', 36_000, null, false)];
    expect(successfulSojournMeanHours(jobs)).toBeCloseTo(1.5, 10);
    expect(successfulSojournMeanHours([job('c', 3600, null, false)])).toBeNull();
  });
});
