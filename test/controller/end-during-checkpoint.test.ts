import { describe, expect, it } from 'vitest';
import { endJobWithTasks } from '../../src/controller/job-end.js';
import type {
  TaskControl,
  TaskStartRequest,
  TaskStatus,
  TaskStopRequest,
} from '../../src/controller/seams.js';
import type { InstanceRecord, TaskRecord } from '../../src/controller/state-store.js';
import { CPU_SMALL, handPlan, jobSpec, reconcilerFor, rig } from './controller-fixtures.js';

/**
 * A job that ends (a cancel, maxRunSeconds) while a move's checkpoint-stop of its task is under way: the move's stop,
 * still pending, is asked again without its checkpoint, so the worker kills the task instead of waiting out the job's
 * checkpoint timeout. Read from the store on every pass: a controller restarted after the end asks the same.
 */

/** Task control whose workers register when told and whose stops stay under way (the task ignores the signal). */
class SlowStopControl implements TaskControl {
  readonly name = 'slow-stop';
  readonly calls: string[] = [];
  readonly registered = new Set<string>();
  async start(r: TaskStartRequest): Promise<void> {
    this.calls.push(`start ${r.task.id} on ${r.instance.id}`);
  }
  async stop(r: TaskStopRequest): Promise<'stopped' | 'pending'> {
    this.calls.push(`stop ${r.task.id} on ${r.instance.id}${r.checkpoint ? ' (checkpoint)' : ''}`);
    return 'pending';
  }
  async status(): Promise<TaskStatus> {
    return 'running';
  }
  workerRegistered(instance: InstanceRecord): boolean {
    return this.registered.has(instance.id);
  }
}

/** Job A on inst-1 moves (make before break) to a new instance; once that is ready, its task checkpoints. */
async function aCheckpointing() {
  const control = new SlowStopControl();
  control.registered.add('inst-1');
  const r = rig({}, { tasks: control });
  const a = r.controller.submit(jobSpec('a', CPU_SMALL), 'research');
  const task = `${a.id}.0`;
  await r.controller.runRound();
  r.cloud.bootInstantly = false;
  const reconciler = reconcilerFor(r, control, { settings: { makeBeforeBreak: true } });
  const { plan, diff } = handPlan(r, {
    instances: [
      { id: 'inst-1', typeName: 'c7i.xlarge', isNew: false, taskIds: [] },
      { id: 'new-1', typeName: 'c7i.2xlarge', isNew: true, taskIds: [task] },
    ],
  });
  const applied = reconciler.applyPlan(plan, diff);
  await reconciler.progress();
  r.cloud.bootAll();
  await reconciler.syncWithCloud();
  control.registered.add(applied.launched.get('new-1') as string);
  await reconciler.progress();
  expect(control.calls).toContain(`stop ${task} on inst-1 (checkpoint)`);
  expect(r.store.getTask(task)).toMatchObject({ state: 'checkpointing', instanceId: 'inst-1' });
  control.calls.length = 0;
  return { r, a, task, control, reconciler };
}

describe('a job ending while its task checkpoints off an instance', () => {
  it('a cancel asks the stop again without its checkpoint, at the next pass and at every pass after', async () => {
    const { r, a, task, control, reconciler } = await aCheckpointing();
    r.controller.cancel(a.id);
    expect(r.store.getJob(a.id)?.state).toBe('cancelled');
    await reconciler.progress();
    // Before, the move's checkpoint-stop went on: the worker waited out the job's checkpoint timeout.
    expect(control.calls.filter((c) => c.startsWith('stop'))).toEqual([`stop ${task} on inst-1`]);
    await reconciler.progress();
    expect(control.calls.filter((c) => c.includes('(checkpoint)'))).toEqual([]);
    // One stop stands in the store (the move's), and no start follows it.
    expect(r.store.listIntents({ states: ['pending'], kind: 'stop-task' })).toHaveLength(1);
    expect(r.store.listIntents({ states: ['pending'], kind: 'start-task' })).toEqual([]);
    expect(control.calls.filter((c) => c.startsWith('start'))).toEqual([]);
  });

  it('failed past maxRunSeconds, then a controller restarted: the stop goes without a checkpoint', async () => {
    const { r, a, task } = await aCheckpointing();
    r.store.transaction(() =>
      endJobWithTasks(r.store, a.id, 'failed', 'ran past its maxRunSeconds: stopped without a checkpoint'),
    );
    // A new controller process: nothing of the first's requests to workers, only the store.
    const control = new SlowStopControl();
    for (const i of r.store.listInstances()) control.registered.add(i.id);
    const restarted = reconcilerFor(r, control, { settings: { makeBeforeBreak: true } });
    await restarted.progress();
    expect(control.calls.filter((c) => c.startsWith('stop'))).toEqual([`stop ${task} on inst-1`]);
    const current = r.store.getTask(task) as TaskRecord;
    expect(current).toMatchObject({ state: 'checkpointing', instanceId: 'inst-1' });
  });
});
