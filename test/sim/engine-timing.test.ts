import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BUNDLED_CATALOG_PATH, loadCatalogFile, PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import { NoPackingScheduler } from '../../src/scheduler/baselines/no-packing.js';
import { runSimulation } from '../../src/sim/run-simulation.js';
import { constantPairwise } from '../../src/world/ground-truth.js';
import { parseEvaTrace } from '../../src/sim/traces/eva-json.js';
import { EventLog, testCatalog, trace, traceJob, traceTask } from './sim-fixtures.js';

describe('the digest §6 worked timing example (No-Packing, pai_200 job 0)', () => {
  const catalog = loadCatalogFile(BUNDLED_CATALOG_PATH);
  const pai = parseEvaTrace(
    readFileSync(join(PROJECT_ROOT, 'data', 'eva-reference', 'pai_200.json'), 'utf8'),
    'pai_200.json',
  );
  const job0 = pai.jobs[0];
  const log = new EventLog();
  const result = runSimulation({
    trace: { name: 'job0', jobs: job0 === undefined ? [] : [job0] },
    scheduler: new NoPackingScheduler(catalog),
    catalog,
    groundTruth: constantPairwise(0.95),
    onEvent: log.record,
  });

  it('is resnet18[0] with demand [1, 12, 16] arriving at 960 s for 12,430 s', () => {
    expect(job0?.name).toBe('resnet18[0]');
    expect(job0?.tasks[0]?.demand).toEqual({ any: [1, 12, 16] });
    expect(job0?.arrivalSeconds).toBe(960);
    expect(job0?.durationSeconds).toBe(12430);
  });

  it('orders a p3.8xlarge at the 1200 s round (12 vCPUs do not fit a p3.2xlarge)', () => {
    expect(log.time('arrival')).toBe(960);
    expect(log.all('instance-launch')).toEqual([
      { timeSeconds: 1200, kind: 'instance-launch', instanceId: 'i-1', typeName: 'p3.8xlarge' },
    ]);
  });

  it('has the instance ready at 1429 (37 + 60 + 132 s), the task running at 1440, progress from 1520', () => {
    expect(log.time('instantiated')).toBe(1237);
    expect(log.time('worker-started')).toBe(1297);
    expect(log.time('registered')).toBe(1429);
    expect(log.time('start-issued')).toBe(1429);
    expect(log.time('launched')).toBe(1440); // fetch 1 s + build 10 s
    expect(log.time('job-active')).toBe(1520); // init 80 s
  });

  it('finishes at 1520 + 12,430 s (the reference ticks once more: 13,951)', () => {
    expect(log.time('completion')).toBe(13950);
    expect(result.jobs[0]).toMatchObject({ startSeconds: 1520, endSeconds: 13950, jctSeconds: 13950 - 960 });
  });

  it('terminates the instance at the next round (14,100 s + 1 s) and bills 1237 → 14101 at $12.24/h', () => {
    expect(log.time('terminate-issued')).toBe(14100);
    expect(log.time('terminated')).toBe(14101);
    expect(result.summary.totalCost).toBeCloseTo((12.24 * (14101 - 1237)) / 3600, 9); // $43.7376
    expect(result.summary.peakCostPerHour).toBeCloseTo(12.24, 9);
    expect(result.summary.instancesLaunched).toBe(1);
  });

  it('splits that bill by what the instance was doing (its task holds 12 of 32 vCPUs: a 0.375 share)', () => {
    const dollars = (seconds: number) => (12.24 * seconds) / 3600;
    const share = 12 / 32; // [1, 12, 16] of [4, 32, 244]: vCPUs dominate
    expect(result.costBreakdown?.bootAndShutdown).toBeCloseTo(dollars(1429 - 1237 + 1), 9); // boot, and terminate
    expect(result.costBreakdown?.preparing).toBeCloseTo(dollars(share * (1440 - 1429)), 9); // fetch and build
    expect(result.costBreakdown?.starting).toBeCloseTo(dollars(share * (1520 - 1440)), 9); // init delay
    expect(result.costBreakdown?.working).toBeCloseTo(dollars(share * (13950 - 1520)), 9); // alone: rate 1
    expect(result.costBreakdown?.slowdown).toBe(0);
    expect(result.costBreakdown?.checkpointing).toBe(0);
    // The rest of the instance while the task held it, then all of it until the round dropped it.
    expect(result.costBreakdown?.idle).toBeCloseTo(
      dollars((1 - share) * (13950 - 1429) + (14100 - 13950)),
      9,
    );
  });
});

describe('billing arithmetic', () => {
  // small.x: $0.001/s, instantiate 10 s, worker 20 s, register 30 s, terminate 5 s.
  it('bills one job from instantiate-complete to terminate-complete, per second', () => {
    const catalog = testCatalog();
    const log = new EventLog();
    const result = runSimulation({
      trace: trace(traceJob('j', { arrivalSeconds: 0, iterations: 1000, initDelaySeconds: 7 })),
      scheduler: new NoPackingScheduler(catalog),
      catalog,
      groundTruth: constantPairwise(0.5),
      onEvent: log.record,
    });
    // Round 0: order; 10 billed; 60 ready; 60 + fetch 2 + build 3 = 65 launched; 72 active; 1072 done;
    // round 1200 drops the instance; 1205 terminated.
    expect(log.time('instantiated')).toBe(10);
    expect(log.time('launched')).toBe(65);
    expect(log.time('completion')).toBe(1072);
    expect(log.time('terminated')).toBe(1205);
    expect(result.summary.totalCost).toBeCloseTo(1.195, 12);
    expect(result.series.cumulativeCost.at(-1)).toBeCloseTo(1.195, 9);
    expect(result.series.timeSeconds.at(-1)).toBe(1205);
  });

  it('adds up instances of different prices that overlap in time', () => {
    const catalog = testCatalog();
    const result = runSimulation({
      trace: trace(
        traceJob('small', { arrivalSeconds: 0, iterations: 500 }),
        traceJob('big', {
          arrivalSeconds: 100,
          iterations: 2000,
          tasks: [traceTask('node0', { demand: { any: [2, 8, 8] } })],
        }),
      ),
      scheduler: new NoPackingScheduler(catalog),
      catalog,
      groundTruth: constantPairwise(0.5),
    });
    // small: billed 10 → 600 (done at 572, dropped at round 600, terminated 605) = 595 s at $3.6/h.
    // big (2 GPUs → big.x): ordered at 300, billed 310 → 2372 done → round 2400 → 2405: 2095 s at $10.8/h.
    expect(result.jobs.map((j) => j.endSeconds)).toEqual([572, 300 + 60 + 5 + 7 + 2000]);
    expect(result.summary.totalCost).toBeCloseTo((3.6 * 595 + 10.8 * 2095) / 3600, 12);
    expect(result.summary.peakCostPerHour).toBeCloseTo(14.4, 12);
    expect(result.summary.instancesLaunched).toBe(2);
  });

  it('keeps the job running until the next round when it finishes exactly at a round (rounds see it first)', () => {
    const catalog = testCatalog();
    const log = new EventLog();
    // Active at 72; 528 iterations end exactly at 600, a round.
    runSimulation({
      trace: trace(traceJob('j', { iterations: 528 })),
      scheduler: new NoPackingScheduler(catalog),
      catalog,
      groundTruth: constantPairwise(0.5),
      onEvent: log.record,
    });
    expect(log.time('completion')).toBe(600);
    expect(log.time('terminate-issued')).toBe(900);
  });

  it('holds rounds on multiples of roundSeconds and skips idle stretches without changing them', () => {
    const catalog = testCatalog();
    const log = new EventLog();
    runSimulation({
      trace: trace(
        traceJob('a', { arrivalSeconds: 50, iterations: 100 }),
        traceJob('b', { arrivalSeconds: 10_000, iterations: 100 }),
      ),
      scheduler: new NoPackingScheduler(catalog),
      catalog,
      groundTruth: constantPairwise(0.5),
      roundSeconds: 120,
      onEvent: log.record,
    });
    const rounds = log.times('round');
    expect(rounds.every((t) => t % 120 === 0)).toBe(true);
    expect(rounds[0]).toBe(120);
    expect(rounds).toContain(10_080); // b's first round
    expect(rounds.filter((t) => t > 1000 && t < 10_000)).toEqual([]); // nothing runs or is billed there
  });
});

describe('early rounds (ARCHITECTURE.md: rounds also run right after arrivals and completions)', () => {
  const catalog = loadCatalogFile(BUNDLED_CATALOG_PATH);
  const pai = parseEvaTrace(
    readFileSync(join(PROJECT_ROOT, 'data', 'eva-reference', 'pai_200.json'), 'utf8'),
    'pai_200.json',
  );
  const job0 = pai.jobs[0];
  const run = (earlyRounds: boolean) => {
    const log = new EventLog();
    runSimulation({
      trace: { name: 'job0', jobs: job0 === undefined ? [] : [job0] },
      scheduler: new NoPackingScheduler(catalog),
      catalog,
      groundTruth: constantPairwise(0.95),
      earlyRounds,
      onEvent: log.record,
    });
    return log;
  };

  it('orders the instance one second after the arrival instead of at the next period (1200 s)', () => {
    expect(run(false).all('instance-launch')[0]?.timeSeconds).toBe(1200);
    expect(run(true).all('instance-launch')[0]?.timeSeconds).toBe(961);
  });

  it('keeps the periodic rounds on their grid', () => {
    const rounds = run(true)
      .all('round')
      .map((e) => e.timeSeconds)
      .filter((t) => t !== 961 && t % 300 !== 0);
    // Besides the early round after the arrival, only the one after the completion is off the 300 s grid.
    expect(rounds.length).toBeLessThanOrEqual(1);
  });
});
