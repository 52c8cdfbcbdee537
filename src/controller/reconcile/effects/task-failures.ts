import { retryVerdict } from '../../job-spec/retry.js';
import type { RoundCause } from '../../service.js';
import { isFinalJobState, PLACED_TASK_STATES } from '../../state/lifecycle.js';
import type { JobRecord, TaskRecord } from '../../state-store.js';
import type { ReconcileContext } from '../context.js';
import { endStartsUnreleased } from '../jobs.js';
import { hostFaultOutcome, hostFaultRuns } from './host-faults.js';

/**
 * A task that failed, and what becomes of its job: queued again for a host fault (host-faults.ts), ended unsuccessful
 * or failed, or retried under its retryStrategy; and, once that is committed, the round it asks for.
 */

/** What a task's end did to its job, and the round it asks for once that is committed. */
export interface JobOutcome {
  readonly job: JobRecord;
  readonly round: string;
  readonly cause?: RoundCause | undefined;
}

/** The job ended, or was retried. */
export function outcomeOf(job: JobRecord): JobOutcome {
  return {
    job,
    round: isFinalJobState(job.state)
      ? `job ${job.id} ${job.state}`
      : `job ${job.id} retried (attempt ${job.attempts})`,
  };
}

/** Once committed: an ended job's hook, and the round its end or its return to the queue asks for. */
export function announce(ctx: ReconcileContext, outcome: JobOutcome): void {
  if (isFinalJobState(outcome.job.state)) ctx.deps.onJobEnded?.(outcome.job);
  ctx.requestRound(outcome.round, outcome.cause);
}

/**
 * A task of `job` failed (its state already says so; `task` as it was, on its instance): when its instance's host was
 * at fault, the job is queued again without using an attempt (host-faults.ts); otherwise the job ends unsuccessful on
 * one of its `unsuccessfulExitCodes`, is retried when its `retryStrategy` says so, and fails otherwise. `exitedAt`:
 * when the task exited, if before now (heard late: task-exit-times.ts); the job's end or its attempt's failure is
 * dated then.
 */
export function taskFailed(
  ctx: ReconcileContext,
  job: JobRecord,
  task: TaskRecord,
  exitedAt?: number,
): JobOutcome {
  const at = { atSeconds: exitedAt };
  const host = hostFaultOutcome(ctx, job, task, (reason) => releaseForNextPlacement(ctx, job, reason));
  if (host?.kind === 'requeued')
    return {
      job: host.job,
      round: `job ${job.id} queued again (host fault on ${host.instanceId})`,
      // Its instance is drained: capacity lost, planned for at once.
      cause: 'capacity',
    };
  const code = ctx.deps.tasks.exitCode?.(task);
  // A declared "unsuccessful at a stage" exit (success-ranked ordering) is not a failure.
  if (code !== undefined && (job.spec.unsuccessfulExitCodes ?? []).includes(code)) {
    stopOtherTasks(ctx, job, false);
    return outcomeOf(
      ctx.store.setJobState(
        job.id,
        'unsuccessful',
        `task ${task.id} exited with ${code}, one of the job's unsuccessfulExitCodes`,
        at,
      ),
    );
  }
  const reported = ctx.deps.tasks.failureReason?.(task);
  const why = host === undefined ? reported : `${reported ?? 'its start failed'} (${host.note})`;
  const failure = `task ${task.id} failed${why === undefined ? '' : `: ${why}`}`;
  // Runs a host fault ended are not the job's attempts (host-faults.ts); never below its first.
  const attempt = Math.max(1, job.attempts - hostFaultRuns(ctx.store, job.id));
  const verdict = retryVerdict(job.spec, attempt, code);
  if (verdict.retry)
    return outcomeOf(
      retryJob(
        ctx,
        job,
        task,
        code,
        `attempt ${attempt} of ${verdict.attempts} failed: task ${task.id}, ${verdict.why}`,
        why ?? 'failed',
        exitedAt,
      ),
    );
  stopOtherTasks(ctx, job, false);
  return outcomeOf(
    ctx.store.setJobState(
      job.id,
      'failed',
      job.spec.retryStrategy === undefined
        ? failure
        : `attempt ${attempt} of ${verdict.attempts}, ${verdict.why}: ${failure}`,
      at,
    ),
  );
}

/**
 * The next attempt of a job one of whose tasks failed. Its other running tasks checkpoint and stop, every task goes
 * back to be placed anew (a gang restarts whole, tasks that had succeeded too), and the job is queued: the next round
 * plans it, and each task resumes from its last checkpoint (AWS Batch starts a retried job over).
 */
function retryJob(
  ctx: ReconcileContext,
  job: JobRecord,
  failed: TaskRecord,
  exitCode: number | undefined,
  reason: string,
  why: string,
  exitedAt: number | undefined,
): JobRecord {
  releaseForNextPlacement(ctx, job, reason);
  return ctx.store.retryJob(
    job.id,
    {
      taskId: failed.id,
      ...(exitCode === undefined ? {} : { exitCode }),
      reason: why,
      ...(exitedAt === undefined ? {} : { atSeconds: exitedAt }),
    },
    reason,
  );
}

/**
 * A job one of whose tasks failed runs again (a retry, or a requeue after a host fault): its pending starts are void,
 * its other running tasks checkpoint and stop, and every task goes back to be placed anew (a gang restarts whole).
 */
function releaseForNextPlacement(ctx: ReconcileContext, job: JobRecord, reason: string): void {
  const tasks = ctx.store.listTasks({ jobId: job.id });
  for (const start of ctx.pendingStartsOf(new Set(tasks.map((t) => t.id))))
    ctx.store.failIntent(start.id, reason);
  stopOtherTasks(ctx, job, true);
  // Held siblings of a co-started job: their holds end unreleased (idle, barrier-idle cost), not as the job's time.
  endStartsUnreleased(ctx, job, reason);
  for (const t of ctx.store.listTasks({ jobId: job.id }))
    if (!PLACED_TASK_STATES.includes(t.state)) ctx.store.setTaskState(t.id, 'pending');
}

/** Stop intents for the job's tasks still on an instance (checkpointed when the job runs again). */
function stopOtherTasks(ctx: ReconcileContext, job: JobRecord, checkpoint: boolean): void {
  const stopping = new Set<string>();
  for (const i of ctx.store.listIntents({ states: ['pending'], kind: 'stop-task' }))
    if (i.kind === 'stop-task') stopping.add(i.payload.taskId);
  for (const other of ctx.store.listTasks({ jobId: job.id })) {
    if (!PLACED_TASK_STATES.includes(other.state)) continue;
    // A task only headed to an instance has nothing to stop there (retryJob releases it).
    if (checkpoint && other.state === 'starting') continue;
    if (checkpoint && stopping.has(other.id)) continue;
    ctx.store.recordIntent({
      kind: 'stop-task',
      payload: { taskId: other.id, instanceId: other.instanceId as string, checkpoint },
    });
    if (checkpoint) ctx.store.setTaskState(other.id, 'checkpointing');
  }
}
