import { describe, expect, it } from 'vitest';
import { jobDocument } from '../../src/controller/api/views.js';
import { ManualClock } from '../../src/controller/clock.js';
import { MemoryStateStore } from '../../src/controller/memory-state-store.js';
import type { JobRecord, TaskRecord } from '../../src/controller/state-store.js';
import { TASK_STOPPED_OUTSIDE_EVENT } from '../../src/controller/worker-task-control.js';
import { heartbeatRequestSchema, type HeartbeatResponse } from '../../src/protocol/worker-protocol.js';
import { CPU_SMALL, jobSpec, rig, workerTaskControlFor } from './controller-fixtures.js';

/**
 * What the controller makes of its workers' task reports beyond a task's state: a job's progress from its tasks'
 * counts, the restarts a worker makes by itself after a stop from outside, and a move whose task ended as its stop
 * reached it.
 */

const token = (instanceId: string): string => `worker-token-${instanceId}-0123456789abcdef`;
const OBJECTS = '/tmp/fleetwise-worker-task-reports-objects';

/**
 * A controller serving the worker protocol, with a job of `replicas` tasks (of 25 iterations) running; `makeBeforeBreak`:
 * its moves wait for their new instances.
 */
async function jobRunning(replicas: number, makeBeforeBreak = false) {
  const clock = new ManualClock();
  const store = new MemoryStateStore({ nowSeconds: () => clock.nowSeconds() });
  const workers = workerTaskControlFor(store, clock, { objectStoreLocation: OBJECTS });
  const r = rig({ makeBeforeBreak }, { store, clock, tasks: workers, workers });
  const job = r.controller.submit(
    { ...jobSpec('j', CPU_SMALL, { replicas }), totalIterations: 25 },
    'research',
  );
  await r.controller.runRound();
  await r.controller.reconcile();
  for (const i of store.listInstances({ states: ['running'] })) store.setWorkerToken(i.id, token(i.id));
  await r.controller.reconcile();
  const tasks = store.listTasks({ jobId: job.id });
  for (const t of tasks) expect(t).toMatchObject({ state: 'running', instanceId: expect.any(String) });
  /** A heartbeat of the instance running `task`, with what the worker reports of it, as the protocol takes it. */
  const beat = (task: TaskRecord, report: Record<string, unknown>): HeartbeatResponse =>
    workers.heartbeat(
      token(task.instanceId as string),
      heartbeatRequestSchema.parse({ tasks: [{ taskId: task.id, attempt: 1, ...report }] }),
    );
  /** The job's progress as stored once the reported counts are flushed. */
  const progress = (): number | undefined => {
    workers.flushProgress();
    return store.getJob(job.id)?.completedIterations;
  };
  return { r, clock, store, workers, job, tasks, beat, progress };
}

describe("a multi-task job's progress", () => {
  it('is that of its tasks that report progress: a coordinator writing none does not hold it at 0', async () => {
    const { r, tasks, beat, progress } = await jobRunning(2);
    const [worker, coordinator] = tasks as [TaskRecord, TaskRecord];
    beat(worker, { state: 'running', completedIterations: 10 });
    beat(coordinator, { state: 'running' });
    expect(progress()).toBe(10);
    // The worker is done with all 25; the coordinator, still running, reports nothing: the job has done 25.
    beat(worker, { state: 'succeeded', exitCode: 0, completedIterations: 25 });
    beat(coordinator, { state: 'running' });
    expect(progress()).toBe(25);
    await r.controller.reconcile();
    beat(coordinator, { state: 'running' });
    expect(progress()).toBe(25);
  });

  it('goes on with the tasks still at work once one succeeded, and is the most any reached once all did', async () => {
    const { r, store, job, tasks, beat, progress } = await jobRunning(2);
    const [fast, slow] = tasks as [TaskRecord, TaskRecord];
    beat(fast, { state: 'running', completedIterations: 12 });
    beat(slow, { state: 'running', completedIterations: 9 });
    expect(progress()).toBe(9);
    beat(fast, { state: 'succeeded', exitCode: 0, completedIterations: 15 });
    beat(slow, { state: 'running', completedIterations: 30 });
    expect(progress()).toBe(30);
    await r.controller.reconcile();
    expect(store.getTask(fast.id)?.state).toBe('succeeded');
    beat(slow, { state: 'running', completedIterations: 45 });
    expect(progress()).toBe(45);
    beat(slow, { state: 'succeeded', exitCode: 0, completedIterations: 60 });
    expect(progress()).toBe(60);
    await r.controller.reconcile();
    expect(store.getJob(job.id)).toMatchObject({ state: 'succeeded', completedIterations: 60 });
  });
});

describe('stops from outside a worker, which it resumed its task from', () => {
  it("are recorded once each and shown among the job's restarts, also by a controller started since", async () => {
    const { clock, store, job, tasks, beat } = await jobRunning(1);
    const task = tasks[0] as TaskRecord;
    const instanceId = task.instanceId as string;
    const why =
      'SIGTERM ended it (exit code 143) without the worker asking: taken as killed from outside (a signal not ' +
      'from the worker); it resumes from its last checkpoint';
    const recorded = () => store.listEvents({ jobId: job.id, kind: TASK_STOPPED_OUTSIDE_EVENT });
    beat(task, { state: 'running', completedIterations: 5 });
    expect(recorded()).toEqual([]);
    // Reported stopped with the count, then running again (its worker restarted it): one restart.
    beat(task, { state: 'stopped', exitCode: 143, reason: why, outsideStops: 1 });
    beat(task, { state: 'stopped', exitCode: 143, reason: why, outsideStops: 1 });
    beat(task, { state: 'running', outsideStops: 1 });
    expect(recorded().map((e) => [e.taskId, e.instanceId, e.message, e.data])).toEqual([
      [task.id, instanceId, `task ${task.id} on ${instanceId}: ${why}`, { attempt: 1, count: 1 }],
    ]);
    clock.advance(60);
    beat(task, { state: 'stopped', exitCode: 143, reason: why, outsideStops: 2 });
    expect(recorded()).toHaveLength(2);
    const cause = `${task.id} was stopped from outside its worker on ${instanceId}`;
    expect(jobDocument(store, store.getJob(job.id) as JobRecord).restarts).toEqual([
      { atSeconds: clock.nowSeconds() - 60, cause },
      { atSeconds: clock.nowSeconds(), cause },
    ]);

    // A controller started since reads what was recorded: the same count adds nothing, the next one adds one.
    const again = workerTaskControlFor(store, clock, { objectStoreLocation: OBJECTS });
    const report = (extra: Record<string, unknown>) =>
      heartbeatRequestSchema.parse({ tasks: [{ taskId: task.id, attempt: 1, ...extra }] });
    again.heartbeat(token(instanceId), report({ state: 'running', outsideStops: 2 }));
    expect(recorded()).toHaveLength(2);
    again.heartbeat(token(instanceId), report({ state: 'stopped', reason: why, outsideStops: 3 }));
    expect(recorded()).toHaveLength(3);
    // A worker that restarted counts from 0 again: its first stop since is new.
    again.heartbeat(token(instanceId), report({ state: 'stopped', reason: why, outsideStops: 1 }));
    expect(recorded().map((e) => e.data)).toEqual([
      { attempt: 1, count: 1 },
      { attempt: 1, count: 2 },
      { attempt: 1, count: 3 },
      { attempt: 1, count: 1 },
    ]);
    expect(jobDocument(store, store.getJob(job.id) as JobRecord).restarts).toHaveLength(4);
  });
});

describe('a move that waited for its new instance', () => {
  it('counts nothing when its task ended as its stop reached it; once when the stop stopped it', async () => {
    for (const [ends, migrations] of [
      ['succeeded', 0],
      ['stopped', 1],
    ] as const) {
      const { r, store, job, tasks, beat } = await jobRunning(1, true);
      const task = tasks[0] as TaskRecord;
      const from = task.instanceId as string;
      beat(task, { state: 'running', completedIterations: 24 });
      // Drained: the task moves once the instance it moves to is up and its worker registered (make before break).
      r.controller.drain(from);
      await r.controller.runRound();
      await r.controller.reconcile();
      for (const i of store.listInstances({ states: ['running'] }))
        if (i.id !== from) store.setWorkerToken(i.id, token(i.id));
      await r.controller.reconcile();
      const answer = beat(task, { state: 'running', completedIterations: 24 });
      expect(answer.tasks.find((t) => t.taskId === task.id)?.action).toBe('checkpoint-stop');
      // Not counted while the stop is on its way.
      expect(store.getJob(job.id)?.migrations).toBe(0);
      beat(task, { state: ends, exitCode: 0, completedIterations: ends === 'succeeded' ? 25 : 24 });
      await r.controller.reconcile();
      await r.controller.reconcile();
      expect(store.getTask(task.id)?.instanceId).not.toBe(from);
      expect(store.getJob(job.id)?.migrations).toBe(migrations);
    }
  });
});
