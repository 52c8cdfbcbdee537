import type { Executor, TaskRunStatus } from './executor.js';
import type { TaskContext } from './task-context.js';
import { handleExit, taskDisappeared } from './task-exit.js';
import type { LocalTask } from './task-record.js';
import { pollProgress } from './task-watching.js';

/** What each heartbeat looks at on this host: the executor's list of tasks, each task's progress, and its exit. */

/**
 * The executor did not answer a listing of its tasks (the Docker engine is down, hung or unreachable): nothing on
 * this host can be observed or changed until it does. The worker still heartbeats, with what it last knew.
 */
export class ExecutorUnavailableError extends Error {
  constructor(executorKind: string, cause: Error) {
    super(`the ${executorKind} executor did not answer: ${cause.message}`, { cause });
    this.name = 'ExecutorUnavailableError';
  }
}

/** The executor's tasks; an executor that does not answer fails with ExecutorUnavailableError. */
export async function listTasks(executor: Executor): Promise<TaskRunStatus[]> {
  try {
    return await executor.list();
  } catch (e) {
    throw new ExecutorUnavailableError(executor.kind, e as Error);
  }
}

/**
 * Exits, progress. What goes wrong observing one task is that task's: logged, and the others are observed and
 * reported all the same (the heartbeat awaits this, and a heartbeat that never goes out loses every task here).
 */
export async function observeTasks(ctx: TaskContext): Promise<void> {
  const statuses = new Map((await listTasks(ctx.options.executor)).map((s) => [s.taskId, s]));
  for (const t of ctx.tasks.values())
    await observeOne(ctx, t, statuses).catch((e: unknown) =>
      ctx.log.warn(`task ${t.taskId}: could not observe it: ${(e as Error).message}`),
    );
}

async function observeOne(
  ctx: TaskContext,
  t: LocalTask,
  statuses: ReadonlyMap<string, TaskRunStatus>,
): Promise<void> {
  await pollProgress(ctx.log, t);
  if (t.busy !== undefined || t.phase !== 'running') return;
  // The listing may predate a start that ended since (starts run in the background, and the polls above await):
  // ask again before taking a running task for gone.
  const status = statuses.get(t.taskId) ?? (await ctx.options.executor.status(t.taskId));
  if (status === undefined)
    await taskDisappeared(ctx, t, 'the task disappeared from this host (container or process removed)');
  else if (status.state === 'exited') ctx.background(t, () => handleExit(ctx, t, status.exitCode));
}
