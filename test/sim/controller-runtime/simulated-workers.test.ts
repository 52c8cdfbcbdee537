import { describe, expect, it } from 'vitest';
import type { InstanceRecord, JobRecord, TaskRecord } from '../../../src/controller/state-store.js';
import { SimulatedCloud } from '../../../src/sim/controller-runtime/simulated-cloud.js';
import {
  SimulatedWorkers,
  type SimulatedWorkersOptions,
} from '../../../src/sim/controller-runtime/simulated-workers.js';
import { Timeline } from '../../../src/sim/controller-runtime/timeline.js';
import { VirtualClock } from '../../../src/sim/controller-runtime/virtual-clock.js';
import { constantPairwise } from '../../../src/world/ground-truth.js';
import { buildSimJobs } from '../../../src/world/trace-jobs.js';
import type { SimJob } from '../../../src/world/entities.js';
import { testCatalog, trace, traceJob, traceTask } from '../sim-fixtures.js';

/**
 * The simulated workers on their own, driven as the controller's reconciler drives them (starts and stops), on a
 * simulated cloud whose small.x instances register 60 s after launch; tasks fetch in 2 s and build in 3 s (the build
 * skipped when the image is on the instance already).
 */
function world(o: Pick<SimulatedWorkersOptions, 'countMigration' | 'nextInstanceOf'> = {}) {
  const catalog = testCatalog();
  const clock = new VirtualClock(0);
  const timeline = new Timeline();
  const cloud = new SimulatedCloud({ catalog, clock, timeline });
  const workers = new SimulatedWorkers({ clock, timeline, cloud, groundTruth: constantPairwise(1), ...o });
  const until = (t: number): void => {
    for (;;) {
      const next = timeline.nextTime();
      if (next === undefined || next > t) break;
      clock.advanceTo(Math.max(next, clock.nowSeconds()));
      timeline.runUntil(clock.nowSeconds(), 'effect');
      workers.refreshRates();
    }
    clock.advanceTo(t);
  };
  const launch = async (token: string): Promise<InstanceRecord> => {
    const { instanceIds } = await cloud.launch({
      typeName: 'small.x',
      idempotencyToken: token,
      clusterName: 'c1',
      planId: 'round-1',
      instanceKey: `key-${token}`,
    });
    return { id: `inst-${token}`, cloudId: instanceIds[0] as string } as InstanceRecord;
  };
  return { catalog, clock, workers, until, launch };
}

describe('SimulatedWorkers start metrics', () => {
  it('a task stopped before its job was released and started again is ready from its new start, not its first', async () => {
    const { catalog, workers, until, launch } = world();
    const job = buildSimJobs(
      trace(traceJob('j', { tasks: [traceTask('node0'), traceTask('node1')] })),
      catalog,
    )[0] as SimJob;
    workers.addJob('job-1', job, ['t0', 't1']);
    const a = await launch('a');
    const b = await launch('b');
    until(60); // both registered
    const record = (id: string) => ({ id }) as TaskRecord;
    const jobRecord = { id: 'job-1' } as JobRecord;
    // node0 starts alone and runs at 65; it is stopped at 100, before node1 ever started (its job never released).
    await workers.start({ task: record('t0'), job: jobRecord, instance: a });
    until(100);
    expect(job.tasks[0]?.state).toBe('running');
    expect(await workers.stop({ task: record('t0'), instance: a, checkpoint: false })).toBe('stopped');
    // Both start at 200: node0 runs at 202 (its image is on `a` already), node1 at 205; the job is released then.
    until(200);
    await workers.start({ task: record('t0'), job: jobRecord, instance: a });
    await workers.start({ task: record('t1'), job: jobRecord, instance: b });
    until(210);
    expect(job.tasks.map((t) => t.state)).toEqual(['running', 'running']);
    // The skew is between this start's ready times (202 and 205), not from node0's first run at 65.
    expect(workers.starts.skews).toEqual([3]);
    // Barrier idle: node0 held its share of small.x ($0.001/s) for those 3 s only.
    expect(workers.starts.barrierIdleCost).toBeGreaterThan(0);
    expect(workers.starts.barrierIdleCost).toBeLessThanOrEqual(0.003 + 1e-12);
  });
});

describe('SimulatedWorkers migration count', () => {
  it('counts a move once, at the first stop of a task leaving its instance; a restart in place moves nothing', async () => {
    // The controller's next placement of each task, as its pending starts say (the runtime reads them from the store).
    const next = new Map<string, string>();
    let counted = 0;
    const { catalog, workers, until, launch } = world({
      nextInstanceOf: (taskId) => next.get(taskId),
      countMigration: () => (counted += 1),
    });
    const job = buildSimJobs(
      trace(traceJob('j', { tasks: [traceTask('node0'), traceTask('node1')] })),
      catalog,
    )[0] as SimJob;
    workers.addJob('job-1', job, ['t0', 't1']);
    const a = await launch('a');
    const b = await launch('b');
    const c = await launch('c');
    until(60);
    const record = (id: string) => ({ id }) as TaskRecord;
    const jobRecord = { id: 'job-1' } as JobRecord;
    const startOn = async (placement: readonly InstanceRecord[]): Promise<void> => {
      await workers.start({ task: record('t0'), job: jobRecord, instance: placement[0] as InstanceRecord });
      await workers.start({ task: record('t1'), job: jobRecord, instance: placement[1] as InstanceRecord });
    };
    const stopBoth = async (placement: readonly InstanceRecord[]): Promise<void> => {
      for (const [i, id] of ['t0', 't1'].entries())
        await workers.stop({ task: record(id), instance: placement[i] as InstanceRecord, checkpoint: true });
    };
    await startOn([a, b]);
    until(100);
    expect(job.tasks.map((t) => t.state)).toEqual(['running', 'running']);

    // Both restart where they run (a job restarted whole in place): checkpointed and stopped, no move.
    next.set('t0', a.id).set('t1', b.id);
    await stopBoth([a, b]);
    until(200);
    expect(job.tasks.map((t) => t.state)).toEqual(['stopped', 'stopped']);
    expect([job.migrations, counted]).toEqual([0, 0]);

    // node0 restarts in place, node1 moves to c: one move, counted at node1's stop (node0's came first).
    await startOn([a, b]);
    until(300);
    next.set('t0', a.id).set('t1', c.id);
    await stopBoth([a, b]);
    expect([job.migrations, counted]).toEqual([1, 1]);
    until(400);
    await startOn([a, c]);
    until(500);

    // Both leave (node1 back to the queue, no start pending): one more move, once for the job.
    next.set('t0', b.id).delete('t1');
    await stopBoth([a, c]);
    expect([job.migrations, counted]).toEqual([2, 2]);
  });
});
