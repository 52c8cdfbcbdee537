import { join } from 'node:path';
import type { TaskRunStatus } from './executor.js';
import type { TaskContext } from './task-context.js';
import { taskDisappeared } from './task-exit.js';
import { listTasks } from './task-observation.js';
import { readPersistedTasks, taskFromRecord, type LocalTask } from './task-record.js';
import { watchTask } from './task-watching.js';

/**
 * A restarted worker taking its tasks back: each one the executor still has, as its record on this host describes
 * it; and each one recorded as running that the executor no longer has, failed.
 */

/**
 * After a restart: every task the executor still has is ours again (found by label / pid file), as its record here
 * describes it. A task recorded as running that the executor no longer has was removed while no worker ran: failed,
 * as when one disappears under a running worker, never started again as if nothing had happened.
 */
export async function adoptTasks(ctx: TaskContext): Promise<void> {
  const executor = ctx.options.executor;
  const statuses = await listTasks(executor);
  const records = await readPersistedTasks(join(ctx.options.workDir, 'tasks'));
  for (const status of statuses) {
    if (ctx.tasks.has(status.taskId)) continue;
    const saved = records.get(status.taskId);
    const t = saved === undefined ? rebuild(status) : taskFromRecord(status.taskId, saved);
    if (t.phase === 'starting' || t.phase === 'checkpointing') t.phase = 'running';
    if (saved === undefined && t.attempt === undefined) {
      // Neither its record nor the executor says which attempt it is: its exit would be recorded and reported as
      // attempt 1's, and a later attempt's `run` would start it a second time. Stopped instead (ended, if it still
      // runs: nothing here could report it), so the controller runs it again from its last checkpoint.
      if (status.state !== 'exited') await executor.kill(t.taskId);
      t.phase = 'stopped';
      t.reason =
        'the worker lost its record of the task and the executor kept no launch to rebuild it from; ' +
        'it resumes from its last checkpoint';
      ctx.log.warn(`task ${t.taskId}: ${t.reason}`);
      await ctx.persist(t);
    } else if (t.phase === 'running' && status.state === 'exited' && status.exitCode === undefined) {
      // No exit code: the task did not end, it was ended with the worker that ran it (a local instance's tasks die
      // with their worker, process.ts). Not the task's failure: it is stopped, and runs again from its last
      // checkpoint if it is still wanted here.
      t.phase = 'stopped';
      t.reason = 'ended with the worker that ran it; it resumes from its last checkpoint';
      await ctx.persist(t);
    } else if (t.phase === 'running' && status.state === 'starting') {
      // Created and never started (the worker died between the two): nothing of it ran. Stopped, so a `run` starts
      // it afresh (the start removes this container first), and a stop or an answer without it finds it ended.
      t.phase = 'stopped';
      await ctx.persist(t);
    } else if (saved === undefined) await ctx.persist(t);
    ctx.tasks.set(t.taskId, t);
    // The watcher starts by listing the store: in the background, so an outage cannot hold up the heartbeat. A
    // task that exited while no worker ran is watched too: what it wrote before exiting (the final checkpoint a
    // stop's signal asked for) is uploaded when its exit is handled (task-exit.ts), before that exit is reported; an
    // exit 0 short of its declared iterations is taken there as a stop from outside, as it is while watched.
    if (t.phase === 'running') ctx.background(t, () => watchTask(ctx, t, 'unknown'));
    ctx.log.info(`adopted task ${t.taskId} (${status.state})`);
  }
  const listed = new Set(statuses.map((s) => s.taskId));
  for (const [taskId, saved] of records) {
    if (saved === undefined || listed.has(taskId) || ctx.tasks.has(taskId)) continue;
    // A record still `starting` is a start the worker died in before the executor had the task: nothing ran.
    if (saved.phase !== 'running' && saved.phase !== 'checkpointing') continue;
    const t = taskFromRecord(taskId, saved);
    ctx.tasks.set(taskId, t);
    await taskDisappeared(
      ctx,
      t,
      'the task disappeared while the worker was down (container or process removed)',
    );
    ctx.log.warn(`task ${taskId}: ${t.reason ?? ''}`);
  }
}

/**
 * A task the executor has and this host has no readable record of: what the executor kept of its launch (attempt,
 * checkpoint signal, declared iterations) stands in for the record. Without it the attempt stays undefined.
 */
function rebuild(status: TaskRunStatus): LocalTask {
  const launched = status.launched;
  return {
    taskId: status.taskId,
    jobId: launched?.jobId ?? status.taskId.replace(/\.\d+$/, ''),
    phase: 'running',
    startedAtMs: status.startedAt?.getTime() ?? Date.now(),
    stopRequested: false,
    signal: launched?.checkpointSignal,
    timeoutSeconds: launched?.checkpointTimeoutSeconds,
    attempt: launched?.attempt,
    total: launched?.totalIterations,
    lastLogUploadMs: 0,
  };
}
