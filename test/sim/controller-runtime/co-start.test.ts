import { describe, expect, it } from 'vitest';
import type { ClusterSnapshot } from '../../../src/core/model.js';
import type { Configuration } from '../../../src/scheduler/types.js';
import { runControllerSimulation } from '../../../src/sim/controller-runtime/run-controller.js';
import { runSimulation } from '../../../src/sim/run-simulation.js';
import { constantPairwise } from '../../../src/world/ground-truth.js';
import {
  currentConfiguration,
  EventLog,
  ScriptedScheduler,
  testCatalog,
  trace,
  traceJob,
  traceTask,
} from '../sim-fixtures.js';

/**
 * The co-start barrier in the controller runtime: the real reconciler's barrier (round/co-start.ts through
 * controller/reconcile/effects/tasks.ts) over simulated workers that hold a prepared task and report it ready in the
 * store's co-start record. The scenario of the engine's test (engine-co-start.test.ts): A runs alone on a big.x from
 * 0 s (registered at 60 s); the 2-task job B arrives at 300 s, and the round at 300 s puts B/node0 next to A (its
 * image is there: ready 2 s after its start) and B/node1 on a new small.x (registered at 360 s, ready 5 s later).
 * The script names tasks by their co-location keys, which both runtimes share.
 */
const catalog = testCatalog();
const twoTaskTrace = trace(
  traceJob('A', { iterations: 5000 }),
  traceJob('B', { arrivalSeconds: 300, iterations: 1000, tasks: [traceTask('node0'), traceTask('node1')] }),
);

function script(snapshot: ClusterSnapshot): Configuration | undefined {
  const idOf = (key: string): string | undefined => snapshot.tasks.find((t) => t.key === key)?.id;
  const current = currentConfiguration(snapshot);
  const a = idOf('a[A]_node0');
  const b0 = idOf('a[B]_node0');
  const b1 = idOf('a[B]_node1');
  if (current.instances.length === 0 && a !== undefined)
    return { instances: [{ id: 'n1', typeName: 'big.x', isNew: true, taskIds: [a] }] };
  const big = current.instances.find((i) => i.typeName === 'big.x');
  const placed = new Set(current.instances.flatMap((i) => i.taskIds));
  if (big === undefined || b0 === undefined || b1 === undefined || placed.has(b1)) return undefined;
  return {
    instances: [
      ...current.instances.map((i) => (i === big ? { ...i, taskIds: [...i.taskIds, b0] } : i)),
      { id: 'n2', typeName: 'small.x', isNew: true, taskIds: [b1] },
    ],
  };
}

async function controllerRun(coStart: boolean) {
  const log = new EventLog();
  const result = await runControllerSimulation({
    trace: twoTaskTrace,
    scheduler: new ScriptedScheduler('scripted', script),
    catalog,
    groundTruth: constantPairwise(1),
    coStart,
    reportStarts: true,
    onEvent: log.record,
  });
  return { log, result };
}

describe('co-start in the controller runtime', () => {
  it('without it, B/node0 runs at 302 s next to A and idles until B/node1 runs at 365 s', async () => {
    const { log, result } = await controllerRun(false);
    expect(log.time('launched', { taskId: 'B/node0' })).toBe(302);
    expect(log.time('launched', { taskId: 'B/node1' })).toBe(365);
    expect(result.starts?.startSkewSecondsMean).toBe(63);
    // 63 s × a quarter of a $10.8/h big.x.
    expect(result.starts?.barrierIdleCost).toBeCloseTo((63 * 0.25 * 10.8) / 3600, 12);
  });

  it('with it, both tasks run at 365 s: the barrier prepares B/node0 once B/node1 can start, holds it 3 s, releases both', async () => {
    const off = await controllerRun(false);
    const { log, result } = await controllerRun(true);
    // Neither task's preparation starts before every one of them can (the small.x registers at 360 s).
    expect(log.time('start-issued', { taskId: 'B/node0' })).toBe(360);
    expect(log.time('start-issued', { taskId: 'B/node1' })).toBe(360);
    expect(log.time('launched', { taskId: 'B/node0' })).toBe(365);
    expect(log.time('launched', { taskId: 'B/node1' })).toBe(365);
    // B/node0 was ready at 362 s (image there) and held until its sibling was, at 365 s.
    expect(result.starts?.startSkewSecondsMean).toBe(3);
    expect(result.starts?.barrierIdleCost).toBeCloseTo((3 * 0.25 * 10.8) / 3600, 12);
    const jobB = (r: typeof result) => r.jobs.find((j) => j.id === 'B');
    expect(jobB(result)?.startSeconds).toBe(jobB(off.result)?.startSeconds);
    expect(jobB(result)?.endSeconds).toBe(jobB(off.result)?.endSeconds);
  });

  it('measures what the engine measures without co-start, and with it the same job start and end', async () => {
    const engine = (coStart: boolean) =>
      runSimulation({
        trace: twoTaskTrace,
        scheduler: new ScriptedScheduler('scripted', script),
        catalog,
        groundTruth: constantPairwise(1),
        starts: { coStart },
      });
    const [engineOff, engineOn] = [engine(false), engine(true)];
    const [controllerOff, controllerOn] = [await controllerRun(false), await controllerRun(true)];
    expect(controllerOff.result.starts).toEqual(engineOff.starts);
    expect(controllerOff.result.summary.totalCost).toBeCloseTo(engineOff.summary.totalCost, 9);
    for (const [c, e] of [
      [controllerOn.result, engineOn],
      [controllerOff.result, engineOff],
    ] as const)
      expect(c.jobs.map((j) => [j.id, j.startSeconds, j.endSeconds])).toEqual(
        e.jobs.map((j) => [j.id, j.startSeconds, j.endSeconds]),
      );
    // The engine knows each preparation's length and starts B/node0's 3 s later; the controller holds it instead.
    expect(engineOn.starts?.barrierIdleCost).toBe(0);
    expect(controllerOn.result.starts?.barrierIdleCost).toBeGreaterThan(0);
  });
});
