import type { Clock } from './clock.js';
import { expectedDurationOf, type JobSpec } from './job-spec/spec.js';
import { JOB_HISTORY_EVENT_KINDS, jobTransitions, runningSecondsOf } from './job-transitions.js';
import type { ControllerLogger } from './seams.js';
import type { JobRecord, JobState, StateStore } from './state-store.js';

/**
 * A job's `maxRunSeconds`: one that has run longer than it asked is stopped without a checkpoint and ends `failed`,
 * not retried, as AWS Batch ends a timed-out attempt. Run time is time in `running`, summed over the job's moves and
 * attempts: a retried attempt resumes from its checkpoint, so it goes on with the same work, and the limit is what a
 * runaway job may cost the shared budget. Time queued, starting or moving (checkpoint, restore) is the controller's
 * doing and does not count, nor is the time between the end of a run and its return to the queue being written (a
 * controller stopped cleanly, an instance ended unseen, a worker gone silent: `job.ran-until` events say when).
 */

/**
 * The states a job that has run can be in while it is still live (queued again after a preemption is not checked).
 * A job starting or moving adds no run time, but one whose run time already reached its limit (its last run's end
 * known only when its return to the queue was written, or come due between two passes) is failed there rather than
 * started again for nothing.
 */
const CHECKED_STATES: readonly JobState[] = ['starting', 'running', 'migrating'];

/**
 * What a submission is told about its limit: one shorter than the run the job expects (at full throughput; sharing an
 * instance slows it) will stop it before it is expected to finish. Accepted all the same: the estimate may be rough.
 */
export function runLimitWarnings(spec: JobSpec): string[] {
  const limit = spec.maxRunSeconds;
  const expected = expectedDurationOf(spec);
  if (limit === undefined || expected === undefined || expected <= limit) return [];
  return [
    `maxRunSeconds (${limit} s) is shorter than expectedDurationSeconds (${expected} s): the job will be stopped ` +
      'before it is expected to finish',
  ];
}

export interface RunLimitsDeps {
  readonly store: StateStore;
  readonly clock: Clock;
  readonly log: ControllerLogger;
  /** End the job as failed for `reason`, stopping its tasks (job-control.ts). */
  readonly fail: (jobId: string, reason: string) => JobRecord;
}

export class RunLimits {
  constructor(private readonly deps: RunLimitsDeps) {}

  /**
   * End every live job that has run past its `maxRunSeconds`; returns them. Called at every pass of the loop, which
   * wakes for the next limit due (`nextDueSeconds`).
   */
  enforce(): JobRecord[] {
    const now = this.deps.clock.nowSeconds();
    const ended: JobRecord[] = [];
    for (const job of this.deps.store.listJobs({ states: CHECKED_STATES })) {
      const limit = job.spec.maxRunSeconds;
      const left = this.secondsLeft(job, now);
      if (limit === undefined || left === undefined || left > 0) continue;
      const ran = limit - left;
      const reason =
        `ran ${Math.round(ran)} s, past its maxRunSeconds (${limit} s): stopped without a checkpoint, ` +
        'not retried';
      this.deps.log.warn(`${job.id} ${reason}`, { jobId: job.id, ranSeconds: ran, maxRunSeconds: limit });
      ended.push(this.deps.fail(job.id, reason));
    }
    return ended;
  }

  /**
   * The earliest time a live job may reach its limit, for the loop to wake then rather than at its next pass (up to
   * `pollSeconds` later); Infinity when no job has a limit. A running job's run time grows with the clock, so it
   * reaches its limit at now + what is left; one that is starting or moving does not run meanwhile, and the pass
   * after it runs again sets its time.
   */
  nextDueSeconds(): number {
    const now = this.deps.clock.nowSeconds();
    let next = Number.POSITIVE_INFINITY;
    for (const job of this.deps.store.listJobs({ states: ['running'] })) {
      const left = this.secondsLeft(job, now);
      if (left !== undefined) next = Math.min(next, now + Math.max(0, left));
    }
    return next;
  }

  /**
   * Seconds of running left before the job's limit (≤ 0: reached); undefined without a limit or before it first ran.
   * A job cannot have run longer than the time since it first ran, so until that reaches the limit what is left is
   * taken from it (no more than the truth) and its events are not read: most jobs need no read.
   */
  private secondsLeft(job: JobRecord, now: number): number | undefined {
    const limit = job.spec.maxRunSeconds;
    if (limit === undefined || job.startedAtSeconds === undefined) return undefined;
    const sinceFirstRun = now - job.startedAtSeconds;
    if (sinceFirstRun < limit) return limit - sinceFirstRun;
    const transitions = jobTransitions(
      this.deps.store.listEvents({ jobId: job.id, kinds: JOB_HISTORY_EVENT_KINDS }),
    );
    return limit - runningSecondsOf(transitions, now);
  }
}
