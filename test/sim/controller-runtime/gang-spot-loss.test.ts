import { describe, expect, it } from 'vitest';
import type { Catalog } from '../../../src/core/catalog.js';
import { SpotBaseline } from '../../../src/scheduler/baselines/spot-baseline.js';
import { runControllerSimulation } from '../../../src/sim/controller-runtime/run-controller.js';
import { noticeHandlingOf } from '../../../src/sim/run-request.js';
import { runSimulation } from '../../../src/sim/run-simulation.js';
import { withControllerJobIds } from '../../../src/sim/traces/controller-job-ids.js';
import { constantPairwise } from '../../../src/world/ground-truth.js';
import type { SimLogEntry } from '../../../src/world/simulation-types.js';
import { burstEvents, type SpotSimulation } from '../../../src/world/spot-world.js';
import { testCatalog, testSpotMarket, trace, traceJob, traceTask } from '../sim-fixtures.js';

/**
 * A two-task job one of whose hosts a spot interruption takes: node0 runs only on small.x (spot pool testa), node1
 * only on big.x (spot pool testb), so they run on two instances in two pools. Seed 1530 at 60 bursts per pool per 30
 * days empties testa at T ≈ 2,770 s, between the job's first and second periodic checkpoints, and neither pool again
 * (nor testb at all) before the job has ended. A synchronous job cannot go on without a task: in both runtimes the whole job goes back to its last
 * checkpoint and restarts, its surviving task included, and that restart is no move (no migration).
 */
function catalog(): Catalog {
  return {
    ...testCatalog(),
    spot: testSpotMarket(
      { typeName: 'small.x', zone: 'testa', pricePerHour: 1.08, interruption: '<5%' },
      { typeName: 'big.x', zone: 'testb', pricePerHour: 3.24, interruption: '<5%' },
    ),
  };
}

const CHECKPOINT_SECONDS = 1800;
const ITERATIONS = 20_000;
const JOB = trace(
  traceJob('J', {
    iterations: ITERATIONS,
    tasks: [
      traceTask('node0', { demand: { small: [1, 4, 8] } }),
      traceTask('node1', { demand: { big: [4, 4, 8] } }),
    ],
  }),
);

function spot(name: 'karpenter-spot' | 'skypilot-spot'): SpotSimulation {
  return { seed: 1530, burstsPerPoolPerMonth: 60, noticeHandling: noticeHandlingOf(name) };
}

async function both(name: 'karpenter-spot' | 'skypilot-spot') {
  const run = () => ({
    trace: withControllerJobIds(JOB),
    scheduler: new SpotBaseline(catalog(), name),
    catalog: catalog(),
    groundTruth: constantPairwise(1),
    checkpointIntervalSeconds: CHECKPOINT_SECONDS,
    spot: spot(name),
  });
  const engineLog: SimLogEntry[] = [];
  const controllerLog: SimLogEntry[] = [];
  const engine = runSimulation({ ...run(), onEvent: (e) => engineLog.push(e) });
  const controller = await runControllerSimulation({ ...run(), onEvent: (e) => controllerLog.push(e) });
  return { engine, controller, engineLog, controllerLog };
}

const kinds = (log: readonly SimLogEntry[], kind: string): SimLogEntry[] =>
  log.filter((e) => e.kind === kind);

describe('a spot interruption that takes one host of a two-task job', () => {
  it('falls in the job: testa empties between its first and second checkpoints, testb after its end', () => {
    const [testa, testb] = catalog().spot?.offerings ?? [];
    if (testa === undefined || testb === undefined) throw new Error('the catalog lacks its pools');
    const t = burstEvents(spot('karpenter-spot'), testa, 0, 0).burstAt;
    expect(t).toBeGreaterThan(CHECKPOINT_SECONDS + 100);
    expect(t).toBeLessThan(2 * CHECKPOINT_SECONDS);
    expect(burstEvents(spot('karpenter-spot'), testa, 1, t).burstAt).toBeGreaterThan(3 * ITERATIONS);
    expect(burstEvents(spot('karpenter-spot'), testb, 0, 0).burstAt).toBeGreaterThan(3 * ITERATIONS);
  });

  for (const name of ['karpenter-spot', 'skypilot-spot'] as const)
    it(`${name}: the whole job restarts from its checkpoint, with no migration, in both runtimes`, async () => {
      const { engine, controller, engineLog, controllerLog } = await both(name);
      for (const run of [engine, controller]) {
        expect(run.summary.jobs).toBe(1);
        expect(run.jobs[0]?.endSeconds).not.toBeNull();
        expect(run.spot?.lostWorkHours).toBeGreaterThan(0);
        // The restart in place of the task that survived is not a move.
        expect(run.jobs[0]?.migrations).toBe(0);
      }
      expect(controller.spot).toEqual(engine.spot);
      expect(controller.summary.migrationsPerJob).toBe(engine.summary.migrationsPerJob);
      // Neither runtime checkpoints the surviving task: it lost its progress with its job, nothing is left to save.
      expect(kinds(engineLog, 'checkpoint-issued')).toEqual([]);
      expect(kinds(controllerLog, 'checkpoint-issued')).toEqual([]);
      // Both tasks start twice (the first launch and the restart), the job works twice, and ends at the same second.
      expect(kinds(controllerLog, 'start-issued')).toHaveLength(4);
      expect(kinds(controllerLog, 'job-active')).toHaveLength(2);
      expect(controller.jobs.map((j) => [j.startSeconds, j.endSeconds])).toEqual(
        engine.jobs.map((j) => [j.startSeconds, j.endSeconds]),
      );
    });
});
