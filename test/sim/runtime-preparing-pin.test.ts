import { describe, expect, it } from 'vitest';
import type { ClusterSnapshot, SchedJob } from '../../src/core/model.js';
import type { Configuration } from '../../src/scheduler/types.js';
import { runControllerSimulation } from '../../src/sim/controller-runtime/run-controller.js';
import { runSimulation } from '../../src/sim/run-simulation.js';
import { constantPairwise } from '../../src/world/ground-truth.js';
import {
  currentConfiguration,
  ScriptedScheduler,
  testCatalog,
  trace,
  traceJob,
  traceTask,
} from './sim-fixtures.js';

/**
 * A job whose tasks are still being prepared is pinned in both runtimes' snapshots, and its progress dated from its
 * slowest task's preparation plus its init delay. The 2-task job A is placed at 0 s on two new small.x (registered at
 * 60 s, its tasks started then): node0 is fetched and built by 83 s, node1 (a 200 s fetch) by 263 s; with its 100 s
 * init A makes progress from 363 s. Rounds every 60 s see it pinned through 240 s and movable from 300 s.
 */
const catalog = testCatalog();
const groundTruth = constantPairwise(1);
const gang = trace(
  traceJob('A', {
    iterations: 2000,
    initDelaySeconds: 100,
    tasks: [traceTask('node0', { fetchDelaySeconds: 20 }), traceTask('node1', { fetchDelaySeconds: 200 })],
  }),
);

/** Every waiting task on a small.x of its own. */
function script(snapshot: ClusterSnapshot, round: number): Configuration | undefined {
  const waiting = snapshot.tasks.filter((t) => t.instanceId === undefined).map((t) => t.id);
  if (waiting.length === 0) return undefined;
  return {
    instances: [
      ...currentConfiguration(snapshot).instances,
      ...waiting.map((id, i) => ({
        id: `new-${round}-${i}`,
        typeName: 'small.x',
        isNew: true,
        taskIds: [id],
      })),
    ],
  };
}

/** The job as each round saw it, by round time. */
function rounds(scheduler: ScriptedScheduler): Map<number, SchedJob> {
  return new Map(
    scheduler.snapshots.flatMap((s) => (s.jobs[0] === undefined ? [] : [[s.nowSeconds, s.jobs[0]]])),
  );
}

async function bothRuntimes(coStart: boolean) {
  const inEngine = new ScriptedScheduler('scripted', script);
  const inController = new ScriptedScheduler('scripted', script);
  const engine = runSimulation({
    trace: gang,
    scheduler: inEngine,
    catalog,
    groundTruth,
    roundSeconds: 60,
    starts: { coStart },
  });
  const controller = await runControllerSimulation({
    trace: gang,
    scheduler: inController,
    catalog,
    groundTruth,
    roundSeconds: 60,
    coStart,
  });
  return { engine, controller, engineRounds: rounds(inEngine), controllerRounds: rounds(inController) };
}

async function expectSameRule(coStart: boolean): Promise<void> {
  const { engine, controller, engineRounds, controllerRounds } = await bothRuntimes(coStart);
  expect(engine.jobs.map((j) => [j.startSeconds, j.endSeconds])).toEqual([[363, 2363]]);
  expect(controller.jobs.map((j) => [j.startSeconds, j.endSeconds])).toEqual([[363, 2363]]);
  const pinned = (seen: Map<number, SchedJob>): number[] =>
    [...seen].filter(([, j]) => !j.reconfigurable).map(([t]) => t);
  expect(pinned(engineRounds)).toEqual([60, 120, 180, 240]);
  expect(pinned(controllerRounds)).toEqual([60, 120, 180, 240]);
  for (const [now, c] of controllerRounds) {
    const e = engineRounds.get(now);
    expect(e, `round at ${now}`).toBeDefined();
    // Progress dated alike once it began; before, none while it is prepared, and still ahead while it initializes
    // (the controller's, which holds a no-move window through the init; the engine's is undefined then).
    if (e?.runningSinceSeconds !== undefined) expect(c.runningSinceSeconds).toBe(e.runningSinceSeconds);
    else if (now < 263) expect(c.runningSinceSeconds, `round at ${now}`).toBeUndefined();
    else expect(c.runningSinceSeconds).toBe(363);
    if (c.lastCheckpointSeconds !== undefined) expect(c.lastCheckpointSeconds).toBeLessThanOrEqual(now);
  }
  expect(engineRounds.get(420)?.runningSinceSeconds).toBe(363);
}

describe('a job whose tasks are being prepared, in both runtimes', () => {
  it('is pinned until its slowest task is prepared, its progress dated from then plus its init', async () => {
    await expectSameRule(false);
  });

  it('with co-start, is pinned until the barrier releases its tasks prepared together, dated from the release', async () => {
    await expectSameRule(true);
  });
});
