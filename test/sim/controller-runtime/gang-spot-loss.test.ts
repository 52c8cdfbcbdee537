import { describe, expect, it } from 'vitest';
import type { Catalog } from '../../../src/core/catalog.js';
import type { MemoryStateStore } from '../../../src/controller/memory-state-store.js';
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
 * (nor testb at all) before the job has ended. The engine sends the whole job back to the queue; the controller
 * keeps node1 on its instance, checkpoints it and starts it there again beside node0's replacement. That restart in
 * place moves no task: neither runtime counts a migration.
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

type SpotScheduler = 'karpenter-spot' | 'skypilot-spot';

function spot(name: SpotScheduler): SpotSimulation {
  return { seed: 1530, burstsPerPoolPerMonth: 60, noticeHandling: noticeHandlingOf(name) };
}

async function both(name: SpotScheduler) {
  const run = () => ({
    trace: withControllerJobIds(JOB),
    scheduler: new SpotBaseline(catalog(), name),
    catalog: catalog(),
    groundTruth: constantPairwise(1),
    checkpointIntervalSeconds: CHECKPOINT_SECONDS,
    spot: spot(name),
  });
  const controllerLog: SimLogEntry[] = [];
  const engine = runSimulation(run());
  let store: MemoryStateStore | undefined;
  const controller = await runControllerSimulation({
    ...run(),
    onEvent: (e) => controllerLog.push(e),
    inspectStore: (s) => (store = s),
  });
  if (store === undefined) throw new Error('the run did not hand its store over');
  return { engine, controller, controllerLog, store };
}

/** Where the controller had a task, in order: `checkpointing on X`, `starting on Y`, … (its task.state events). */
function placesOf(store: MemoryStateStore, taskId: string): string[] {
  return store
    .listEvents({ kind: 'task.state' })
    .filter((e) => e.taskId === taskId)
    .map((e) => /→ (checkpointing|starting) on (\S+)/.exec(e.message ?? ''))
    .flatMap((m) => (m === null ? [] : [`${m[1]} on ${m[2]}`]));
}

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
    it(`${name}: the survivor restarted in place counts no migration, in either runtime`, async () => {
      const { engine, controller, controllerLog, store } = await both(name);
      for (const run of [engine, controller]) {
        expect(run.summary.jobs).toBe(1);
        expect(run.jobs[0]?.endSeconds).not.toBeNull();
        // SkyPilot loses the work since the last periodic checkpoint; Karpenter's eviction at the notice lets the job
        // save its progress on the SIGTERM (5 s to kill and upload, within the notice).
        if (name === 'skypilot-spot') expect(run.spot?.lostWorkHours).toBeGreaterThan(0);
        else expect(run.spot?.lostWorkHours).toBe(0);
        expect(run.jobs[0]?.migrations).toBe(0);
        expect(run.summary.migrationsPerJob).toBe(0);
      }
      expect(controller.spot?.interruptions).toBe(engine.spot?.interruptions);
      // The controller did restart node1 in place: checkpointed on its instance and started there again.
      const [survivor] = store.listTasks().filter((t) => t.index === 1);
      const places = placesOf(store, survivor?.id as string);
      expect(places).toHaveLength(3);
      const host = /on (\S+)$/.exec(places[0] as string)?.[1] as string;
      expect(places).toEqual([`starting on ${host}`, `checkpointing on ${host}`, `starting on ${host}`]);
      // Its simulated worker checkpointed it (the one checkpoint-stop of the run): a stop, yet no move.
      const checkpoints = controllerLog.filter((e) => e.kind === 'checkpoint-issued');
      expect(checkpoints.map((e) => e.taskId)).toEqual([`${controller.jobs[0]?.id ?? ''}/node1`]);
      // The controller's own count: under skypilot-spot the host is found gone and node0 restarts from the queue,
      // nothing moved; under karpenter-spot the controller moved node0 off the host it drained at the notice (it
      // cannot tell that Karpenter's drain evicted node0 there already), one move.
      expect(store.listJobs()[0]?.migrations).toBe(name === 'skypilot-spot' ? 0 : 1);
    });
});
