import { describe, expect, it } from 'vitest';
import type {
  TaskControl,
  TaskStartRequest,
  TaskStopRequest,
  TaskStatus,
} from '../../src/controller/seams.js';
import type { InstanceRecord, TaskRecord } from '../../src/controller/state-store.js';
import { buildSnapshot, readSnapshotInputs } from '../../src/controller/snapshot.js';
import { JOB_MOVE_WAITS_EVENT } from '../../src/controller/reconcile/plan-intents.js';
import {
  historyEvents,
  runningSeconds,
  WORK_EVENT_KINDS,
} from '../../src/sim/controller-runtime/state-history.js';
import type { QueueCaps } from '../../src/queue/caps.js';
import { CPU_SMALL, handPlan, jobSpec, reconcilerFor, rig } from './controller-fixtures.js';

/**
 * Make before break in the controller (round/gates.ts `moveStopGate`, as in the engine): a moving job's
 * checkpoint-stop waits until the instances it moves to are up and their workers registered; its tasks work on
 * meanwhile.
 */

/** Task control recording every call, whose workers register when told, and whose tasks report what is set. */
class RegisteringTaskControl implements TaskControl {
  readonly name = 'registering';
  readonly calls: string[] = [];
  readonly registered = new Set<string>();
  readonly statuses = new Map<string, TaskStatus>();
  async start(r: TaskStartRequest): Promise<void> {
    this.calls.push(`start ${r.task.id} on ${r.instance.id}`);
  }
  async stop(r: TaskStopRequest): Promise<'stopped' | 'pending'> {
    this.calls.push(`stop ${r.task.id} on ${r.instance.id}${r.checkpoint ? ' (checkpoint)' : ''}`);
    return 'stopped';
  }
  async status(task: TaskRecord): Promise<TaskStatus> {
    return this.statuses.get(task.id) ?? 'running';
  }
  workerRegistered(instance: InstanceRecord): boolean {
    return this.registered.has(instance.id);
  }
}

/** Job A runs on inst-1 (c7i.xlarge), its worker registered; the plan moves it to a new c7i.2xlarge. */
async function aMoving(caps: QueueCaps = {}, keepOld = true) {
  const control = new RegisteringTaskControl();
  control.registered.add('inst-1');
  const r = rig({}, { tasks: control });
  const a = r.controller.submit(jobSpec('a', CPU_SMALL), 'research');
  await r.controller.runRound();
  expect(r.store.getTask(`${a.id}.0`)).toMatchObject({ state: 'running', instanceId: 'inst-1' });
  r.cloud.bootInstantly = false;
  const reconciler = reconcilerFor(r, control, { settings: { caps, makeBeforeBreak: true } });
  const { plan, diff } = handPlan(r, {
    instances: [
      ...(keepOld ? [{ id: 'inst-1', typeName: 'c7i.xlarge', isNew: false, taskIds: [] }] : []),
      { id: 'new-1', typeName: 'c7i.2xlarge', isNew: true, taskIds: [`${a.id}.0`] },
    ],
  });
  reconciler.applyPlan(plan, diff);
  control.calls.length = 0;
  return { r, a, control, reconciler };
}

/**
 * A two-task job moving apart, make before break: t0 from one instance to a new one that is ready, t1 from another to
 * a new one still registering its worker (both launched and running).
 */
async function aGangMovingApart() {
  const control = new RegisteringTaskControl();
  for (const id of ['inst-1', 'inst-2']) control.registered.add(id);
  const r = rig({}, { tasks: control });
  const gang = r.controller.submit(jobSpec('gang', CPU_SMALL, { replicas: 2 }), 'research');
  const [t0, t1] = [`${gang.id}.0`, `${gang.id}.1`];
  await r.controller.runRound();
  const from0 = r.store.getTask(t0)?.instanceId as string;
  const from1 = r.store.getTask(t1)?.instanceId as string;
  expect(from0).not.toBe(from1);
  const reconciler = reconcilerFor(r, control, { settings: { makeBeforeBreak: true } });
  const { plan, diff } = handPlan(r, {
    instances: [
      { id: 'new-1', typeName: 'c7i.xlarge', isNew: true, taskIds: [t0] },
      { id: 'new-2', typeName: 'c7i.xlarge', isNew: true, taskIds: [t1] },
    ],
  });
  const applied = reconciler.applyPlan(plan, diff);
  const to0 = applied.launched.get('new-1') as string;
  const to1 = applied.launched.get('new-2') as string;
  await reconciler.progress();
  control.registered.add(to0);
  await reconciler.progress();
  // Both wait: t1's new instance is not ready.
  expect(r.store.getTask(t0)).toMatchObject({ state: 'running', instanceId: from0 });
  expect(r.store.getTask(t1)).toMatchObject({ state: 'running', instanceId: from1 });
  control.calls.length = 0;
  return { r, gang, t0, t1, from0, from1, to0, to1, control, reconciler };
}

describe('make before break (controller)', () => {
  it('keeps a moving task running until its new instance is ready, then checkpoints and starts it there', async () => {
    const { r, a, control, reconciler } = await aMoving();
    const task = `${a.id}.0`;
    // Recorded: the job is moving (pinned at its destination for the planner), its task still runs on inst-1. The
    // move is not counted until its task stops.
    expect(r.store.getJob(a.id)).toMatchObject({ state: 'migrating', migrations: 0 });
    expect(r.store.getTask(task)).toMatchObject({ state: 'running', instanceId: 'inst-1' });
    const snapshot = buildSnapshot(readSnapshotInputs(r.store, r.clock.nowSeconds()));
    expect(snapshot.jobs.find((j) => j.id === a.id)?.reconfigurable).toBe(false);
    expect(snapshot.tasks.find((t) => t.id === task)?.instanceId).toBe('inst-2');

    // inst-2 launched and booting: no stop.
    await reconciler.progress();
    expect(r.store.getInstance('inst-2')?.state).toBe('launching');
    expect(control.calls).toEqual([]);
    // Up, but its worker has not registered: still no stop.
    r.cloud.bootAll();
    await reconciler.syncWithCloud();
    await reconciler.progress();
    expect(r.store.getInstance('inst-2')?.state).toBe('running');
    expect(control.calls).toEqual([]);
    expect(r.store.getTask(task)).toMatchObject({ state: 'running', instanceId: 'inst-1' });
    expect(r.store.getJob(a.id)?.state).toBe('migrating');

    // Registered: the checkpoint-stop goes out, and the start follows in the same pass.
    control.registered.add('inst-2');
    await reconciler.progress();
    expect(control.calls).toEqual([`stop ${task} on inst-1 (checkpoint)`, `start ${task} on inst-2`]);
    expect(r.store.getTask(task)).toMatchObject({ state: 'running', instanceId: 'inst-2' });
    expect(r.store.getJob(a.id)?.migrations).toBe(1);
    const states = r.store
      .listEvents({ jobId: a.id, kind: 'job.state' })
      .map((e) => (e.data as { to: string }).to);
    expect(states).toEqual(['starting', 'running', 'migrating', 'starting', 'running']);
    // Its task went running → checkpointing → stopped → starting → running: no checkpointing while it worked on.
    const taskStates = r.store
      .listEvents({ kind: 'task.state' })
      .filter((e) => e.taskId === task)
      .map((e) => (e.data as { to: string }).to);
    expect(taskStates.slice(-4)).toEqual(['checkpointing', 'stopped', 'starting', 'running']);
    expect(r.store.listIntents({ states: ['pending'] })).toEqual([]);
  });

  it("records the move's wait, so export-trace counts the job working until its task is told to stop", async () => {
    const { r, a, control, reconciler } = await aMoving();
    // Running, then moving, at this instant: the move's own event says that the job works on while migrating.
    expect(r.store.listEvents({ jobId: a.id, kind: JOB_MOVE_WAITS_EVENT }).map((e) => e.data)).toEqual([
      { round: expect.any(Number) },
    ]);
    r.clock.advance(100);
    await reconciler.progress(); // inst-2 boots
    r.cloud.bootAll();
    await reconciler.syncWithCloud();
    r.clock.advance(50);
    control.registered.add('inst-2');
    await reconciler.progress(); // the checkpoint-stop, and the start on inst-2
    r.clock.advance(30);
    control.statuses.set(`${a.id}.0`, 'succeeded');
    await reconciler.progress();
    expect(r.store.getJob(a.id)?.state).toBe('succeeded');
    const history = {
      jobs: r.store.listJobs(),
      jobStateEvents: r.store.listEvents({ kind: 'job.state' }),
      workEvents: r.store.listEvents({ kinds: WORK_EVENT_KINDS }),
    };
    // 150 s on inst-1, most of them migrating, then 30 s on inst-2.
    expect(runningSeconds(historyEvents(history)).get(a.id)).toBe(150 + 30);
  });

  it('a job that finishes while its new instance boots succeeds, and nothing is stopped or started', async () => {
    const { r, a, control, reconciler } = await aMoving();
    await reconciler.progress(); // inst-2 booting
    control.statuses.set(`${a.id}.0`, 'succeeded');
    await reconciler.progress();
    // It never moved, as the simulator's runtimes count it.
    expect(r.store.getJob(a.id)).toMatchObject({ state: 'succeeded', migrations: 0 });
    await reconciler.progress(); // the next pass withdraws the ended job's start
    expect(control.calls.filter((c) => c.includes('(checkpoint)') || c.startsWith('start'))).toEqual([]);
    expect(r.store.listIntents({ states: ['pending'], kind: 'start-task' })).toEqual([]);
    expect(r.store.listIntents({ states: ['pending'], kind: 'stop-task' })).toEqual([]);
  });

  it('a job cancelled while its move waits stops its task at once without a checkpoint, and the passes go on', async () => {
    const { r, a, control, reconciler } = await aMoving();
    await reconciler.progress(); // inst-2 booting: the move's checkpoint-stop waits, the task works on
    expect(r.store.getTask(`${a.id}.0`)).toMatchObject({ state: 'running', instanceId: 'inst-1' });
    r.controller.cancel(a.id);
    // Before, every pass from here threw (a cancelled job's task may not go to checkpointing) and rounds stopped.
    await reconciler.progress();
    await reconciler.progress();
    expect(control.calls).toEqual([`stop ${a.id}.0 on inst-1`]);
    expect(r.store.getJob(a.id)).toMatchObject({ state: 'cancelled', migrations: 0 });
    expect(r.store.getTask(`${a.id}.0`)?.state).toBe('stopped');
    expect(r.store.listIntents({ states: ['pending'], kind: 'stop-task' })).toEqual([]);
    expect(r.store.listIntents({ states: ['pending'], kind: 'start-task' })).toEqual([]);
  });

  it('a task of a moving job that succeeds meanwhile is not started again; the rest moves and the job ends', async () => {
    const control = new RegisteringTaskControl();
    for (const id of ['inst-1', 'inst-2']) control.registered.add(id);
    const r = rig({}, { tasks: control });
    const gang = r.controller.submit(jobSpec('gang', CPU_SMALL, { replicas: 2 }), 'research');
    const [t0, t1] = [`${gang.id}.0`, `${gang.id}.1`];
    await r.controller.runRound();
    expect(r.store.getJob(gang.id)?.state).toBe('running');
    r.cloud.bootInstantly = false;
    const reconciler = reconcilerFor(r, control, { settings: { makeBeforeBreak: true } });
    const from = r.store.getTask(t1)?.instanceId as string;
    const { plan, diff } = handPlan(r, {
      instances: [{ id: 'new-1', typeName: 'c7i.2xlarge', isNew: true, taskIds: [t0, t1] }],
    });
    const to = reconciler.applyPlan(plan, diff).launched.get('new-1') as string;
    await reconciler.progress(); // the new instance boots; both tasks work on
    control.statuses.set(t0, 'succeeded');
    await reconciler.progress();
    // t0 has done its part: its start is withdrawn; the job is still moving (t1 waits for the new instance).
    expect(r.store.getTask(t0)?.state).toBe('succeeded');
    expect(r.store.getJob(gang.id)?.state).toBe('migrating');
    r.cloud.bootAll();
    await reconciler.syncWithCloud();
    control.registered.add(to);
    control.calls.length = 0;
    await reconciler.progress();
    expect(control.calls).toEqual([`stop ${t1} on ${from} (checkpoint)`, `start ${t1} on ${to}`]);
    expect(r.store.getJob(gang.id)).toMatchObject({ state: 'running', migrations: 1 });
    control.statuses.set(t1, 'succeeded');
    await reconciler.progress();
    expect(r.store.getJob(gang.id)?.state).toBe('succeeded');
    expect(r.store.listIntents({ states: ['pending'], kind: 'start-task' })).toEqual([]);
  });

  it('a move off an instance under a spot interruption notice stops at once: the two minutes are for the checkpoint', async () => {
    const { r, a, control, reconciler } = await aMoving();
    r.store.appendEvent({
      kind: 'instance.spot-interruption',
      instanceId: 'inst-1',
      message: 'inst-1 receives a spot interruption',
    });
    await reconciler.progress();
    expect(r.store.getInstance('inst-2')?.state).toBe('launching');
    expect(control.calls).toEqual([`stop ${a.id}.0 on inst-1 (checkpoint)`]);
    expect(r.store.getJob(a.id)?.migrations).toBe(1);
  });

  it('a gang moving off an instance under a spot notice stops every task at once, wherever each runs', async () => {
    const { r, gang, t0, t1, from0, from1, to0, to1, control, reconciler } = await aGangMovingApart();
    r.store.appendEvent({ kind: 'instance.spot-interruption', instanceId: from0, message: 'notice' });
    await reconciler.progress();
    await reconciler.progress();
    // t1's source has no notice, but its job restarts only once both have stopped: its stop goes with t0's.
    expect(control.calls.filter((c) => c.endsWith('(checkpoint)'))).toEqual([
      `stop ${t0} on ${from0} (checkpoint)`,
      `stop ${t1} on ${from1} (checkpoint)`,
    ]);
    expect(r.store.getTask(t0)).toMatchObject({ state: 'running', instanceId: to0 });
    expect(r.store.getTask(t1)).toMatchObject({ state: 'starting', instanceId: to1 });
    expect(r.store.getJob(gang.id)?.migrations).toBe(1);
  });

  it('a task whose sibling still works on, its stop pending, does not start: a job restarts once all have stopped', async () => {
    const { r, t0, t1, from1, to0, to1, control, reconciler } = await aGangMovingApart();
    // t0 has checkpointed and stopped, headed for its ready instance; t1 works on, its stop waiting for its instance
    // (as a pass cut short between the two stops leaves them).
    const stop0 = r.store
      .listIntents({ states: ['pending'], kind: 'stop-task' })
      .find((i) => i.kind === 'stop-task' && i.payload.taskId === t0);
    r.store.transaction(() => {
      r.store.setTaskState(t0, 'checkpointing');
      r.store.completeIntent(stop0?.id as number);
      r.store.setTaskState(t0, 'stopped');
      r.store.setTaskState(t0, 'starting', to0);
    });
    await reconciler.progress();
    await reconciler.progress();
    expect(control.calls).toEqual([]);
    expect(r.store.getTask(t0)).toMatchObject({ state: 'starting', instanceId: to0 });
    expect(r.store.getTask(t1)).toMatchObject({ state: 'running', instanceId: from1 });
    // t1's instance is ready: it stops, and both start.
    control.registered.add(to1);
    await reconciler.progress();
    expect(control.calls).toEqual([
      `stop ${t1} on ${from1} (checkpoint)`,
      `start ${t0} on ${to0}`,
      `start ${t1} on ${to1}`,
    ]);
  });

  it('a move of a gang counts once when its tasks stop, however many they are', async () => {
    const control = new RegisteringTaskControl();
    for (const id of ['inst-1', 'inst-2']) control.registered.add(id);
    const r = rig({}, { tasks: control });
    const gang = r.controller.submit(jobSpec('gang', CPU_SMALL, { replicas: 2 }), 'research');
    await r.controller.runRound();
    r.cloud.bootInstantly = false;
    const reconciler = reconcilerFor(r, control, { settings: { makeBeforeBreak: true } });
    const { plan, diff } = handPlan(r, {
      instances: [
        { id: 'new-1', typeName: 'c7i.2xlarge', isNew: true, taskIds: [`${gang.id}.0`, `${gang.id}.1`] },
      ],
    });
    const to = reconciler.applyPlan(plan, diff).launched.get('new-1') as string;
    await reconciler.progress();
    expect(r.store.getJob(gang.id)).toMatchObject({ state: 'migrating', migrations: 0 });
    r.cloud.bootAll();
    await reconciler.syncWithCloud();
    control.registered.add(to);
    control.calls.length = 0;
    await reconciler.progress();
    expect(control.calls.filter((c) => c.endsWith('(checkpoint)'))).toHaveLength(2);
    expect(r.store.getJob(gang.id)).toMatchObject({ state: 'running', migrations: 1 });
  });

  it('a move called off when the instance it waits for is lost counts once, as the job goes back to the queue', async () => {
    const { r, a, control, reconciler } = await aMoving();
    await reconciler.progress(); // inst-2 booting, A works on
    // Gone while it boots (a spot reclaim): the next comparison with the cloud, past the vanish grace, sees it.
    await r.cloud.terminate([r.store.getInstance('inst-2')?.cloudId as string]);
    r.clock.advance(61);
    await reconciler.syncWithCloud();
    expect(r.store.getInstance('inst-2')?.state).toBe('terminated');
    await reconciler.progress();
    expect(control.calls).toContain(`stop ${a.id}.0 on inst-1 (checkpoint)`);
    expect(r.store.getJob(a.id)).toMatchObject({ state: 'queued', migrations: 1 });
  });

  it('under a cap, stops at once: the plan gave the room of the instance it drops to others', async () => {
    // Two instances at most: inst-2 launches next to inst-1, but A does not wait for it.
    const { r, a, control, reconciler } = await aMoving({ maxInstances: 2 }, false);
    expect(r.store.getTask(`${a.id}.0`)?.state).toBe('checkpointing');
    await reconciler.progress();
    expect(r.store.getInstance('inst-2')?.state).toBe('launching');
    expect(control.calls[0]).toBe(`stop ${a.id}.0 on inst-1 (checkpoint)`);
    expect(r.store.getInstance('inst-1')?.state).toBe('terminated');
  });

  it('a start waiting for the room a task that ends frees goes in the pass that sees it end', async () => {
    // A and C run on one c7i.2xlarge; the plan moves C to a new instance (C works on while it boots) and puts B next
    // to A, in the room C leaves. A ends first: its room is B's at once, as the engine's start gate gives it.
    const control = new RegisteringTaskControl();
    control.registered.add('inst-1');
    const r = rig({}, { tasks: control });
    const a = r.controller.submit(jobSpec('a', CPU_SMALL), 'research');
    const c = r.controller.submit(jobSpec('c', CPU_SMALL), 'research');
    const reconciler = reconcilerFor(r, control, { settings: { makeBeforeBreak: true } });
    const first = handPlan(r, {
      instances: [{ id: 'new-1', typeName: 'c7i.2xlarge', isNew: true, taskIds: [`${a.id}.0`, `${c.id}.0`] }],
    });
    reconciler.applyPlan(first.plan, first.diff);
    await reconciler.progress();
    expect(control.calls).toEqual([`start ${a.id}.0 on inst-1`, `start ${c.id}.0 on inst-1`]);
    const b = r.controller.submit(jobSpec('b', CPU_SMALL), 'research');
    r.cloud.bootInstantly = false;
    const second = handPlan(r, {
      instances: [
        { id: 'inst-1', typeName: 'c7i.2xlarge', isNew: false, taskIds: [`${a.id}.0`, `${b.id}.0`] },
        { id: 'new-2', typeName: 'c7i.xlarge', isNew: true, taskIds: [`${c.id}.0`] },
      ],
    });
    reconciler.applyPlan(second.plan, second.diff);
    control.calls.length = 0;
    await reconciler.progress();
    // C works on while inst-2 boots; B waits for room on inst-1.
    expect(control.calls).toEqual([]);
    expect(r.store.getTask(`${b.id}.0`)).toMatchObject({ state: 'starting', instanceId: 'inst-1' });
    control.statuses.set(`${a.id}.0`, 'succeeded');
    await reconciler.progress();
    expect(control.calls).toEqual([`start ${b.id}.0 on inst-1`]);
    expect(r.store.getJob(a.id)?.state).toBe('succeeded');
    expect(r.store.getTask(`${b.id}.0`)).toMatchObject({ state: 'running', instanceId: 'inst-1' });
    expect(r.store.getTask(`${c.id}.0`)).toMatchObject({ state: 'running', instanceId: 'inst-1' });
  });
});
