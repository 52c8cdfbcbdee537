import { describe, expect, it } from 'vitest';
import type { InstanceRecord, JobRecord, TaskRecord } from '../../../src/controller/state-store.js';
import { SimulatedCloud } from '../../../src/sim/controller-runtime/simulated-cloud.js';
import { SimulatedWorkers } from '../../../src/sim/controller-runtime/simulated-workers.js';
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
function world() {
  const catalog = testCatalog();
  const clock = new VirtualClock(0);
  const timeline = new Timeline();
  const cloud = new SimulatedCloud({ catalog, clock, timeline });
  const workers = new SimulatedWorkers({ clock, timeline, cloud, groundTruth: constantPairwise(1) });
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
