import type { Clock } from './clock.js';
import { expectedDurationOf, type JobSpec } from './job-spec/spec.js';
import { JOB_HISTORY_EVENT_KINDS, jobTransitions, runningSecondsOf, worksNow } from './job-transitions.js';
import type { ControllerLogger } from './seams.js';
import type { JobRecord, JobState, StateStore } from './state-store.js';

/**
 * A job's `maxRunSeconds`: one that has run longer than it asked is stopped without a checkpoint and ends `failed`,
 * not retried, as AWS Batch ends a timed-out attempt. Run time is the time its tasks work (`runningSecondsOf`): in
 * `running`, and in `migrating` while a move that makes before it breaks leaves them working until its new
 * instances are ready, summed over the job's moves and attempts: a retried attempt resumes from its checkpoint, so it
 * goes on with the same work, and the limit is what a runaway job may cost the shared budget. Time queued, starting
 * or moving (checkpoint, restore) is the controller's doing and does not count, nor is the time between the end of a
 * run and its return to the queue being written (a controller stopped cleanly, an instance ended unseen, a worker
 * gone silent: `job.ran-until` events say when).
 */

/**
 * The states a job that has run can be in while it is still live (queued again after a preemption is not checked).
 * A job starting or checkpointing and restoring adds no run time, but one whose run time already reached its limit
 * (its last run's end known only when its return to the queue was written, or come due between two passes) is
 * failed there rather than started again for nothing. A job `migrating` whose tasks work on until its new instances
 * are ready adds run time as if running: past its limit, it ends there, and its move with it (its pending starts
 * fail, its waiting stop goes without a checkpoint, and the next round lets the new instances go).
 */
const CHECKED_STATES: readonly JobState[] = ['starting', 'running', 'migrating'];

/** The states in which a job's run time may grow with the clock: `migrating` only while its tasks work on. */
const WORKING_STATES: readonly JobState[] = ['running', 'migrating'];

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
   * `pollSeconds` later); Infinity when no job has a limit. A working job's run time grows with the clock (running,
   * or migrating while its tasks work on until its new instances are ready), so it reaches its limit at now + what is
   * left; one that is starting, or checkpointing and restoring, does not work meanwhile, and the pass after it works
   * again sets its time.
   */
  nextDueSeconds(): number {
    const now = this.deps.clock.nowSeconds();
    let next = Number.POSITIVE_INFINITY;
    for (const job of this.deps.store.listJobs({ states: WORKING_STATES })) {
      const left = this.runLeft(job, now);
      if (left !== undefined && (job.state === 'running' || left.working))
        next = Math.min(next, now + Math.max(0, left.seconds));
    }
    return next;
  }

  /** Seconds of run left before the limit (≤ 0: reached); undefined without a limit or before the job first ran. */
  private secondsLeft(job: JobRecord, now: number): number | undefined {
    return this.runLeft(job, now)?.seconds;
  }

  /**
   * Seconds of run left before the job's limit, and whether its run time still grows with the clock. A job cannot
   * have run longer than the time since it first ran, so until that reaches the limit what is left is taken from it
   * (no more than the truth, and taken as growing: the loop wakes no later than the limit comes due) and its events
   * are not read: most jobs need no read.
   */
  private runLeft(job: JobRecord, now: number): { seconds: number; working: boolean } | undefined {
    const limit = job.spec.maxRunSeconds;
    if (limit === undefined || job.startedAtSeconds === undefined) return undefined;
    const sinceFirstRun = now - job.startedAtSeconds;
    if (sinceFirstRun < limit) return { seconds: limit - sinceFirstRun, working: true };
    const transitions = jobTransitions(
      this.deps.store.listEvents({ jobId: job.id, kinds: JOB_HISTORY_EVENT_KINDS }),
    );
    return { seconds: limit - runningSecondsOf(transitions, now), working: worksNow(transitions) };
  }
}
