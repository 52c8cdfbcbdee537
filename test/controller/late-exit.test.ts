import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/controller/clock.js';
import { computeCostReport } from '../../src/controller/cost-accounting.js';
import { exitedAgo } from '../../src/controller/reconcile/effects/task-exit-times.js';
import type { JobSpec } from '../../src/controller/job-spec/spec.js';
import { exitedWithin, transitionTask, withRetry } from '../../src/controller/state/lifecycle.js';
import { SqliteStateStore } from '../../src/controller/state/sqlite-state-store.js';
import type { JobRecord, StateStore, TaskRecord } from '../../src/controller/state-store.js';
import type { WorkerTaskControl } from '../../src/controller/worker-task-control.js';
import { heartbeatRequestSchema } from '../../src/protocol/worker-protocol.js';
import { taskReport } from '../../src/worker/task-report.js';
import { catalog, CPU_SMALL, FakeCloud, jobSpec, rig, workerTaskControlFor } from './controller-fixtures.js';

/**
 * A task that exits while the controller is down: the restarted controller hears of it from the worker's next
 * heartbeat, and dates the task's end, its job's end or its attempt's failure, and the end of its time charged to the
 * job, at the exit the worker reports (how long before its heartbeat the task exited), not at the heartbeat.
 */

describe('the time of an exit heard late', () => {
  it('is its age before the report was heard; the report’s hearing for an age that is no age', () => {
    expect(exitedAgo(40, 1100)).toBe(1060);
    expect(exitedAgo(0, 1100)).toBe(1100);
    // A worker's clock stepped back since the exit; nor is an age that is no number taken.
    expect(exitedAgo(-30, 1100)).toBe(1100);
    expect(exitedAgo(Number.NaN, 1100)).toBe(1100);
    expect(exitedAgo(Number.POSITIVE_INFINITY, 1100)).toBe(1100);
  });

  it('is the reported one, kept within the task’s run and now; now when none is reported', () => {
    expect(exitedWithin(1040, 1000, 1100)).toBe(1040);
    // An age beyond the task's run; a time after now.
    expect(exitedWithin(900, 1000, 1100)).toBe(1000);
    expect(exitedWithin(1300, 1000, 1100)).toBe(1100);
    // An older worker says nothing; nor is a time that is no time taken.
    expect(exitedWithin(undefined, 1000, 1100)).toBe(1100);
    expect(exitedWithin(Number.NaN, 1000, 1100)).toBe(1100);
  });

  it("dates a task's change event and an attempt's failure, never after now", () => {
    const job: JobRecord = {
      id: 'job-1',
      name: 'j',
      team: 'research',
      spec: jobSpec('j', CPU_SMALL),
      state: 'running',
      submittedAtSeconds: 900,
      startedAtSeconds: 1000,
      updatedAtSeconds: 1000,
      completedIterations: 0,
      migrations: 0,
      attempts: 1,
    };
    const task: TaskRecord = {
      id: 'job-1.0',
      jobId: 'job-1',
      index: 0,
      name: 'main',
      workloadKey: 'k',
      state: 'running',
      instanceId: 'inst-1',
      updatedAtSeconds: 1000,
    };
    const ended = transitionTask(task, job, 'failed', undefined, 1100, 1040);
    expect(ended.atSeconds).toBe(1040);
    expect(ended.record.updatedAtSeconds).toBe(1100);
    expect(transitionTask(task, job, 'failed', undefined, 1100, 1300).atSeconds).toBeUndefined();
    expect(transitionTask(task, job, 'failed', undefined, 1100).atSeconds).toBeUndefined();
    const retried = withRetry(job, { taskId: task.id, reason: 'exit code 4', atSeconds: 1040 }, 1100);
    expect(retried.record.attemptFailures?.[0]?.atSeconds).toBe(1040);
    // Before the job started: its start.
    const early = withRetry(job, { taskId: task.id, reason: 'exit code 4', atSeconds: 10 }, 1100);
    expect(early.record.attemptFailures?.[0]?.atSeconds).toBe(1000);
    expect(
      withRetry(job, { taskId: task.id, reason: 'r' }, 1100).record.attemptFailures?.[0]?.atSeconds,
    ).toBe(1100);
  });
});

const dir = mkdtempSync(join(tmpdir(), 'fw-late-exit-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let databases = 0;

/** A task as its worker reports it (the protocol's TaskReport, parsed by the heartbeat's schema). */
type Reported = Readonly<Record<string, unknown>> & { readonly taskId: string };

const token = (instanceId: string): string => `worker-token-${instanceId}-0123456789abcdef`;
const DOWN_SECONDS = 40;

/** One heartbeat, to `workers`, of the instance running the tasks reported (all on one instance). */
function reporter(store: () => StateStore, workers: () => WorkerTaskControl) {
  return (reports: readonly Reported[]) => {
    const instanceId = store().getTask(reports[0]?.taskId ?? '')?.instanceId as string;
    return workers().heartbeat(token(instanceId), heartbeatRequestSchema.parse({ tasks: reports }));
  };
}

/**
 * A controller on SQLite running `spec` to its tasks' start (heard running from their workers), then `exitAfter`
 * seconds on: `report` is a heartbeat of the instance running a task, with what its worker says of it.
 */
async function runUntilExit(spec: JobSpec, exitAfter: number) {
  databases += 1;
  const path = join(dir, `state-${databases}.db`);
  const clock = new ManualClock();
  const cloud = new FakeCloud();
  const store: StateStore = new SqliteStateStore(path, { nowSeconds: () => clock.nowSeconds() });
  const workers = workerTaskControlFor(store, clock);
  const r = rig({}, { store, clock, cloud, tasks: workers, workers });
  const job = r.controller.submit(spec, 'research');
  await r.controller.runRound();
  await r.controller.reconcile();
  for (const i of store.listInstances({ states: ['running'] })) store.setWorkerToken(i.id, token(i.id));
  await r.controller.reconcile();
  const tasks = store.listTasks({ jobId: job.id });
  for (const t of tasks) expect(t).toMatchObject({ state: 'running', instanceId: expect.any(String) });
  const startedAt = clock.nowSeconds();
  for (const t of tasks)
    workers.heartbeat(
      token(t.instanceId as string),
      heartbeatRequestSchema.parse({ tasks: [{ taskId: t.id, attempt: 1, state: 'running' }] }),
    );
  clock.advance(exitAfter);
  const exitedAt = clock.nowSeconds();
  const report = reporter(
    () => store,
    () => workers,
  );
  return { path, r, store, clock, cloud, job, tasks, startedAt, exitedAt, report };
}

/**
 * `runUntilExit`, then the controller down (its store closed) from the exit on for DOWN_SECONDS, and started again on
 * the same database: `report` goes to the restarted controller's worker protocol.
 */
async function exitWhileDown(spec: JobSpec, exitAfter: number) {
  const run = await runUntilExit(spec, exitAfter);
  const { path, clock, cloud } = run;
  // The controller is killed before the worker's next heartbeat; it is back DOWN_SECONDS later.
  run.store.close();
  clock.advance(DOWN_SECONDS);
  const store: StateStore = new SqliteStateStore(path, { nowSeconds: () => clock.nowSeconds() });
  const workers = workerTaskControlFor(store, clock);
  const r = rig({}, { store, clock, cloud, tasks: workers, workers });
  await r.controller.recover();
  const report = reporter(
    () => store,
    () => workers,
  );
  return { ...run, r, store, report };
}

/** Seconds of `jobId`'s task time charged to it, and seconds billed for `instanceId`, at its $/s. */
function charged(store: StateStore, nowSeconds: number, jobId: string, instanceId: string) {
  const report = computeCostReport(store, catalog, nowSeconds);
  const instance = report.byInstance.find((l) => l.id === instanceId);
  if (instance === undefined) throw new Error(`no line for ${instanceId}`);
  const perSecond = instance.cost / instance.billedSeconds;
  const job = report.byJob.find((l) => l.id === jobId)?.cost ?? 0;
  return { jobSeconds: job / perSecond, billedSeconds: instance.billedSeconds, idle: instance.idleCost };
}

describe('a task that exits while the controller is down', () => {
  it('ends its job when it exited: the job’s finish, and what it is charged, stop there; the instance is billed as it ran', async () => {
    const { r, store, clock, job, tasks, startedAt, exitedAt, report } = await exitWhileDown(
      jobSpec('late', CPU_SMALL),
      6,
    );
    const [task] = tasks as [TaskRecord];
    report([
      {
        taskId: task.id,
        attempt: 1,
        state: 'failed',
        exitCode: 4,
        reason: 'exit code 4',
        exitedSecondsAgo: DOWN_SECONDS,
      },
    ]);
    await r.controller.reconcile();
    const now = clock.nowSeconds();
    expect(now - exitedAt).toBe(DOWN_SECONDS);
    expect(store.getJob(job.id)).toMatchObject({ state: 'failed', finishedAtSeconds: exitedAt });
    const [end] = store.listEvents({ taskId: task.id, kind: 'task.state', newestFirst: true, limit: 1 });
    expect(end).toMatchObject({ atSeconds: exitedAt, data: { from: 'running', to: 'failed' } });
    const { jobSeconds, billedSeconds, idle } = charged(store, now, job.id, task.instanceId as string);
    // Its job is charged the task's run; the instance is billed for all of its time, the rest of it idle.
    expect(jobSeconds).toBeCloseTo(exitedAt - startedAt, 6);
    expect(billedSeconds).toBeGreaterThanOrEqual(now - startedAt);
    expect(idle).toBeGreaterThan(0);
    store.close();
  });

  it("dates a retried job's failed attempt at the exit", async () => {
    const spec: JobSpec = { ...jobSpec('retried', CPU_SMALL), retryStrategy: { attempts: 2 } };
    const { r, store, job, tasks, exitedAt, report } = await exitWhileDown(spec, 6);
    report([
      {
        taskId: (tasks[0] as TaskRecord).id,
        attempt: 1,
        state: 'failed',
        exitCode: 4,
        exitedSecondsAgo: DOWN_SECONDS,
      },
    ]);
    await r.controller.reconcile();
    const retried = store.getJob(job.id);
    expect(retried).toMatchObject({ state: 'queued', attempts: 2 });
    expect(retried?.attemptFailures?.map((f) => [f.attempt, f.exitCode, f.atSeconds])).toEqual([
      [1, 4, exitedAt],
    ]);
    store.close();
  });

  it('ends a job whose tasks all succeeded when the last of them exited, whichever is heard first', async () => {
    const { r, store, job, tasks, exitedAt, report } = await exitWhileDown(
      jobSpec('gang', CPU_SMALL, { replicas: 2 }),
      6,
    );
    // The task the controller takes first (its order in the store) exited last.
    const [exitedLast, exitedFirst] = tasks as [TaskRecord, TaskRecord];
    const reports = [
      { task: exitedLast, exitedSecondsAgo: DOWN_SECONDS },
      { task: exitedFirst, exitedSecondsAgo: DOWN_SECONDS + 3 },
    ];
    const byInstance = new Map<string, Reported[]>();
    for (const { task, exitedSecondsAgo } of reports) {
      const on = byInstance.get(task.instanceId as string) ?? [];
      on.push({ taskId: task.id, attempt: 1, state: 'succeeded', exitCode: 0, exitedSecondsAgo });
      byInstance.set(task.instanceId as string, on);
    }
    for (const entries of byInstance.values()) report(entries);
    await r.controller.reconcile();
    expect(store.getJob(job.id)).toMatchObject({ state: 'succeeded', finishedAtSeconds: exitedAt });
    store.close();
  });

  it('keeps an exit older than the task’s run within it, and a negative age at now', async () => {
    const older = await exitWhileDown(jobSpec('older', CPU_SMALL), 6);
    older.report([
      {
        taskId: (older.tasks[0] as TaskRecord).id,
        attempt: 1,
        state: 'failed',
        exitedSecondsAgo: older.clock.nowSeconds() - older.startedAt + 3600,
      },
    ]);
    await older.r.controller.reconcile();
    expect(older.store.getJob(older.job.id)?.finishedAtSeconds).toBe(older.startedAt);
    older.store.close();
    const negative = await exitWhileDown(jobSpec('negative', CPU_SMALL), 6);
    negative.report([
      { taskId: (negative.tasks[0] as TaskRecord).id, attempt: 1, state: 'failed', exitedSecondsAgo: -3600 },
    ]);
    await negative.r.controller.reconcile();
    expect(negative.store.getJob(negative.job.id)?.finishedAtSeconds).toBe(negative.clock.nowSeconds());
    negative.store.close();
  });

  it('from an older worker, which reports no exit time, ends when the controller hears of it', async () => {
    const { r, store, clock, job, tasks, startedAt, report } = await exitWhileDown(
      jobSpec('old', CPU_SMALL),
      6,
    );
    const [task] = tasks as [TaskRecord];
    report([{ taskId: task.id, attempt: 1, state: 'failed', exitCode: 4 }]);
    await r.controller.reconcile();
    const now = clock.nowSeconds();
    expect(store.getJob(job.id)).toMatchObject({ state: 'failed', finishedAtSeconds: now });
    expect(charged(store, now, job.id, task.instanceId as string).jobSeconds).toBeCloseTo(now - startedAt, 6);
    store.close();
  });
});

/** How long the task runs, and how far its worker's clock is off the controller's. */
const RUN_SECONDS = 300;
const SKEW_SECONDS = 600;
/** The worker's next heartbeat after the exit, with the controller up. */
const NEXT_HEARTBEAT_SECONDS = 5;

/**
 * What the worker reports of `task`, which failed at `exitedAt` (the controller's clock), in a heartbeat at
 * `nowSeconds`: made by the worker's own report (src/worker/task-report.ts) on a clock `skewSeconds` off the
 * controller's, as its exit record and its report read that clock.
 */
function reportedOnSkewedClock(
  task: TaskRecord,
  exitedAt: number,
  nowSeconds: number,
  skewSeconds: number,
): Reported {
  const onWorkerClock = (seconds: number): number => (seconds + skewSeconds) * 1000;
  return taskReport(
    {
      taskId: task.id,
      jobId: task.jobId,
      phase: 'failed',
      startedAtMs: onWorkerClock(exitedAt - RUN_SECONDS),
      stopRequested: false,
      exitCode: 4,
      exitedAtMs: onWorkerClock(exitedAt),
      attempt: 1,
      lastLogUploadMs: 0,
    },
    0,
    onWorkerClock(nowSeconds),
  );
}

describe('a worker whose clock is off the controller’s', () => {
  it.each([
    ['behind', -SKEW_SECONDS],
    ['ahead', SKEW_SECONDS],
  ])(
    'with its clock %s, has its job charged the task’s run, the controller up or down meanwhile',
    async (name, skewSeconds) => {
      const up = await runUntilExit(jobSpec(`up-${name}`, CPU_SMALL), RUN_SECONDS);
      const down = await exitWhileDown(jobSpec(`down-${name}`, CPU_SMALL), RUN_SECONDS);
      up.clock.advance(NEXT_HEARTBEAT_SECONDS);
      for (const run of [up, down]) {
        const [task] = run.tasks as [TaskRecord];
        run.report([reportedOnSkewedClock(task, run.exitedAt, run.clock.nowSeconds(), skewSeconds)]);
        await run.r.controller.reconcile();
        const now = run.clock.nowSeconds();
        expect(run.exitedAt - run.startedAt).toBe(RUN_SECONDS);
        expect(run.store.getJob(run.job.id)).toMatchObject({
          state: 'failed',
          finishedAtSeconds: run.exitedAt,
        });
        expect(charged(run.store, now, run.job.id, task.instanceId as string).jobSeconds).toBeCloseTo(
          RUN_SECONDS,
          6,
        );
        run.store.close();
      }
    },
  );
});
