import { constants } from 'node:os';
import type { CheckpointManifest } from './checkpoints.js';
import type { CheckpointWatcher } from './checkpoint-watcher.js';
import { SIGKILL_EXIT_CODE, type Executor } from './executor.js';
import { SIGTERM_EXIT_CODE } from './outside-stops.js';

/** A checkpoint-stop of a task: the first half of a move, on the instance it leaves. */

export interface CheckpointAndStopOptions {
  readonly executor: Executor;
  readonly taskId: string;
  readonly signal: NodeJS.Signals;
  readonly timeoutSeconds: number;
  /**
   * When to kill the task if it has not exited, read on every look so that it can be brought forward meanwhile (a
   * spot notice arriving during the stop); default: `timeoutSeconds` from the start.
   */
  readonly deadline?: StopDeadline | undefined;
  /** The task's watcher: flushed after the task is gone, so its final checkpoint is uploaded before we report. */
  readonly watcher?: CheckpointWatcher | undefined;
  readonly pollMs?: number;
}

/** A checkpoint-stop's kill time (epoch ms), which its owner may move while the stop waits. */
export interface StopDeadline {
  atMs: number;
}

export interface CheckpointAndStopResult {
  /** `exited`: the task exited within the timeout; `killed`: it did not and was killed (work since the last upload is lost). */
  readonly outcome: 'exited' | 'killed' | 'gone';
  readonly exitCode: number | undefined;
  /** The newest checkpoint in the store from this watcher after the stop (the restore point). */
  readonly lastManifest: CheckpointManifest | undefined;
  /** The final upload failed (`CheckpointWatcher.finalUploadError`): the task resumes from `lastManifest`, if any. */
  readonly uploadError: Error | undefined;
  readonly elapsedMs: number;
  /**
   * Only a checkpoint the task marked COMPLETE was taken from what it left: it was killed, or its exit code says a
   * signal ended it (137, 143, 128 + the stop's signal), so an unmarked state may be torn mid-write.
   */
  readonly markedOnly: boolean;
  /**
   * The task had exited on its own before the signal was sent (it ended as the stop arrived): its exit is its end,
   * a success or a failure, not a checkpoint for a move.
   */
  readonly endedBeforeSignal: boolean;
}

/**
 * The move's first half on the source: signal the task, wait up to its timeout for it to exit, kill it
 * otherwise, upload what it left, and only then report it stopped.
 */
export async function checkpointAndStop(options: CheckpointAndStopOptions): Promise<CheckpointAndStopResult> {
  const { executor, taskId, watcher } = options;
  const started = Date.now();
  const pollMs = options.pollMs ?? 200;
  const initial = await executor.status(taskId);
  let outcome: CheckpointAndStopResult['outcome'] = 'gone';
  let exitCode: number | undefined;
  // Only an exit seen before signalling counts: a file's modification time (the process executor's exit record) runs
  // on the kernel's coarse clock and may read earlier than a signal sent just before it.
  const endedBeforeSignal = initial?.state === 'exited';
  if (initial !== undefined) {
    if (initial.state !== 'exited') await executor.signal(taskId, options.signal);
    const deadline = options.deadline ?? { atMs: started + options.timeoutSeconds * 1000 };
    for (;;) {
      const s = await executor.status(taskId);
      if (s === undefined || s.state === 'exited') {
        outcome = 'exited';
        exitCode = s?.exitCode;
        break;
      }
      if (Date.now() >= deadline.atMs) {
        await executor.kill(taskId);
        outcome = 'killed';
        exitCode = (await executor.status(taskId))?.exitCode;
        break;
      }
      await new Promise((r) => setTimeout(r, Math.min(pollMs, Math.max(1, deadline.atMs - Date.now()))));
    }
  }
  // A task killed, or ended by a signal it does not handle (or traps with `exit 143`), may have died mid-rewrite of
  // its state: an unmarked directory then is no checkpoint, and uploaded it would be the restore's newest.
  const markedOnly = outcome === 'killed' || (!endedBeforeSignal && diedOfSignal(exitCode, options.signal));
  if (watcher !== undefined) {
    await watcher.stop();
    if (markedOnly) await watcher.flushMarkedOnly();
    else await watcher.flush();
  }
  return {
    outcome,
    exitCode,
    lastManifest: watcher?.lastManifest,
    uploadError: watcher?.finalUploadError,
    elapsedMs: Date.now() - started,
    markedOnly,
    endedBeforeSignal,
  };
}

/**
 * The exit code says a signal ended the task (128 + n, as Docker and the process executor report it): a kill,
 * SIGTERM, or the stop's own signal.
 */
function diedOfSignal(exitCode: number | undefined, signal: NodeJS.Signals): boolean {
  if (exitCode === undefined) return false;
  if (exitCode === SIGKILL_EXIT_CODE || exitCode === SIGTERM_EXIT_CODE) return true;
  const n = (constants.signals as Partial<Record<NodeJS.Signals, number>>)[signal];
  return n !== undefined && exitCode === 128 + n;
}
