import { parseCheckpointKey } from '../protocol/object-keys.js';
import { checkpointAndStop, type StopDeadline } from './checkpoint-stop.js';
import type { TaskContext } from './task-context.js';
import { didItAll, handleExit } from './task-exit.js';
import { checkpointOf, type LocalTask } from './task-record.js';

/**
 * Stopping a task on this host: a checkpoint-stop (signal, wait, kill if need be, upload what it left) whose kill a
 * notice, or a stop without a checkpoint, may bring forward, or a kill; either ends with the rest of its log stored
 * and the task `stopped`.
 */

export interface StopSettings {
  readonly signal: string;
  readonly timeoutSeconds: number;
}

export class TaskStops {
  /** The checkpoint-stops waiting for their task to exit, by task: what a notice brings forward. */
  private readonly stopDeadlines = new Map<LocalTask, StopDeadline>();
  /** The checkpoint-stops under way turned into a kill (`cutShort`): their kill is logged as asked, not timed out. */
  private readonly cut = new Set<LocalTask>();

  constructor(private readonly ctx: TaskContext) {}

  /**
   * Have the checkpoint-stop under way for the task kill it within `timeoutSeconds` from now if it has not exited by
   * then, when that is at least a second sooner than its own deadline (less is only the milliseconds between two
   * callers' clocks reading the same notice: the agent caps again on every heartbeat). True when the deadline moved;
   * false when it did not, or no checkpoint-stop of the task waits for its exit.
   */
  capStop(t: LocalTask, timeoutSeconds: number): boolean {
    const deadline = this.stopDeadlines.get(t);
    const atMs = Date.now() + timeoutSeconds * 1000;
    if (deadline === undefined || atMs > deadline.atMs - 1000) return false;
    deadline.atMs = atMs;
    return true;
  }

  /**
   * Turn the checkpoint-stop under way for the task into a kill now: the controller asked to stop it without a
   * checkpoint (its job ended while it checkpointed), and a task that ignores the signal would otherwise run, and be
   * billed, until the job's checkpoint timeout. True when a checkpoint-stop of the task was waiting for its exit.
   */
  cutShort(t: LocalTask): boolean {
    const deadline = this.stopDeadlines.get(t);
    if (deadline === undefined) return false;
    if (!this.cut.has(t))
      this.ctx.log.info(`task ${t.taskId}: asked to stop without a checkpoint, killed now`);
    this.cut.add(t);
    deadline.atMs = Math.min(deadline.atMs, Date.now());
    return true;
  }

  async stop(t: LocalTask, checkpoint: boolean, settings: StopSettings): Promise<void> {
    const ctx = this.ctx;
    t.stopRequested = true;
    t.phase = 'checkpointing';
    await ctx.persist(t);
    const executor = ctx.options.executor;
    if (checkpoint) {
      const from = Date.now();
      // Brought forward, never back, by a notice arriving while the task winds down (capStop).
      const deadline: StopDeadline = { atMs: from + settings.timeoutSeconds * 1000 };
      let cut = false;
      this.stopDeadlines.set(t, deadline);
      const result = await checkpointAndStop({
        executor,
        taskId: t.taskId,
        signal: settings.signal as NodeJS.Signals,
        timeoutSeconds: settings.timeoutSeconds,
        deadline,
        watcher: t.watcher,
      }).finally(() => {
        this.stopDeadlines.delete(t);
        cut = this.cut.delete(t);
      });
      if (result.lastManifest !== undefined) t.checkpoint = checkpointOf(t, result.lastManifest);
      if (result.endedBeforeSignal || (result.exitCode === 0 && (await didItAll(ctx, t)))) {
        // It ended as the stop arrived (before the signal, or with its last step done): that end (recorded,
        // reported) is the task's, so nothing runs it again.
        ctx.log.info(`task ${t.taskId} had ended when it was asked to checkpoint and stop`);
        t.stopRequested = false;
        await handleExit(ctx, t, result.exitCode);
        return;
      }
      const resumes =
        t.checkpoint === undefined
          ? 'it starts again from the beginning (no checkpoint uploaded)'
          : 'it resumes from its last uploaded checkpoint';
      ctx.log.info(
        `task ${t.taskId} checkpointed and stopped (${result.outcome} after ${result.elapsedMs} ms)` +
          (result.outcome === 'killed' && cut
            ? ': killed as its controller asked, without waiting for a checkpoint'
            : result.outcome === 'killed'
              ? `: no exit within ${Math.round((deadline.atMs - from) / 1000)} s, killed; ${resumes}`
              : result.markedOnly
                ? `: it exited ${result.exitCode ?? '?'}, ended by a signal that may have cut a write short: ` +
                  `only a checkpoint it marked COMPLETE was taken; ${resumes}`
                : ''),
      );
      if (result.uploadError !== undefined) {
        // Reported with the stop, so the controller tells the job's owner what the move cost: the state the task
        // left is not in the store, and it resumes from its last uploaded checkpoint (the error may well recur):
        // this run's, or the one it restored when it uploaded none.
        const seq = t.checkpoint === undefined ? undefined : parseCheckpointKey(t, t.checkpoint.key)?.seq;
        const from =
          t.checkpoint === undefined
            ? 'its start'
            : seq === undefined
              ? 'its last uploaded checkpoint'
              : `checkpoint ${seq}`;
        t.reason = `its checkpoint at the stop could not be uploaded (${result.uploadError.message}); it resumes from ${from}`;
        ctx.log.warn(`task ${t.taskId}: ${t.reason}`);
      }
    } else {
      await executor.kill(t.taskId);
      await t.watcher?.stop();
    }
    // Unregistered (an agent giving up before its controller ever answered): nowhere to upload the log to.
    if (ctx.registration().store !== undefined) await ctx.logs.uploadRest(t);
    t.phase = 'stopped';
    await ctx.persist(t);
  }
}
