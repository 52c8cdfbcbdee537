import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/controller/clock.js';
import { jobSummary } from '../../src/controller/api/views.js';
import {
  addJobWarning,
  readJobWarnings,
  recordJobWarnings,
  removeJobWarning,
} from '../../src/controller/execution-check.js';
import { MemoryStateStore } from '../../src/controller/memory-state-store.js';
import type { JobRecord } from '../../src/controller/state-store.js';
import { heartbeatRequestSchema, type TaskReport } from '../../src/protocol/worker-protocol.js';
import { CPU_SMALL, jobSpec, rig, workerTaskControlFor } from './controller-fixtures.js';

/**
 * A checkpoint a worker reports in its heartbeat: recorded on the task, with one `task.checkpoint` event naming the
 * instance that uploaded it. A long job checkpoints every few minutes for weeks, and those events are most of what a
 * controller's state keeps.
 */

const token = (instanceId: string): string => `worker-token-${instanceId}-0123456789abcdef`;

/** A controller whose worker protocol serves heartbeats, with one job's task placed on a registered instance. */
async function soloJobRunning() {
  const clock = new ManualClock();
  const store = new MemoryStateStore({ nowSeconds: () => clock.nowSeconds() });
  const workers = workerTaskControlFor(store, clock, {
    objectStoreLocation: '/tmp/fleetwise-checkpoint-report-objects',
  });
  const r = rig({}, { store, clock, tasks: workers, workers });
  const job = r.controller.submit(jobSpec('solo', CPU_SMALL), 'research');
  await r.controller.runRound();
  await r.controller.reconcile();
  for (const i of store.listInstances({ states: ['running'] })) store.setWorkerToken(i.id, token(i.id));
  await r.controller.reconcile();
  const task = store.listTasks({ jobId: job.id })[0];
  const instanceId = task?.instanceId;
  if (task === undefined || instanceId === undefined) throw new Error('the task was not placed');
  return { r, clock, store, workers, job, task, instanceId };
}

describe('checkpoints reported in heartbeats', () => {
  it('are recorded once each, with one event naming the reporting instance; a repeated report adds nothing', async () => {
    const { clock, store, workers, job, task, instanceId } = await soloJobRunning();

    const report = (key: string): TaskReport => ({
      taskId: task.id,
      state: 'running',
      attempt: 1,
      checkpoint: { key, atSeconds: clock.nowSeconds() },
    });
    workers.heartbeat(token(instanceId), { tasks: [report('ckpt/1')] });
    workers.heartbeat(token(instanceId), { tasks: [report('ckpt/1')] });
    clock.advance(60);
    workers.heartbeat(token(instanceId), { tasks: [report('ckpt/2')] });

    expect(store.getTask(task.id)?.lastCheckpointKey).toBe('ckpt/2');
    const events = store.listEvents({ kind: 'task.checkpoint', jobId: job.id });
    expect(events.map((e) => [e.taskId, e.instanceId, (e.data as { key: string }).key])).toEqual([
      [task.id, instanceId, 'ckpt/1'],
      [task.id, instanceId, 'ckpt/2'],
    ]);
  });
});

describe('a checkpoint-stop whose checkpoint the worker could not upload', () => {
  it('goes on (the task resumes from its last uploaded checkpoint) and tells the job why, once', async () => {
    const { r, store, workers, job, task, instanceId } = await soloJobRunning();
    const running: TaskReport = { taskId: task.id, state: 'running', attempt: 1 };
    workers.heartbeat(token(instanceId), { tasks: [running] });

    // Drained: the task moves, once the instance it moves to is up (make before break) and its worker registered.
    r.controller.drain(instanceId);
    await r.controller.runRound();
    await r.controller.reconcile();
    for (const i of store.listInstances({ states: ['running'] }))
      if (i.id !== instanceId) store.setWorkerToken(i.id, token(i.id));
    await r.controller.reconcile();
    const answer = workers.heartbeat(token(instanceId), { tasks: [running] });
    expect(answer.tasks.find((t) => t.taskId === task.id)?.action).toBe('checkpoint-stop');
    const reason =
      'its checkpoint at the stop could not be uploaded (checkpoint 3 of x: entry "out" is a symlink to /etc/hostname, ' +
      'outside the checkpoint directory); it resumes from checkpoint 2';
    // Its worker had not reported the failure while the task ran: the stop's report tells it, once.
    const stopped: TaskReport = {
      taskId: task.id,
      state: 'stopped',
      attempt: 1,
      reason,
      checkpointError:
        'checkpoint 3 of x: entry "out" is a symlink to /etc/hostname, outside the checkpoint directory',
    };
    workers.heartbeat(token(instanceId), { tasks: [stopped] });
    workers.heartbeat(token(instanceId), { tasks: [stopped] });
    const events = store.listEvents({ kind: 'task.checkpoint-failed', jobId: job.id });
    expect(events.map((e) => [e.taskId, e.instanceId, e.message])).toEqual([
      [task.id, instanceId, `task ${task.id}: ${reason}`],
    ]);
    // The job's view says so (`warnings`, what `fleetwise job` shows).
    const view = jobSummary(store.getJob(job.id) as JobRecord, 1, store);
    expect(view.warnings).toEqual([`checkpoint not uploaded at a move: task ${task.id}: ${reason}`]);
    // The stop is done and the move goes on: the task starts on the instance it moved to.
    await r.controller.reconcile();
    const moved = store.getTask(task.id);
    expect(moved?.instanceId).toBeDefined();
    expect(moved?.instanceId).not.toBe(instanceId);
    expect(['starting', 'running']).toContain(moved?.state);
    expect(store.getJob(job.id)?.state).not.toBe('failed');
  });
});

describe('a running task whose checkpoints cannot be uploaded', () => {
  it('tells the job once per reason, in its view and as an event, until an upload succeeds', async () => {
    const { clock, store, workers, job, task, instanceId } = await soloJobRunning();
    const symlinkOut =
      'checkpoint 3 of x: entry "cfg" is a symlink to /etc/hostname, outside the checkpoint directory';
    const unreadable = "checkpoint 3 of x: EACCES: permission denied, open 'weights.bin'";
    // What the worker sends, as the protocol takes it.
    const beat = (checkpointError?: string, key?: string): void => {
      const report = {
        taskId: task.id,
        state: 'running',
        attempt: 1,
        ...(checkpointError === undefined ? {} : { checkpointError }),
        ...(key === undefined ? {} : { checkpoint: { key, atSeconds: clock.nowSeconds() } }),
      };
      workers.heartbeat(token(instanceId), heartbeatRequestSchema.parse({ tasks: [report] }));
    };
    const told = (): (string | undefined)[] =>
      store.listEvents({ kind: 'task.checkpoint-failed', jobId: job.id }).map((e) => e.message);
    const tail =
      '; it runs on, and would resume from its last uploaded checkpoint (tried again once its checkpoint directory changes)';

    beat(symlinkOut);
    beat(symlinkOut);
    beat(symlinkOut);
    expect(told()).toEqual([`task ${task.id}: ${symlinkOut}${tail}`]);
    expect(store.listEvents({ kind: 'task.checkpoint-failed', jobId: job.id })[0]).toMatchObject({
      taskId: task.id,
      instanceId,
    });
    const view = (): readonly string[] => jobSummary(store.getJob(job.id) as JobRecord, 1, store).warnings;
    expect(view()).toEqual([`checkpoint not uploaded while running: task ${task.id}: ${symlinkOut}${tail}`]);

    // Another reason is told too, and replaces the first in the view.
    beat(unreadable);
    expect(told()).toHaveLength(2);
    expect(view()).toEqual([`checkpoint not uploaded while running: task ${task.id}: ${unreadable}${tail}`]);

    // An upload succeeded: the error is over, and its warning leaves the view; should it come back, it is told again.
    beat(undefined, 'ckpt/3');
    beat(undefined, 'ckpt/3');
    expect(told()).toHaveLength(2);
    expect(view()).toEqual([]);
    beat(unreadable, 'ckpt/3');
    expect(told()).toHaveLength(3);
    expect(view()).toEqual([`checkpoint not uploaded while running: task ${task.id}: ${unreadable}${tail}`]);
  });
});

describe('warnings learned while a job runs', () => {
  it('keep the submission warnings and only the newest warning of each kind', () => {
    const store = new MemoryStateStore({ nowSeconds: () => 0 });
    recordJobWarnings(store, 'job-1', ['the process executor ignores image busybox']);
    addJobWarning(store, 'job-1', 'checkpoint not uploaded at a move:', 'task job-1.0: first');
    addJobWarning(store, 'job-1', 'checkpoint not uploaded at a move:', 'task job-1.0: second');
    expect(readJobWarnings(store, 'job-1')).toEqual([
      'the process executor ignores image busybox',
      'checkpoint not uploaded at a move: task job-1.0: second',
    ]);
  });

  it('are taken back by kind, the others kept; with none left, nothing is kept for the job', () => {
    const store = new MemoryStateStore({ nowSeconds: () => 0 });
    recordJobWarnings(store, 'job-1', ['the process executor ignores image busybox']);
    addJobWarning(store, 'job-1', 'checkpoint not uploaded while running:', 'task job-1.0: unreadable');
    addJobWarning(store, 'job-2', 'checkpoint not uploaded while running:', 'task job-2.1: unreadable');
    // Another task's warning of the kind stays when only this task's is named.
    removeJobWarning(store, 'job-2', 'checkpoint not uploaded while running: task job-2.0:');
    expect(readJobWarnings(store, 'job-2')).toEqual([
      'checkpoint not uploaded while running: task job-2.1: unreadable',
    ]);
    removeJobWarning(store, 'job-1', 'checkpoint not uploaded while running:');
    expect(readJobWarnings(store, 'job-1')).toEqual(['the process executor ignores image busybox']);
    removeJobWarning(store, 'job-2', 'checkpoint not uploaded while running: task job-2.1:');
    expect(readJobWarnings(store, 'job-2')).toEqual([]);
    expect(store.getValue('execution.job.job-2.warnings')).toBeUndefined();
  });
});
