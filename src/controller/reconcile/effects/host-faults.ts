import { addJobWarning } from '../../execution-check.js';
import type { JobRecord, StateStore, TaskRecord } from '../../state-store.js';
import type { ReconcileContext } from '../context.js';

/**
 * A task that could not start because of its instance's host, not its job (its worker says so: a full disk under the
 * checkpoint restore, a container engine down, src/worker/host-fault.ts): the job is not to blame, so the failure uses
 * none of its attempts. Its tasks go back to be placed anew, as at a retry, and the job is queued again for a new run
 * (numbered as an attempt is) that its retryStrategy does not count (`hostFaultRuns`). A `broken` host (a disk
 * read-only or failing, an engine down or hung) can start nothing: its instance is drained (as a drain by request
 * drains it), so the next round places nothing there and moves off what runs there. A host short of `space` is left as
 * it is: what did not fit may be this job's alone (a restore that fails empties what it wrote), and draining would move
 * every other job on it, at the cost of their work since their last checkpoints. Bounded: a job whose start fails so on
 * every worker (a checkpoint larger than any worker's disk) would otherwise go round for ever, so once it was queued
 * again MAX_HOST_FAULT_REQUEUES times, a host fault counts as an ordinary failure (its retryStrategy decides). The
 * count is the job's HOST_FAULT_EVENTs in the store, so a restarted controller keeps it.
 */

/** Recorded on the job at each requeue for a host fault (its instance and why); what the bound counts. */
export const HOST_FAULT_EVENT = 'job.host-fault';

/** Requeues for host faults a job is given; the next host fault is an ordinary failure. */
export const MAX_HOST_FAULT_REQUEUES = 3;

/**
 * The runs of the job that host faults ended and that its retryStrategy does not count: `attempts` less these is how
 * many of its attempts it used (each requeue for a host fault is a new run, numbered as an attempt is).
 */
export function hostFaultRuns(store: Pick<StateStore, 'listEvents'>, jobId: string): number {
  return store.listEvents({ jobId, kind: HOST_FAULT_EVENT }).length;
}

/** The job view's warning (execution-check.ts addJobWarning), replaced at each host fault. */
const HOST_FAULT_WARNING = 'host fault:';

export type HostFaultOutcome =
  /** Queued again without using an attempt; its instance drained when `broken`. */
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
  const fault = control.hostFault?.(task);
  if (instanceId === undefined || fault === undefined) return undefined;
  const requeues = hostFaultRuns(ctx.store, job.id);
  const why = control.failureReason?.(task) ?? 'its start failed';
  const drainReason = `host fault: task ${task.id} could not start there: ${why}`;
  if (requeues >= MAX_HOST_FAULT_REQUEUES) {
    // Past the job's bound the failure counts as its own, but a broken host is still broken for every other job.
    if (fault === 'broken') drain(ctx, instanceId, drainReason);
    return {
      kind: 'counted',
      note:
        `its instance ${instanceId}'s host was at fault, and the job was already placed again ` +
        `${requeues} time${requeues === 1 ? '' : 's'} for host faults (at most ${MAX_HOST_FAULT_REQUEUES})`,
    };
  }
  const reason = `task ${task.id} could not start on ${instanceId} because of the instance's host, not the job: ${why}`;
  releaseTasks(reason);
  // A new run of the job (its attempt number moves on, so neither its worker nor the controller takes the failed
  // run's report for the new one's, on the same instance too), which its retryStrategy does not count.
  const queued = ctx.store.retryJob(
    job.id,
    { taskId: task.id, reason: `host fault on ${instanceId}: ${why}` },
    reason,
  );
  const count = `host fault ${requeues + 1} of at most ${MAX_HOST_FAULT_REQUEUES}`;
  const drains = fault === 'broken';
  const instanceFate = drains ? `${instanceId} drained` : `${instanceId} kept (short of space for this job)`;
  ctx.store.appendEvent({
    kind: HOST_FAULT_EVENT,
    jobId: job.id,
    taskId: task.id,
    instanceId,
    message:
      `${reason}; queued again without using an attempt (run ${queued.attempts}, ${count}), ` + instanceFate,
    data: {
      requeue: requeues + 1,
      max: MAX_HOST_FAULT_REQUEUES,
      attempt: queued.attempts,
      fault,
      reason: why,
    },
  });
  addJobWarning(
    ctx.store,
    job.id,
    HOST_FAULT_WARNING,
    `task ${task.id} could not start on ${instanceId} (${why}); queued again without using an attempt (${count}), ` +
      instanceFate,
  );
  if (drains) drain(ctx, instanceId, drainReason);
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
