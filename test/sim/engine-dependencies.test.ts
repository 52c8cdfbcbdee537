import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { singleClassConfig } from '../../src/queue/wfq.js';
import { NoPackingScheduler } from '../../src/scheduler/baselines/no-packing.js';
import { createScheduler } from '../../src/scheduler/registry.js';
import { runSimulation } from '../../src/sim/run-simulation.js';
import { constantPairwise } from '../../src/world/ground-truth.js';
import type { RunResult } from '../../src/world/run-result.js';
import type { TraceJob } from '../../src/world/trace.js';
import { EventLog, testCatalog, trace, traceJob } from './sim-fixtures.js';

/**
 * Job dependencies in the engine (src/world/job-dependencies.ts), as the controller keeps them: a job whose
 * `dependsOn` names a job that has not finished arrives held, out of every round, and joins the queue when the last
 * of them finishes; its JCT counts from its arrival, its wait to be placed from when it joined the queue.
 */
const catalog = testCatalog();
const flat = constantPairwise(1);

function after(job: TraceJob, ...ids: string[]): TraceJob {
  return { ...job, dependsOn: ids };
}

function run(jobs: TraceJob[], log?: EventLog, predict = false): RunResult {
  return runSimulation({
    trace: trace(...jobs),
    scheduler: new NoPackingScheduler(catalog),
    catalog,
    groundTruth: flat,
    onEvent: log?.record,
    ...(predict ? { queue: { caps: {}, config: singleClassConfig('fifo'), predict: true } } : {}),
  });
}

describe('a job held for its dependencies (No-Packing, small.x: ready 60 s after launch, fetch + build 5 s, init 7 s)', () => {
  // a runs 72 → 1072; b arrives at 100 and waits for a; c arrives at 200 and overtakes b.
  const log = new EventLog();
  const result = run(
    [
      traceJob('a', { arrivalSeconds: 0, iterations: 1000 }),
      after(traceJob('b', { arrivalSeconds: 100, iterations: 500 }), 'a'),
      traceJob('c', { arrivalSeconds: 200, iterations: 300 }),
    ],
    log,
    true,
  );
  const job = (id: string) => result.jobs.find((j) => j.id === id);

  it('is out of the rounds until its dependency ends: a later job runs first', () => {
    expect(log.time('arrival', { jobId: 'b' })).toBe(100);
    expect(log.time('start-issued', { jobId: 'c' })).toBe(360); // the 300 s round
    expect(log.time('completion', { jobId: 'a' })).toBe(1072);
    expect(log.time('released', { jobId: 'b' })).toBe(1072);
  });

  it('joins the queue when its dependency ends and is planned at the next round, as an arrival then would be', () => {
    expect(log.time('instance-launch', { instanceId: 'i-3' })).toBe(1200);
    expect(log.time('start-issued', { jobId: 'b' })).toBe(1260);
    expect(job('b')).toMatchObject({ startSeconds: 1272, endSeconds: 1772, jctSeconds: 1772 - 100 });
  });

  it('is predicted held when a round first sees it: its predicted end is its end (the world follows the model)', () => {
    expect(job('b')?.predictedEndSeconds).toBe(1772);
    expect(job('b')?.predictedStartSeconds).toBe(1272);
    expect(result.queue?.predErrAvg).toBe(0);
  });

  it('counts its wait to be placed from when it joined the queue, not from its arrival', () => {
    const starts = runSimulation({
      trace: trace(
        traceJob('a', { arrivalSeconds: 0, iterations: 1000 }),
        after(traceJob('b', { arrivalSeconds: 100, iterations: 500 }), 'a'),
      ),
      scheduler: new NoPackingScheduler(catalog),
      catalog,
      groundTruth: flat,
      starts: {}, // report them, every part off
    }).starts;
    // a: placed at the 0 s round (waited 0); b: joined at 1072, placed at the 1200 s round (128 s).
    expect(starts?.waitToPlaceSecondsMean).toBe((0 + 128) / 2);
  });
});

describe('dependencies met, chained and joined', () => {
  it('a job whose dependency ended before it arrived is not held: it runs as if it had none', () => {
    const jobs = [
      traceJob('a', { iterations: 1000 }),
      traceJob('b', { arrivalSeconds: 1100, iterations: 500 }),
    ];
    const free = run(jobs);
    const log = new EventLog();
    const held = run([jobs[0] as TraceJob, after(jobs[1] as TraceJob, 'a')], log);
    expect(log.all('released')).toEqual([]);
    expect(held.jobs).toEqual(free.jobs);
    expect(held.summary.totalCost).toBe(free.summary.totalCost);
  });

  it('a chain runs link by link, and a join waits for the later of its dependencies', () => {
    const log = new EventLog();
    run(
      [
        traceJob('a', { iterations: 600 }),
        traceJob('b', { iterations: 2000 }),
        after(traceJob('c', { arrivalSeconds: 10, iterations: 300 }), 'a'),
        after(traceJob('d', { arrivalSeconds: 20, iterations: 300 }), 'c'),
        after(traceJob('e', { arrivalSeconds: 30, iterations: 300 }), 'd', 'b'),
      ],
      log,
    );
    const end = (id: string) => log.time('completion', { jobId: id });
    expect(log.time('released', { jobId: 'c' })).toBe(end('a'));
    expect(log.time('released', { jobId: 'd' })).toBe(end('c'));
    expect(end('d')).toBeLessThan(end('b'));
    expect(log.time('released', { jobId: 'e' })).toBe(end('b'));
  });
});

describe('a trace whose dependencies cannot be replayed is refused, naming the job', () => {
  const cases: [string, TraceJob[], string][] = [
    ['an unknown job', [after(traceJob('a'), 'zz')], 'job a: dependsOn zz is not a job earlier in the trace'],
    ['the job itself', [after(traceJob('a'), 'a')], 'job a: dependsOn names the job itself'],
    [
      'a later job',
      [after(traceJob('a'), 'b'), traceJob('b', { arrivalSeconds: 5 })],
      'job a: dependsOn b is not a job earlier in the trace',
    ],
    [
      "another team's job",
      [{ ...traceJob('a'), team: 'vision' }, after({ ...traceJob('b'), team: 'nlp' }, 'a')],
      "job b: dependsOn a, a job of team vision (a job waits only for its own team's)",
    ],
    [
      'a job that fails',
      [{ ...traceJob('a'), successful: false }, after(traceJob('b'), 'a')],
      'job b: dependsOn a, which fails in the trace, so this job could never start',
    ],
  ];
  for (const [what, jobs, message] of cases)
    it(`dependsOn ${what}`, () => {
      expect(() => run(jobs)).toThrow(message);
    });
});

describe('any dependency graph (property)', () => {
  it('every job ends; none starts before all it depends on ended; each joins the queue exactly when the last ended', () => {
    const graph = fc
      .array(
        fc.record({
          gap: fc.integer({ min: 0, max: 900 }),
          iterations: fc.integer({ min: 50, max: 3000 }),
          picks: fc.array(fc.nat(), { maxLength: 3 }),
        }),
        { minLength: 1, maxLength: 12 },
      )
      .map((specs) => {
        let at = 0;
        return specs.map((s, i) => {
          at += s.gap;
          const dependsOn = i === 0 ? [] : [...new Set(s.picks.map((p) => `j${p % i}`))];
          const job = traceJob(`j${i}`, { arrivalSeconds: at, iterations: s.iterations });
          return dependsOn.length === 0 ? job : after(job, ...dependsOn);
        });
      });
    fc.assert(
      fc.property(graph, fc.constantFrom('no-packing', 'eva'), (jobs, scheduler) => {
        const log = new EventLog();
        const result = runSimulation({
          trace: trace(...jobs),
          scheduler:
            scheduler === 'eva'
              ? createScheduler('eva', { catalog, interferenceProfile: flat })
              : new NoPackingScheduler(catalog),
          catalog,
          groundTruth: flat,
          onEvent: log.record,
        });
        expect(result.jobs.every((j) => j.endSeconds !== null)).toBe(true);
        for (const job of jobs) {
          const deps = job.dependsOn ?? [];
          const lastEnd = Math.max(...deps.map((id) => log.time('completion', { jobId: id })));
          const starts = log.times('start-issued', { jobId: job.id });
          for (const t of starts) expect(t).toBeGreaterThanOrEqual(deps.length === 0 ? 0 : lastEnd);
          const released = log.times('released', { jobId: job.id });
          expect(released).toEqual(deps.length > 0 && lastEnd > job.arrivalSeconds ? [lastEnd] : []);
        }
      }),
      { numRuns: 60, seed: 7 },
    );
  });
});
