import { describe, expect, it } from 'vitest';
import { runSimulation } from '../../../src/sim/run-simulation.js';
import { constantPairwise } from '../../../src/world/ground-truth.js';
import { createScheduler } from '../../../src/scheduler/registry.js';
import { runControllerSimulation } from '../../../src/sim/controller-runtime/run-controller.js';
import type { RunResult } from '../../../src/world/run-result.js';
import { testCatalog, trace, traceJob } from '../sim-fixtures.js';

/**
 * Two jobs whose cost and JCT follow from the delays by hand (small.x: $0.001/s; instantiate 10 s, worker start
 * 20 s, register 30 s, terminate 5 s; tasks: fetch 2 s, build 3 s; init 7 s; rounds every 300 s):
 * - A arrives at 0, round at 0 launches i1: up at 10 (billed from then), registered at 60, task started at 60,
 *   launched at 65, progressing at 72, 1000 iterations at 1/s: ends at 1072 (JCT 1072 s). The round at 1200 drops
 *   i1: gone at 1205, billed 1195 s = $1.195.
 * - B arrives at 100, round at 300 launches i2: up at 310, registered at 360, launched 365, progressing 372, 500
 *   iterations: ends at 872 (JCT 772 s). The round at 900 drops i2: gone at 905, billed 595 s = $0.595.
 * Total $1.79, mean JCT 922 s.
 */
const handTrace = trace(
  traceJob('a', { arrivalSeconds: 0, iterations: 1000 }),
  traceJob('b', { arrivalSeconds: 100, iterations: 500 }),
);
const catalog = testCatalog();
const groundTruth = constantPairwise(1);

function check(result: RunResult): void {
  expect(result.summary.totalCost).toBeCloseTo(1.79, 9);
  expect(result.summary.peakCostPerHour).toBeCloseTo(7.2, 9);
  expect(result.summary.instancesLaunched).toBe(2);
  const byId = new Map(result.jobs.map((j) => [j.id, j]));
  expect(byId.get('a')).toMatchObject({
    startSeconds: 72,
    endSeconds: 1072,
    jctSeconds: 1072,
    migrations: 0,
  });
  expect(byId.get('b')).toMatchObject({ startSeconds: 372, endSeconds: 872, jctSeconds: 772, migrations: 0 });
  expect(result.summary.meanJctHours).toBeCloseTo(922 / 3600, 9);
}

describe('a hand-computed trace in both runtimes', () => {
  for (const name of ['no-packing', 'eva'] as const) {
    it(`engine, ${name}`, () => {
      check(
        runSimulation({
          trace: handTrace,
          scheduler: createScheduler(name, { catalog, interferenceProfile: groundTruth }),
          catalog,
          groundTruth,
        }),
      );
    });

    it(`controller, ${name}`, async () => {
      check(
        await runControllerSimulation({
          trace: handTrace,
          scheduler: createScheduler(name, { catalog, interferenceProfile: groundTruth }),
          catalog,
          groundTruth,
        }),
      );
    });
  }

  it('the controller runtime gives the same figures with plain polling instead of worker wake-ups', async () => {
    // Polling every 5 s: every gated step of the hand trace happens on a multiple of 5 s, so nothing moves.
    check(
      await runControllerSimulation({
        trace: handTrace,
        scheduler: createScheduler('no-packing', { catalog, interferenceProfile: groundTruth }),
        catalog,
        groundTruth,
        pollSeconds: 5,
        wakeOnReports: false,
      }),
    );
  });
});

describe('a capacity error in the controller runtime', () => {
  it('falls back to the next type that fits (round/replacement.ts), as on EC2, and the jobs still finish', async () => {
    const result = await runControllerSimulation({
      trace: handTrace,
      scheduler: createScheduler('no-packing', { catalog, interferenceProfile: groundTruth }),
      catalog,
      groundTruth,
      refusedTypes: ['small.x'],
    });
    // Same timeline as above, each instance a big.x ($10.8/h, three times small.x's price): $1.79 × 3.
    expect(result.summary.totalCost).toBeCloseTo(5.37, 9);
    expect(result.summary.meanJctHours).toBeCloseTo(922 / 3600, 9);
    expect(result.jobs.every((j) => j.endSeconds !== null)).toBe(true);
  });
});
