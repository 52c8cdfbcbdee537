import { SIGKILL_EXIT_CODE } from './executor.js';
import { exitOf, writeExitRecord } from './exit-record.js';
import {
  gotFurther,
  outsideStopsSpent,
  reportedAll,
  SIGTERM_EXIT_CODE,
  stoppedFromOutside,
} from './outside-stops.js';
import type { TaskContext } from './task-context.js';
import type { LocalTask } from './task-record.js';
import { pollProgress, stopWatching } from './task-watching.js';

/**
 * How a task's end is taken on this host: an exit (success, failure, a stop it was asked for, or a stop from outside
 * the worker), recorded in the object store before it is reported; or the task gone from the executor.
 */

/** A running task is gone from this host: failed, unwatched, recorded. */
export async function taskDisappeared(ctx: TaskContext, t: LocalTask, reason: string): Promise<void> {
  t.phase = 'failed';
  t.reason = reason;
  await stopWatching(t);
  await ctx.persist(t);
}

/**
 * Whether a SIGKILL ended the task (exit 137) and the executor says it was not the kernel reclaiming memory: someone
 * killed it (`docker stop` of a task that ignores SIGTERM, past its grace; `docker kill`). The process executor
 * cannot tell such a kill from the kernel's out-of-memory kill, so there it is never taken for one.
 */
async function killedFromOutside(
  ctx: TaskContext,
  exitCode: number | undefined,
  taskId: string,
): Promise<boolean> {
  const executor = ctx.options.executor;
  if (exitCode !== SIGKILL_EXIT_CODE || executor.reportsOomKills !== true) return false;
  const status = await executor.status(taskId).catch(() => undefined);
  return status !== undefined && status.oomKilled !== true;
}

/** The task has reported every iteration its job declares (none declared: not known, so no). */
export async function didItAll(ctx: TaskContext, t: LocalTask): Promise<boolean> {
  if (t.total === undefined) return false;
  await pollProgress(ctx.log, t);
  return reportedAll(t);
}

/**
 * The task exited without being asked: 0 is success, anything else a failure with its last output; but an exit a
 * stop from outside the worker explains is a stop (stoppedFromOutside), whether it was watched or happened while no
 * worker ran. Also a task adopted after it exited during a stop (the worker that signalled it died meanwhile):
 * stopped, as the stop would have reported it, unless it exited 0 having done every iteration (the stop's rule).
 */
export async function handleExit(
  ctx: TaskContext,
  t: LocalTask,
  exitCode: number | undefined,
): Promise<void> {
  await pollProgress(ctx.log, t);
  if (!t.stopRequested) {
    const outside = stoppedFromOutside(
      t,
      exitCode,
      await killedFromOutside(ctx, exitCode, t.taskId),
      ctx.options.executor.kind,
    );
    if (outside !== undefined) await stoppedOutside(ctx, t, outside, exitCode);
  }
  if (t.stopRequested && exitCode === 0 && (await didItAll(ctx, t))) t.stopRequested = false;
  // Killed (that stop's timeout ran out, or a SIGTERM it did not handle): what is in its directory may be torn
  // mid-write, as after a stop's kill.
  const killed = t.stopRequested && (exitCode === SIGKILL_EXIT_CODE || exitCode === SIGTERM_EXIT_CODE);
  // The exit is stored first, its last output read here: the last checkpoints and the log take as long as the
  // store does, and a worker that dies meanwhile must not take the exit with it (exit-record.ts). Still reported
  // only once all three are stored.
  if (!t.stopRequested) {
    const { record, reason } = await exitOf(t, exitCode, ctx.options.executor, ctx.options.cloudInstanceId);
    // Stored before it is reported: from then on a worker asked to run it again finds its end (exit-record.ts).
    const store = ctx.requireStore();
    await ctx.retry(`exit record of ${t.taskId}`, () => writeExitRecord(store, record));
    t.reason = reason;
    t.exitedAtMs = Date.parse(record.exitedAt);
  }
  if (t.watcher !== undefined) {
    await t.watcher.stop();
    if (killed) await t.watcher.flushMarkedOnly();
    else await t.watcher.flush();
  }
  await ctx.logs.uploadRest(t);
  t.exitCode = exitCode;
  if (t.stopRequested) t.phase = 'stopped';
  else t.phase = exitCode === 0 ? 'succeeded' : 'failed';
  ctx.log.info(`task ${t.taskId} ${t.phase} (exit ${exitCode ?? '?'})`);
  await ctx.persist(t);
}

/**
 * An exit taken for a stop from outside (`outside`, why): not the task's end, so no exit is recorded and it runs
 * again from its last checkpoint; unless such stops are spent for it (outsideStopsSpent), when its exit is taken at
 * its word.
 */
async function stoppedOutside(
  ctx: TaskContext,
  t: LocalTask,
  outside: string,
  exitCode: number | undefined,
): Promise<void> {
  const further = await gotFurther(t, ctx.registration().store);
  const inAttempt = t.attemptOutsideStops ?? 0;
  const spent = outsideStopsSpent(t, further, inAttempt);
  if (spent !== undefined) {
    ctx.log.warn(`task ${t.taskId}: ${spent}: its exit (code ${exitCode ?? '?'}) is taken at its word`);
    return;
  }
  t.stopRequested = true;
  t.reason = outside;
  t.outsideStops = (further ? 0 : (t.outsideStops ?? 0)) + 1;
  t.stoppedOutsideAt = Math.max(t.completed ?? 0, t.stoppedOutsideAt ?? 0);
  t.attemptOutsideStops = inAttempt + 1;
  ctx.log.warn(`task ${t.taskId}: ${outside}`);
}
