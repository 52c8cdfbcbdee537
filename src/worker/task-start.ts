import type { DesiredTask } from '../protocol/worker-protocol.js';
import type { TaskLaunch } from './executor.js';
import type { TaskExitRecord } from './exit-record.js';
import { hostFaultOf } from './host-fault.js';
import type { TaskContext } from './task-context.js';
import { prepareTask } from './task-preparation.js';
import type { LocalTask } from './task-record.js';
import { stopWatching, watchTask } from './task-watching.js';

/**
 * Starting a task on this host, in the background: prepared (task-preparation.ts), then run, or held ready until its
 * job is released (co-start); a start that fails leaves the task failed, with whether this host is to blame.
 */

export function startTask(ctx: TaskContext, d: DesiredTask): void {
  const previous = ctx.tasks.get(d.taskId);
  // A new attempt here: the last one's watcher must not outlive it (stopWatching).
  const stale = previous?.watcher;
  if (previous !== undefined) previous.watcher = undefined;
  // The same attempt here again: the stops from outside it had here go on (outsideStopsSpent bounds them); a rerun
  // after a stop (from outside, or a move) also goes on from how far they got.
  const sameAttempt = previous !== undefined && (previous.attempt ?? 1) === (d.attempt ?? 1);
  const rerun = sameAttempt && previous.phase === 'stopped';
  const t: LocalTask = {
    taskId: d.taskId,
    jobId: d.jobId,
    phase: 'starting',
    startedAtMs: Date.now(),
    stopRequested: false,
    signal: d.checkpoint.signal,
    timeoutSeconds: d.checkpoint.timeoutSeconds,
    attempt: d.attempt,
    checkpoint: previous?.checkpoint,
    lastLogUploadMs: 0,
    total: d.totalIterations,
    // A rerun here after stops from outside: how far they got, and how many got no further (stoppedFromOutside).
    stoppedOutsideAt: rerun ? previous?.stoppedOutsideAt : undefined,
    outsideStops: rerun ? previous?.outsideStops : undefined,
    attemptOutsideStops: sameAttempt ? previous.attemptOutsideStops : undefined,
  };
  ctx.tasks.set(d.taskId, t);
  ctx.background(t, async () => {
    await stale?.stop();
    try {
      const prepared = await prepare(ctx, t, d);
      if (!('command' in prepared)) {
        const exited = prepared;
        // It ended before, where no controller heard of it: report that end, never run it a second time.
        t.phase = exited.state;
        t.exitCode = exited.exitCode;
        t.reason = exited.reason;
        t.completed = exited.completedIterations;
        // Its end is when it exited, not when this worker found the record.
        t.exitedAtMs = Date.parse(exited.exitedAt);
        ctx.log.info(
          `task ${t.taskId} already ${exited.state} (exit ${exited.exitCode ?? '?'}) on ${exited.instanceId ?? 'another instance'} at ${exited.exitedAt}: not run again`,
        );
      } else if (d.hold === true) {
        // Co-start: prepared, and held until the controller releases its job (every task ready).
        t.prepared = prepared;
        t.phase = 'ready';
        ctx.log.info(`task ${t.taskId} ready; waiting for its job's other tasks`);
      } else {
        await ctx.options.executor.start(prepared);
        t.phase = 'running';
        ctx.log.info(`started ${t.taskId}${prepared.restoring ? ' from a checkpoint' : ''}`);
      }
    } catch (e) {
      await startFailed(ctx, t, e);
    }
    await ctx.persist(t);
  });
}

/**
 * The task's start failed: it is failed, with why, and whether this host is to blame (host-fault.ts), so that the
 * controller places its job elsewhere without counting the failure against it.
 */
async function startFailed(ctx: TaskContext, t: LocalTask, e: unknown): Promise<void> {
  const message = e instanceof Error ? e.message : String(e);
  t.phase = 'failed';
  t.reason = `could not start: ${message}`;
  t.hostFault = hostFaultOf(e);
  ctx.log.warn(
    `task ${t.taskId} could not start${t.hostFault === undefined ? '' : ` (this host's fault: ${t.hostFault})`}: ${message}`,
  );
  await stopWatching(t);
}

/**
 * A held task's job was released (all its tasks are ready): start what was prepared. A start that fails leaves the
 * task failed, as any start.
 */
export function releaseTask(ctx: TaskContext, t: LocalTask): void {
  const prepared = t.prepared;
  if (t.phase !== 'ready' || prepared === undefined) return;
  t.phase = 'starting';
  t.startedAtMs = Date.now();
  ctx.background(t, async () => {
    try {
      await ctx.options.executor.start(prepared);
      t.phase = 'running';
      t.prepared = undefined;
      ctx.log.info(`started ${t.taskId} (released)${prepared.restoring ? ' from a checkpoint' : ''}`);
    } catch (e) {
      await startFailed(ctx, t, e);
    }
    await ctx.persist(t);
  });
}

/** Everything a start needs before the task runs (task-preparation.ts). */
async function prepare(ctx: TaskContext, t: LocalTask, d: DesiredTask): Promise<TaskExitRecord | TaskLaunch> {
  return prepareTask(
    {
      options: ctx.options,
      log: ctx.log,
      requireStore: () => ctx.requireStore(),
      retry: ctx.retry,
      dir: ctx.taskDir(t.taskId),
      persist: (task) => ctx.persist(task),
      watch: (task) => watchTask(ctx, task),
    },
    t,
    d,
  );
}
