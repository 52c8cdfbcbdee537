import { addJobWarning } from '../../execution-check.js';
import type { JobRecord, TaskRecord } from '../../state-store.js';
import type { ReconcileContext } from '../context.js';

/**
 * A task that could not start because of its instance's host, not its job (its worker says so: a full disk under the
 * checkpoint restore, src/worker/host-fault.ts): the job is not to blame, so the failure uses none of its attempts.
 * Its tasks go back to be placed anew, as at a retry, the job is queued again with its attempts unchanged, and the
 * instance is drained (as a drain by request drains it), so the next round places nothing there and moves off what
 * runs there. Bounded: a job whose start fails so on every worker (a checkpoint larger than any worker's disk) would
 * otherwise go round for ever, so once it was queued again MAX_HOST_FAULT_REQUEUES times, a host fault counts as an
 * ordinary failure (its retryStrategy decides). The count is the job's HOST_FAULT_EVENTs in the store, so a
 * restarted controller keeps it.
 */

/** Recorded on the job at each requeue for a host fault (its instance and why); what the bound counts. */
export const HOST_FAULT_EVENT = 'job.host-fault';

/** Requeues for host faults a job is given; the next host fault is an ordinary failure. */
export const MAX_HOST_FAULT_REQUEUES = 3;

/** The job view's warning (execution-check.ts addJobWarning), replaced at each host fault. */
const HOST_FAULT_WARNING = 'host fault:';

export type HostFaultOutcome =
  /** Queued again without using an attempt; its instance drained. */
  | { readonly kind: 'requeued'; readonly job: JobRecord; readonly instanceId: string }
  /** The bound is reached: an ordinary failure, whose reason carries `note`. */
  | { readonly kind: 'counted'; readonly note: string };

/**
 * What becomes of the failure of `task` (already `failed` in the store; `task` as it was, on its instance) when its
 * task control says its host was at fault: undefined when it was not (an ordinary failure). `releaseTasks` does what a
 * retry does to the job's tasks (pending starts failed, others checkpointed and stopped, all back to be placed). In the
 * caller's transaction.
 */
export function hostFaultOutcome(
  ctx: ReconcileContext,
  job: JobRecord,
  task: TaskRecord,
  releaseTasks: (reason: string) => void,
): HostFaultOutcome | undefined {
  const control = ctx.deps.tasks;
  const instanceId = task.instanceId;
  if (instanceId === undefined || control.hostFault?.(task) !== true) return undefined;
  const requeues = ctx.store.listEvents({ jobId: job.id, kind: HOST_FAULT_EVENT }).length;
  if (requeues >= MAX_HOST_FAULT_REQUEUES)
    return {
      kind: 'counted',
      note:
        `its instance ${instanceId}'s host was at fault, and the job was already placed again ` +
        `${requeues} time${requeues === 1 ? '' : 's'} for host faults (at most ${MAX_HOST_FAULT_REQUEUES})`,
    };
  const why = control.failureReason?.(task) ?? 'its start failed';
  const reason = `task ${task.id} could not start on ${instanceId} because of the instance's host, not the job: ${why}`;
  releaseTasks(reason);
  const current = ctx.store.getJob(job.id) as JobRecord;
  const queued = current.state === 'queued' ? current : ctx.store.setJobState(job.id, 'queued', reason);
  const count = `host fault ${requeues + 1} of at most ${MAX_HOST_FAULT_REQUEUES}`;
  ctx.store.appendEvent({
    kind: HOST_FAULT_EVENT,
    jobId: job.id,
    taskId: task.id,
    instanceId,
    message:
      `${reason}; queued again without using an attempt (still attempt ${queued.attempts}, ${count}), ` +
      `${instanceId} drained`,
    data: { requeue: requeues + 1, max: MAX_HOST_FAULT_REQUEUES, attempt: queued.attempts, reason: why },
  });
  addJobWarning(
    ctx.store,
    job.id,
    HOST_FAULT_WARNING,
    `task ${task.id} could not start on ${instanceId} (${why}); queued again without using an attempt (${count}), ` +
      `and ${instanceId} drained`,
  );
  drain(ctx, instanceId, `host fault: task ${task.id} could not start there: ${why}`);
  ctx.log.warn(`job ${job.id} queued again: host fault on ${instanceId}`, { taskId: task.id, reason: why });
  return { kind: 'requeued', job: queued, instanceId };
}

/**
 * Drain the instance, as a drain by request does (job-control.ts `drain`): not schedulable any more, its tasks moved
 * off by the next plan, and terminated once empty. One already on its way out is left as it is.
 */
function drain(ctx: ReconcileContext, instanceId: string, reason: string): void {
  const inst = ctx.store.getInstance(instanceId);
  if (inst === undefined || (inst.state !== 'launching' && inst.state !== 'running')) return;
  ctx.store.setInstanceState(inst.id, 'draining', { reason });
}
