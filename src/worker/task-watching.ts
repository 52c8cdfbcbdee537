import { join } from 'node:path';
import type { AgentLogger } from './agent-options.js';
import { CheckpointWatcher } from './checkpoint-watcher.js';
import { ProgressTracker } from './progress.js';
import type { TaskContext } from './task-context.js';
import { checkpointOf, type LocalTask } from './task-record.js';

/** Watching a task while it runs: its checkpoint directory (each checkpoint uploaded) and its progress file. */

export async function watchTask(
  ctx: TaskContext,
  t: LocalTask,
  baseline: 'restored' | 'unknown' = 'restored',
): Promise<void> {
  const store = ctx.registration().store;
  if (store === undefined) return;
  const dir = ctx.taskDir(t.taskId);
  t.progress = new ProgressTracker(join(dir, 'progress'), t.total, ctx.options.throughputWindowSeconds ?? 60);
  t.watcher = new CheckpointWatcher({
    store,
    ref: { jobId: t.jobId, taskId: t.taskId },
    dir: join(dir, 'checkpoint'),
    ...(ctx.options.checkpointPollMs === undefined ? {} : { pollMs: ctx.options.checkpointPollMs }),
    onUpload: (result) => {
      ctx.log.debug?.(
        `task ${t.taskId}: checkpoint ${result.manifest.seq} uploaded in ${result.durationMs} ms`,
      );
      t.checkpoint = checkpointOf(t, result.manifest);
      ctx
        .persist(t)
        .catch((e: unknown) =>
          ctx.log.warn(`task ${t.taskId}: recording its checkpoint failed: ${(e as Error).message}`),
        );
    },
    onError: (e) => ctx.log.warn(`checkpoint upload of ${t.taskId} failed: ${e.message}`),
    retry: ctx.retry,
  });
  const watcher = t.watcher;
  await ctx.retry(`checkpoint listing of ${t.taskId}`, () => watcher.start(baseline));
}

/**
 * A task that will not run here (its start failed, it disappeared) stops having its directory watched: a watcher left
 * behind would go on uploading, and beside the next attempt's own on this host both would number their checkpoints
 * from the same seq, writing different content under one key.
 */
export async function stopWatching(t: LocalTask): Promise<void> {
  await t.watcher?.stop();
  t.watcher = undefined;
}

/**
 * Read the task's progress file (the task writes it, so it may hold anything): a file that cannot be read leaves
 * the last figures, never fails the caller.
 */
export async function pollProgress(log: AgentLogger, t: LocalTask): Promise<void> {
  if (t.progress === undefined) return;
  try {
    const summary = await t.progress.poll();
    // Nothing written yet is no count: a task that never reports has not done 0 of its iterations (a gang's
    // coordinator), and its job's progress is its other tasks'.
    t.completed = summary.lastReportSeconds === undefined ? undefined : summary.completed;
    t.perSecond = summary.iterationsPerSecond;
  } catch (e) {
    log.warn(`task ${t.taskId}: could not read its progress file: ${(e as Error).message}`);
  }
}
