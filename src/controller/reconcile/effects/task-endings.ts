import { isFinalJobState } from '../../state/lifecycle.js';
import type { InstanceRecord, JobRecord, TaskRecord } from '../../state-store.js';
import type { ReconcileContext } from '../context.js';
import { endMoveToCount, settleJob } from '../jobs.js';
import { Slices } from '../yielding.js';
import { notePreparedJobs } from './prepared-jobs.js';
import { lastEndOf, reportedExitAt } from './task-exit-times.js';
import { announce, outcomeOf, taskFailed, type JobOutcome } from './task-failures.js';

/*
 * Tasks their workers report ended: polled while running, or found done while held for a co-start (tasks.ts), each
 * ended in the store with, maybe, its job or its attempt.
 */

/**
 * Poll running tasks; a success or failure ends the task (and, with it, maybe its job or its attempt); a running job
 * all of whose tasks were heard running is prepared (`notePreparedJobs`). Answers how many ended, each freeing its
 * room.
 */
export async function pollTaskStatuses(ctx: ReconcileContext): Promise<number> {
  let endedCount = 0;
  const slices = new Slices(ctx.store);
  const instances = new Map<string, InstanceRecord | undefined>(); // read once per pass
  const heard = new Map<string, string>(); // task heard running → the instance it runs on
  const heardJobs = new Map<string, string[]>(); // job → its tasks heard running, as `task@instance@updated`
  for (const task of ctx.store.listTasks({ states: ['running'] })) {
    await slices.next();
    const instanceId = task.instanceId;
    if (instanceId !== undefined && !instances.has(instanceId))
      instances.set(instanceId, ctx.store.getInstance(instanceId));
    const instance = instanceId === undefined ? undefined : instances.get(instanceId);
    // A draining instance still runs its tasks until they are stopped (a move making before it breaks, a drain).
    if (instance === undefined || (instance.state !== 'running' && instance.state !== 'draining')) continue;
    const status = await ctx.deps.tasks.status(task, instance);
    if (status === 'running') {
      heard.set(task.id, instance.id);
      const marks = heardJobs.get(task.jobId) ?? [];
      marks.push(`${task.id}@${instance.id}@${task.updatedAtSeconds}`);
      heardJobs.set(task.jobId, marks);
    }
    if (status !== 'succeeded' && status !== 'failed') continue;
    slices.defer(() => {
      const ended = taskEnded(ctx, task, instanceId, 'running', status);
      if (ended === undefined) return undefined;
      endedCount += 1;
      const outcome = ended.outcome;
      return outcome === undefined ? undefined : () => announce(ctx, outcome);
    });
  }
  slices.commit();
  notePreparedJobs(ctx, heardJobs, heard);
  return endedCount;
}

/**
 * A task its worker reported ended (`status`), in a transaction: when it is still `from` on `instanceId` and its job
 * has not ended, it ends, dated at its exit (task-exit-times.ts), and with it maybe its job (every task succeeded) or
 * its attempt (taskFailed); a success while its siblings work on settles the job. Answers undefined when nothing
 * ended, else what its job's end or retry asks for once committed (`announce`), if anything.
 */
export function taskEnded(
  ctx: ReconcileContext,
  task: TaskRecord,
  instanceId: string | undefined,
  from: 'running' | 'starting',
  status: 'succeeded' | 'failed',
): { readonly outcome: JobOutcome | undefined } | undefined {
  const job = ctx.store.getJob(task.jobId) as JobRecord;
  const current = ctx.store.getTask(task.id) as TaskRecord;
  // Ended, or moved off, while the pass let the API in.
  if (isFinalJobState(job.state) || current.state !== from || current.instanceId !== instanceId)
    return undefined;
  // Ended when it exited, which a controller that was down hears only now (task-exit-times.ts).
  const exitedAt = reportedExitAt(ctx.store, ctx.deps.tasks, current, ctx.deps.clock.nowSeconds());
  ctx.store.setTaskState(task.id, status, undefined, { atSeconds: exitedAt });
  const all = ctx.store.listTasks({ jobId: job.id });
  if (status === 'succeeded')
    // Done with its part while its job was moving: it needs no start at the job's new place.
    for (const start of ctx.pendingStartsOf(new Set([task.id])))
      ctx.store.failIntent(start.id, `task ${task.id} succeeded`);
  const outcome: JobOutcome | undefined =
    status === 'failed'
      ? taskFailed(ctx, job, task, exitedAt)
      : all.every((t) => t.state === 'succeeded')
        ? outcomeOf(jobSucceeded(ctx, job, all))
        : undefined;
  // Ended: a move of it kept to count never will be (its stops, if any, find no task to stop).
  if (outcome !== undefined && isFinalJobState(outcome.job.state)) endMoveToCount(ctx, job.id);
  if (outcome === undefined && status === 'succeeded') settleJob(ctx, job.id, `task ${task.id} succeeded`);
  return { outcome };
}

/**
 * The job all of whose tasks succeeded ends so, when its last task did. One still starting (its last task found done
 * as it was held, its siblings done before) ran all the same: it ends through `running`, as the lifecycle has it,
 * dated at that end too (its start is not the controller finding it done).
 */
function jobSucceeded(ctx: ReconcileContext, job: JobRecord, tasks: readonly TaskRecord[]): JobRecord {
  const at = { atSeconds: lastEndOf(ctx.store, tasks) };
  const why = 'every task succeeded';
  if (job.state === 'queued') ctx.store.setJobState(job.id, 'starting', why);
  if (job.state === 'queued' || job.state === 'starting') ctx.store.setJobState(job.id, 'running', why, at);
  return ctx.store.setJobState(job.id, 'succeeded', undefined, at);
}
