import { z } from 'zod';
import { taskExitKey, type CheckpointRef } from '../protocol/object-keys.js';
import { ObjectNotFoundError, type ObjectStore } from '../storage/object-store.js';
import type { Executor } from './executor.js';
import type { LocalTask } from './task-record.js';

/**
 * A task's exit, kept in the object store by the worker that saw it, before the worker reports it. The controller
 * learns of an exit only from a heartbeat; a worker that dies (or loses its controller) between the exit and that
 * heartbeat would otherwise take the exit with it, and the task would be started again from its last checkpoint on
 * another instance: its end would run twice. A worker asked to run a task that ran before (a restore) looks here
 * first and reports the recorded exit instead of running it again. The same rule as checkpoints decides when to
 * look: only for a task the controller says ran before, so an old record under a reused job id is never read. It is
 * the first thing of an exit stored (task-exit.ts `handleExit`): the last checkpoints and the log, stored after it,
 * take as long as the store does.
 */

export const taskExitRecordSchema = z.strictObject({
  version: z.literal(1),
  jobId: z.string().min(1),
  taskId: z.string().min(1),
  attempt: z.number().int().positive(),
  state: z.enum(['succeeded', 'failed']),
  exitCode: z.number().int().optional(),
  /** Why it failed (the exit code and its last output lines), as the worker reported it. */
  reason: z.string().max(4000).optional(),
  completedIterations: z.number().nonnegative().optional(),
  /** The cloud id of the instance it ran on. */
  instanceId: z.string().optional(),
  /** When it exited: its reports give the controller how long ago that was (TaskReport.exitedSecondsAgo). */
  exitedAt: z.string().datetime(),
});
export type TaskExitRecord = z.infer<typeof taskExitRecordSchema>;

export async function writeExitRecord(store: ObjectStore, record: TaskExitRecord): Promise<void> {
  const key = taskExitKey(record, record.attempt);
  await store.put(key, Buffer.from(`${JSON.stringify(taskExitRecordSchema.parse(record))}\n`));
}

/**
 * The recorded exit of `ref` in `attempt`; undefined when there is none. A record that does not parse is an error
 * (the caller keeps retrying rather than running the task a second time on a guess).
 */
export async function readExitRecord(
  store: ObjectStore,
  ref: CheckpointRef,
  attempt: number,
): Promise<TaskExitRecord | undefined> {
  const key = taskExitKey(ref, attempt);
  let body: Buffer;
  try {
    body = await store.getBuffer(key);
  } catch (e) {
    if (e instanceof ObjectNotFoundError) return undefined;
    throw e;
  }
  const parsed = taskExitRecordSchema.safeParse(JSON.parse(body.toString('utf8')) as unknown);
  if (!parsed.success || parsed.data.jobId !== ref.jobId || parsed.data.taskId !== ref.taskId)
    throw new Error(
      `the exit record ${key} is not one of ${ref.taskId}: ${parsed.error?.message ?? 'another task'}`,
    );
  return parsed.data;
}

/**
 * The exit record of a task that exited unasked with `exitCode`, and why it failed in full (the record keeps 4,000
 * characters): the exit code and its last output lines, and whether the out-of-memory killer ended it. Dated when the
 * executor says the task ended (a worker that was down meanwhile sees the exit only once it is back), else now.
 */
export async function exitOf(
  t: LocalTask,
  exitCode: number | undefined,
  executor: Executor,
  cloudInstanceId: string | undefined,
): Promise<{ readonly record: TaskExitRecord; readonly reason: string | undefined }> {
  const tail = await executor.logTail(t.taskId, 5).catch(() => '');
  const status = await executor.status(t.taskId).catch(() => undefined);
  // An exit code of 137 alone does not say the task outgrew its memory: the executor knows it was the OOM killer.
  const limit = status?.memoryLimitGiB;
  const how =
    exitCode !== 0 && status?.oomKilled
      ? `killed: out of memory (${limit === undefined ? 'no limit' : `limit ${Number(limit.toPrecision(4))} GiB`}), `
      : '';
  const reason =
    exitCode === 0
      ? undefined
      : `${how}exit code ${exitCode ?? 'unknown'}${tail === '' ? '' : `; last output:\n${tail}`}`;
  const record: TaskExitRecord = {
    version: 1,
    jobId: t.jobId,
    taskId: t.taskId,
    attempt: t.attempt ?? 1,
    state: exitCode === 0 ? 'succeeded' : 'failed',
    ...(exitCode === undefined ? {} : { exitCode }),
    ...(reason === undefined ? {} : { reason: reason.slice(0, 4000) }),
    ...(t.completed === undefined ? {} : { completedIterations: t.completed }),
    instanceId: cloudInstanceId,
    exitedAt: new Date(exitedAtMs(status?.finishedAt, Date.now())).toISOString(),
  };
  return { record, reason };
}

/** When a task ended (epoch ms): the executor's finish time, never after now; now when it gives none. */
export function exitedAtMs(finishedAt: Date | undefined, nowMs: number): number {
  const at = finishedAt?.getTime();
  return at === undefined || !Number.isFinite(at) || at <= 0 ? nowMs : Math.min(at, nowMs);
}
