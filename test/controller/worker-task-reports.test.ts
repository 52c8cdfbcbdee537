import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { jobDocument } from '../../src/controller/api/views.js';
import { ManualClock } from '../../src/controller/clock.js';
import { MemoryStateStore } from '../../src/controller/memory-state-store.js';
import type { JobRecord, TaskRecord } from '../../src/controller/state-store.js';
import { SILENT_TASK_GRACE_SECONDS } from '../../src/controller/job-progress.js';
import { TASK_STOPPED_OUTSIDE_EVENT } from '../../src/controller/outside-stop-records.js';
import { heartbeatRequestSchema, type HeartbeatResponse } from '../../src/protocol/worker-protocol.js';
import { FsObjectStore } from '../../src/storage/fs-store.js';
import { ProcessExecutor } from '../../src/worker/executors/process.js';
import { offlineLifecycle, shellTask, until, untilTaskEnded } from '../worker/agent-fixtures.js';
import { CPU_SMALL, jobSpec, rig, workerTaskControlFor } from './controller-fixtures.js';

/**
 * What the controller makes of its workers' task reports beyond a task's state: a job's progress from its tasks'
 * counts, the restarts a worker makes by itself after a stop from outside, and a move whose task ended as its stop
 * reached it.
 */

const token = (instanceId: string): string => `worker-token-${instanceId}-0123456789abcdef`;
const OBJECTS = '/tmp/fleetwise-worker-task-reports-objects';
const tmp = mkdtempSync(join(tmpdir(), 'fw-worker-task-reports-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

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
    const { r, clock, store, job, tasks, beat, progress } = await jobRunning(2);
    const [worker, coordinator] = tasks as [TaskRecord, TaskRecord];
    beat(worker, { state: 'running', completedIterations: 4 });
    beat(coordinator, { state: 'running' });
    // Not a word from the coordinator yet: it may be slow to write its first line.
    expect(progress()).toBe(0);
    // Silent past the grace while its sibling reports: one that writes none, left out from then on.
    clock.advance(SILENT_TASK_GRACE_SECONDS);
    beat(coordinator, { state: 'running' });
    beat(worker, { state: 'running', completedIterations: 10 });
    expect(progress()).toBe(10);
    // A controller started since knows from the store how long the coordinator has run: it leaves it out at once.
    const again = workerTaskControlFor(store, clock, { objectStoreLocation: OBJECTS });
    const report = (task: TaskRecord, extra: Record<string, unknown>) =>
      again.heartbeat(
        token(task.instanceId as string),
        heartbeatRequestSchema.parse({ tasks: [{ taskId: task.id, attempt: 1, ...extra }] }),
      );
    report(coordinator, { state: 'running' });
    report(worker, { state: 'running', completedIterations: 11 });
    again.flushProgress();
    expect(store.getJob(job.id)?.completedIterations).toBe(11);
    // The worker is done with all 25; the coordinator, still running, reports nothing: the job has done 25.
    beat(worker, { state: 'succeeded', exitCode: 0, completedIterations: 25 });
    beat(coordinator, { state: 'running' });
    expect(progress()).toBe(25);
    await r.controller.reconcile();
    beat(coordinator, { state: 'running' });
    expect(progress()).toBe(25);
  });

  it('does not go back when a slower task reports its first line: it counted as 0 until then', async () => {
    const { clock, tasks, beat, progress } = await jobRunning(3);
    const [fast, slow, slower] = tasks as [TaskRecord, TaskRecord, TaskRecord];
    const seen: (number | undefined)[] = [];
    beat(fast, { state: 'running', completedIterations: 80 });
    beat(slow, { state: 'running' });
    beat(slower, { state: 'running' });
    seen.push(progress());
    clock.advance(SILENT_TASK_GRACE_SECONDS - 1);
    beat(slow, { state: 'running', completedIterations: 5 });
    seen.push(progress());
    beat(fast, { state: 'running', completedIterations: 90 });
    seen.push(progress());
    beat(slower, { state: 'running', completedIterations: 3 });
    beat(slow, { state: 'running', completedIterations: 7 });
    seen.push(progress());
    beat(slower, { state: 'running', completedIterations: 9 });
    seen.push(progress());
    expect(seen).toEqual([0, 0, 0, 3, 7]);
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
    // A worker that lost the task's record counts from 0 again: its first stop since is new.
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

describe('stops from outside, counted by a worker that restarts between them', () => {
  it('are each recorded: a host rebooted every night has a restart for every night', async () => {
    const { store, job, tasks, workers } = await jobRunning(1);
    const task = tasks[0] as TaskRecord;
    const stateDir = join(tmp, 'nightly-executor');
    const workDir = join(tmp, 'nightly-work');
    const objects = new FsObjectStore(join(tmp, 'nightly-objects'));
    // Reports 3 of its 25 iterations; on SIGTERM (the shutdown) it checkpoints and exits 0.
    const d = shellTask(
      task.id,
      'trap \'echo 3 > "$FLEETWISE_CHECKPOINT_DIR/state"; exit 0\' TERM; ' +
        'echo "$(date +%s) 3" >> "$FLEETWISE_PROGRESS_FILE"; while :; do sleep 0.02; done',
      { totalIterations: 25 },
    );
    const progressFile = join(workDir, 'tasks', task.id, 'progress');
    for (let night = 1; night <= 3; night++) {
      // The worker process of this boot: it adopts what the one before it left, and runs the task again.
      const executor = new ProcessExecutor({ stateDir });
      const worker = offlineLifecycle(executor, objects, workDir, 20);
      await worker.adopt();
      const heartbeat = (): void => {
        workers.heartbeat(
          token(task.instanceId as string),
          heartbeatRequestSchema.parse({ tasks: worker.reports() }),
        );
      };
      heartbeat();
      worker.start({ ...d, restore: night > 1 });
      await worker.settle();
      await until('progress', async () =>
        existsSync(progressFile) && readFileSync(progressFile, 'utf8').includes(' 3') ? true : undefined,
      );
      await worker.observe();
      heartbeat();
      await executor.signal(task.id, 'SIGTERM');
      await untilTaskEnded(worker, task.id);
      heartbeat();
      await worker.stopWatchers();
    }
    const recorded = store.listEvents({ jobId: job.id, kind: TASK_STOPPED_OUTSIDE_EVENT });
    expect(recorded.map((e) => e.data)).toEqual([
      { attempt: 1, count: 1 },
      { attempt: 1, count: 2 },
      { attempt: 1, count: 3 },
    ]);
    expect(jobDocument(store, store.getJob(job.id) as JobRecord).restarts).toHaveLength(3);
    await new ProcessExecutor({ stateDir }).remove(task.id);
  });
});

describe('a move that waited for its new instance', () => {
  it('is forgotten, uncounted, when the instance it leaves is lost before its stop is reported', async () => {
    const { r, clock, store, job, tasks, beat } = await jobRunning(1, true);
    const task = tasks[0] as TaskRecord;
    const from = task.instanceId as string;
    const kept = `reconcile.move.${job.id}.uncounted`;
    beat(task, { state: 'running', completedIterations: 24 });
    r.controller.drain(from);
    await r.controller.runRound();
    await r.controller.reconcile();
    for (const i of store.listInstances({ states: ['running'] }))
      if (i.id !== from) store.setWorkerToken(i.id, token(i.id));
    await r.controller.reconcile();
    const answer = beat(task, { state: 'running', completedIterations: 24 });
    expect(answer.tasks.find((t) => t.taskId === task.id)?.action).toBe('checkpoint-stop');
    expect(store.getValue(kept)).toBe(0);
    // The instance it leaves is lost before its worker reports the stop: no worker ever will.
    const cloudId = store.getInstance(from)?.cloudId as string;
    (r.cloud.instances.get(cloudId) as { state: string }).state = 'stopped';
    await r.controller.reconcile();
    expect(store.getJob(job.id)?.state).toBe('queued');
    expect(store.getValue(kept)).toBeUndefined();
    // Placed again, it runs and ends: nothing of that move is counted, nor kept.
    for (let k = 0; k < 3; k++) {
      clock.advance(30);
      await r.controller.runRound();
      await r.controller.reconcile();
    }
    for (const i of store.listInstances({ states: ['running'] }))
      if (i.workerTokenHash === undefined) store.setWorkerToken(i.id, token(i.id));
    await r.controller.reconcile();
    const again = store.getTask(task.id) as TaskRecord;
    expect(again).toMatchObject({ state: 'running', instanceId: expect.not.stringMatching(`^${from}$`) });
    beat(again, { state: 'succeeded', exitCode: 0, completedIterations: 25 });
    await r.controller.reconcile();
    expect(store.getJob(job.id)).toMatchObject({ state: 'succeeded', migrations: 0 });
    expect(store.getValue(kept)).toBeUndefined();
  });

  it('kept to count when its job ends is forgotten with the job', async () => {
    const { r, store, job, tasks, beat } = await jobRunning(2);
    const kept = `reconcile.move.${job.id}.uncounted`;
    // A move of the job kept to count (its stop went out, and no worker has reported that task stopped since).
    store.setValue(kept, 0);
    for (const task of tasks) beat(task, { state: 'succeeded', exitCode: 0, completedIterations: 25 });
    await r.controller.reconcile();
    expect(store.getJob(job.id)).toMatchObject({ state: 'succeeded', migrations: 0 });
    expect(store.getValue(kept)).toBeUndefined();
  });

  it('kept to count when its job is cancelled is forgotten at the cancel, uncounted', async () => {
    const { r, store, job } = await jobRunning(1);
    const kept = `reconcile.move.${job.id}.uncounted`;
    store.setValue(kept, 0);
    r.controller.cancel(job.id);
    expect(store.getJob(job.id)).toMatchObject({ state: 'cancelled', migrations: 0 });
    expect(store.getValue(kept)).toBeUndefined();
  });

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
      // Its run on the new instance ends the job (a task that had ended finds its end there): nothing is kept.
      beat(store.getTask(task.id) as TaskRecord, {
        state: 'succeeded',
        exitCode: 0,
        completedIterations: 25,
      });
      await r.controller.reconcile();
      expect(store.getJob(job.id)).toMatchObject({ state: 'succeeded', migrations });
      expect(store.getValue(`reconcile.move.${job.id}.uncounted`)).toBeUndefined();
    }
  });
});
