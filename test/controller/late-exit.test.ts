import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/controller/clock.js';
import { computeCostReport } from '../../src/controller/cost-accounting.js';
import type { JobSpec } from '../../src/controller/job-spec/spec.js';
import { exitedWithin, transitionTask, withRetry } from '../../src/controller/state/lifecycle.js';
import { SqliteStateStore } from '../../src/controller/state/sqlite-state-store.js';
import type { JobRecord, StateStore, TaskRecord } from '../../src/controller/state-store.js';
import { heartbeatRequestSchema } from '../../src/protocol/worker-protocol.js';
import { catalog, CPU_SMALL, FakeCloud, jobSpec, rig, workerTaskControlFor } from './controller-fixtures.js';

/**
 * A task that exits while the controller is down: the restarted controller hears of it from the worker's next
 * heartbeat, and dates the task's end, its job's end or its attempt's failure, and the end of its time charged to the
 * job, at the exit the worker reports, not at the heartbeat.
 */

describe('the time of an exit heard late', () => {
  it('is the reported one, kept within the task’s run and now; now when none is reported', () => {
    expect(exitedWithin(1040, 1000, 1100)).toBe(1040);
    // A worker clock behind or ahead of the controller's.
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

/**
 * A controller on SQLite running `spec` to its tasks' start, then down (its store closed) from `exitAfter` seconds on
 * for DOWN_SECONDS, and started again on the same database: `report` is a heartbeat of the instance running a task,
 * with what its worker says of it, to the restarted controller's worker protocol.
 */
async function exitWhileDown(spec: JobSpec, exitAfter: number) {
  databases += 1;
  const path = join(dir, `state-${databases}.db`);
  const clock = new ManualClock();
  const cloud = new FakeCloud();
  let store: StateStore = new SqliteStateStore(path, { nowSeconds: () => clock.nowSeconds() });
  const before = workerTaskControlFor(store, clock);
  const r1 = rig({}, { store, clock, cloud, tasks: before, workers: before });
  const job = r1.controller.submit(spec, 'research');
  await r1.controller.runRound();
  await r1.controller.reconcile();
  for (const i of store.listInstances({ states: ['running'] })) store.setWorkerToken(i.id, token(i.id));
  await r1.controller.reconcile();
  const tasks = store.listTasks({ jobId: job.id });
  for (const t of tasks) expect(t).toMatchObject({ state: 'running', instanceId: expect.any(String) });
  const startedAt = clock.nowSeconds();
  for (const t of tasks)
    before.heartbeat(
      token(t.instanceId as string),
      heartbeatRequestSchema.parse({ tasks: [{ taskId: t.id, attempt: 1, state: 'running' }] }),
    );
  clock.advance(exitAfter);
  const exitedAt = clock.nowSeconds();
  // The controller is killed before the worker's next heartbeat; it is back DOWN_SECONDS later.
  store.close();
  clock.advance(DOWN_SECONDS);
  store = new SqliteStateStore(path, { nowSeconds: () => clock.nowSeconds() });
  const workers = workerTaskControlFor(store, clock);
  const r2 = rig({}, { store, clock, cloud, tasks: workers, workers });
  await r2.controller.recover();
  /** One heartbeat of the instance running the tasks reported (all on one instance). */
  const report = (reports: readonly Reported[]) => {
    const instanceId = store.getTask(reports[0]?.taskId ?? '')?.instanceId as string;
    return workers.heartbeat(token(instanceId), heartbeatRequestSchema.parse({ tasks: reports }));
  };
  return { r: r2, store, clock, job, tasks, startedAt, exitedAt, report };
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
        exitedAtSeconds: exitedAt,
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
        exitedAtSeconds: exitedAt,
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
      { task: exitedLast, exitedAtSeconds: exitedAt },
      { task: exitedFirst, exitedAtSeconds: exitedAt - 3 },
    ];
    const byInstance = new Map<string, Reported[]>();
    for (const { task, exitedAtSeconds } of reports) {
      const on = byInstance.get(task.instanceId as string) ?? [];
      on.push({ taskId: task.id, attempt: 1, state: 'succeeded', exitCode: 0, exitedAtSeconds });
      byInstance.set(task.instanceId as string, on);
    }
    for (const entries of byInstance.values()) report(entries);
    await r.controller.reconcile();
    expect(store.getJob(job.id)).toMatchObject({ state: 'succeeded', finishedAtSeconds: exitedAt });
    store.close();
  });

  it('keeps an exit time out of the task’s run within it, and one ahead of the controller’s clock at now', async () => {
    const behind = await exitWhileDown(jobSpec('behind', CPU_SMALL), 6);
    behind.report([
      {
        taskId: (behind.tasks[0] as TaskRecord).id,
        attempt: 1,
        state: 'failed',
        exitedAtSeconds: behind.startedAt - 3600,
      },
    ]);
    await behind.r.controller.reconcile();
    expect(behind.store.getJob(behind.job.id)?.finishedAtSeconds).toBe(behind.startedAt);
    behind.store.close();
    const ahead = await exitWhileDown(jobSpec('ahead', CPU_SMALL), 6);
    ahead.report([
      {
        taskId: (ahead.tasks[0] as TaskRecord).id,
        attempt: 1,
        state: 'failed',
        exitedAtSeconds: ahead.clock.nowSeconds() + 3600,
      },
    ]);
    await ahead.r.controller.reconcile();
    expect(ahead.store.getJob(ahead.job.id)?.finishedAtSeconds).toBe(ahead.clock.nowSeconds());
    ahead.store.close();
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
