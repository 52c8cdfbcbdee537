import { ValidationError } from '../core/validation.js';
import { recordJobWarnings, submissionWarnings, type ExecutorKind } from './execution-check.js';
import { arraySubmissionSize, type JobSpec } from './job-spec/spec.js';
import { arrayJobSpec, pairedArrays } from './array-jobs.js';
import { dependencyProblems } from './job-dependencies.js';
import type { SubmissionCommitHook } from './service.js';
import { endJobWithTasks } from './job-end.js';
import { isFinalJobState } from './state/lifecycle.js';
import {
  StateStoreError,
  UnknownRecordError,
  type InstanceRecord,
  type IntentRecord,
  type JobRecord,
  type StateStore,
} from './state-store.js';

export interface JobControlDeps {
  readonly store: StateStore;
  readonly requestRound: (reason: string) => void;
  /** A job ended here (cancelled, unsuccessful): forget it in the queue, note its report and prediction error. */
  readonly jobEnded: (job: JobRecord) => void;
  /** Ask for a completion-time prediction (it runs later, off this path: predictions.ts). */
  readonly predictAfterSubmission: () => void;
  /** How the workers run tasks, when the controller knows (execution-check.ts); unknown checks nothing. */
  readonly executor?: ExecutorKind | undefined;
}

/**
 * What the API asks of jobs and instances: submit, cancel, end as unsuccessful, drain (and the loop: the end of a job
 * past its run limit). Each writes the store synchronously and asks the loop for an early round; the loop carries the
 * changes out.
 */
interface WaitingSubmission {
  readonly spec: JobSpec;
  readonly team: string;
  readonly inCommit: SubmissionCommitHook | undefined;
  readonly resolve: (job: JobRecord) => void;
  readonly reject: (error: Error) => void;
}

export class JobControl {
  /** Submissions waiting for the batch they will be committed in (submitBatched). */
  private batch: WaitingSubmission[] = [];

  constructor(private readonly deps: JobControlDeps) {}

  submit(spec: JobSpec, team: string, inCommit?: SubmissionCommitHook): JobRecord {
    const job = this.deps.store.transaction(() => {
      const recorded = this.record(spec, team);
      inCommit?.([recorded]);
      return recorded;
    });
    this.submitted([job]);
    return job;
  }

  /**
   * An array job: the spec as `arrayProperties.size` jobs, each with its index and the ids its array dependencies
   * give it (array-jobs.ts), stored in one transaction (an array is submitted whole or not at all; its ids follow one
   * another in index order).
   */
  submitArray(spec: JobSpec, team: string, inCommit?: SubmissionCommitHook): JobRecord[] {
    const size = arraySubmissionSize(spec);
    if (size === undefined)
      throw new Error(`${spec.name}: not an array (arrayProperties.size without an index)`);
    const jobs = this.deps.store.transaction(() => {
      const paired = pairedArrays(spec, team, this.deps.store);
      // What every job of the array waits for is checked once, not once per job.
      const problems = [...paired.problems, ...dependencyProblems(spec, team, this.deps.store)];
      if (problems.length > 0) throw new ValidationError('job spec', problems);
      const checked = new Set(spec.dependsOn ?? []);
      const recorded: JobRecord[] = [];
      for (let index = 0; index < size; index++)
        recorded.push(this.record(arrayJobSpec(spec, index, paired.arrays, recorded.at(-1)), team, checked));
      inCommit?.(recorded);
      return recorded;
    });
    this.submitted(jobs);
    return jobs;
  }

  /**
   * A submission committed together with the others made in the same turn of the event loop: one transaction for
   * the batch, so one sync of the store's log (SQLite's fsync of its WAL) instead of one per job. This is group
   * commit, as databases do for concurrent commits: each submitter is answered once its batch is durable, and a
   * submission the store refuses fails alone (its own nested transaction rolls back).
   */
  submitBatched(spec: JobSpec, team: string, inCommit?: SubmissionCommitHook): Promise<JobRecord> {
    return new Promise((resolve, reject) => {
      this.batch.push({ spec, team, inCommit, resolve, reject });
      if (this.batch.length === 1) setImmediate(() => this.commitBatch());
    });
  }

  private commitBatch(): void {
    const batch = this.batch;
    this.batch = [];
    const outcomes: (JobRecord | Error)[] = [];
    try {
      this.deps.store.transaction(() => {
        for (const s of batch)
          try {
            outcomes.push(
              this.deps.store.transaction(() => {
                const job = this.record(s.spec, s.team);
                s.inCommit?.([job]);
                return job;
              }),
            );
          } catch (e) {
            outcomes.push(e instanceof Error ? e : new Error(String(e)));
          }
      });
    } catch (e) {
      for (const s of batch) s.reject(e instanceof Error ? e : new Error(String(e)));
      return;
    }
    const jobs = outcomes.filter((o): o is JobRecord => !(o instanceof Error));
    if (jobs.length > 0) this.submitted(jobs);
    batch.forEach((s, i) => {
      const outcome = outcomes[i] as JobRecord | Error;
      if (outcome instanceof Error) s.reject(outcome);
      else s.resolve(outcome);
    });
  }

  /** Store one job with its warnings (inside the caller's transaction); `checked`: dependencies already checked. */
  private record(spec: JobSpec, team: string, checked?: ReadonlySet<string>): JobRecord {
    // Only an array's jobs are stored (each with its index), never the array itself.
    if (arraySubmissionSize(spec) !== undefined)
      throw new Error(
        `${spec.name}: an array (arrayProperties.size without an index) is submitted with submitArray`,
      );
    // Inside the submission's transaction: a dependency cannot end between this check and the job's record.
    const toCheck =
      checked === undefined ? spec : { ...spec, dependsOn: spec.dependsOn?.filter((id) => !checked.has(id)) };
    const unmet = dependencyProblems(toCheck, team, this.deps.store);
    if (unmet.length > 0) throw new ValidationError('job spec', unmet);
    const warnings = submissionWarnings(spec, this.deps.executor);
    const job = this.deps.store.submitJob(spec.team === team ? spec : { ...spec, team });
    recordJobWarnings(this.deps.store, job.id, warnings);
    return job;
  }

  /** After jobs were committed: an early round, and a prediction (both run later, off this path). */
  private submitted(jobs: readonly JobRecord[]): void {
    const last = jobs[jobs.length - 1] as JobRecord;
    this.deps.requestRound(jobs.length === 1 ? `${last.id} submitted` : `${jobs.length} jobs submitted`);
    this.deps.predictAfterSubmission();
  }

  cancel(jobId: string, reason = 'cancelled by request'): JobRecord {
    return this.endJob(jobId, 'cancelled', reason, true);
  }

  /**
   * End a job as failed for `reason` (it ran past its maxRunSeconds, or a job it depends on can no longer succeed):
   * its tasks stop without a checkpoint.
   */
  fail(jobId: string, reason: string): JobRecord {
    return this.endJob(jobId, 'failed', reason, true);
  }

  /**
   * End a job as unsuccessful at a stage (success-ranked ordering): like a cancel, its tasks stop without a
   * checkpoint and its capacity is freed, but the job is not counted as failed or cancelled. A job that already ended
   * otherwise cannot become unsuccessful (IllegalTransitionError, 409 in the API).
   *
   * A stage must be one the job reached: none before it ran, and, once it reports progress against its iterations,
   * none past the stage that progress is in (stage k begins once the first k − 1 stages' share of the run is done).
   * Without reported progress the stage is taken as given (its view says so): how far a job that reports none got is
   * not known. Marking an unsuccessful job again is idempotent with no stage and reason, or the same ones; other ones
   * are refused (409) rather than dropped without a word: the job keeps the stage and reason it ended with.
   */
  markUnsuccessful(
    jobId: string,
    options: { readonly stage?: number; readonly reason?: string } = {},
  ): JobRecord {
    const job = this.deps.store.getJob(jobId);
    if (job === undefined) throw new UnknownRecordError('job', jobId);
    const why = unsuccessfulReason(job, options);
    if (job.state === 'unsuccessful') {
      // Asked to be unsuccessful, as it is; or asked with the very stage and reason it was marked with.
      const bare = options.stage === undefined && options.reason === undefined;
      if (bare || why === job.reason) return job;
      throw new MarkedUnsuccessfulError(
        `${jobId} is already unsuccessful (${job.reason ?? 'no reason given'}): it keeps its first stage and ` +
          'reason; mark it again only with the same ones',
      );
    }
    if (typeof why !== 'string') throw new ValidationError('request', [why.problem]);
    return this.endJob(jobId, 'unsuccessful', why, false);
  }

  /**
   * Cancel jobs in one transaction: a whole array is one commit, not one per job (10,000 of them would hold the loop
   * for as many disk syncs). Jobs already ended are returned as they are; an unknown one cancels none.
   */
  cancelMany(jobIds: readonly string[], reason: string): JobRecord[] {
    const ended: JobRecord[] = [];
    const jobs = this.deps.store.transaction(() => {
      // Intents name one job's tasks each, so one read serves every job.
      const pending = this.deps.store.listIntents({ states: ['pending'] });
      return jobIds.map((id) => {
        const outcome = this.endInTransaction(id, 'cancelled', reason, true, pending);
        if (outcome.changed) ended.push(outcome.job);
        return outcome.job;
      });
    });
    for (const job of ended) this.deps.jobEnded(job);
    return jobs;
  }

  /** End a job in `state` with its tasks (job-end.ts); a job already ended is returned as it is. */
  private endJob(
    jobId: string,
    state: 'cancelled' | 'unsuccessful' | 'failed',
    reason: string,
    idempotent: boolean,
  ): JobRecord {
    const outcome = this.deps.store.transaction(() =>
      this.endInTransaction(
        jobId,
        state,
        reason,
        idempotent,
        this.deps.store.listIntents({ states: ['pending'] }),
      ),
    );
    if (outcome.changed) this.deps.jobEnded(outcome.job);
    return outcome.job;
  }

  /** endJob's writes, inside the caller's transaction; `pending`: the pending intents as it began. */
  private endInTransaction(
    jobId: string,
    state: 'cancelled' | 'unsuccessful' | 'failed',
    reason: string,
    idempotent: boolean,
    pending: readonly IntentRecord[],
  ): { readonly job: JobRecord; readonly changed: boolean } {
    const current = this.deps.store.getJob(jobId);
    if (current === undefined) throw new UnknownRecordError('job', jobId);
    if (isFinalJobState(current.state) && (idempotent || current.state === state))
      return { job: current, changed: false };
    const ended = endJobWithTasks(this.deps.store, jobId, state, reason, { pending });
    return { job: ended, changed: true };
  }

  drain(instanceId: string): InstanceRecord {
    const inst = this.deps.store.getInstance(instanceId) ?? this.deps.store.findInstanceByCloudId(instanceId);
    if (inst === undefined) throw new UnknownRecordError('instance', instanceId);
    if (inst.state !== 'requested' && inst.state !== 'launching' && inst.state !== 'running') return inst;
    // An instance not launched yet (its launch failing, in backoff) holds no task to move: it ends, as a plan that
    // drops it ends it, and the terminate pass fails its launch or terminates what a launch in flight brings.
    const drained = this.deps.store.setInstanceState(
      inst.id,
      inst.state === 'requested' ? 'terminating' : 'draining',
      { reason: 'drained by request' },
    );
    this.deps.requestRound(`${inst.id} drained`);
    return drained;
  }
}

/** A job marked unsuccessful again with another stage or reason (409 in the API, as a conflict with its state). */
export class MarkedUnsuccessfulError extends StateStoreError {
  override name = 'MarkedUnsuccessfulError';
}

/**
 * Why a job marked unsuccessful ended, as its record keeps it, or the problem with the stage asked for: one the job
 * does not declare, or has not reached.
 */
function unsuccessfulReason(
  job: JobRecord,
  options: { readonly stage?: number | undefined; readonly reason?: string | undefined },
): string | { readonly problem: string } {
  const stage = options.stage;
  const how = options.reason === undefined ? ' by request' : `: ${options.reason}`;
  if (stage === undefined) return `stopped as unsuccessful${how}`;
  const success = job.spec.success;
  // A stage names one the job declares: the job's view shows it as where the job stopped.
  if (success?.kind !== 'stages') return { problem: `stage: ${job.id} declares no success stages` };
  const stages = success.stageSeconds;
  if (stage > stages.length)
    return { problem: `stage: the job declares ${stages.length} stage(s), got ${stage}` };
  if (job.startedAtSeconds === undefined)
    return { problem: `stage: ${job.id} has not run yet, so it reached no stage (mark it without one)` };
  const progress = progressOf(job);
  // Stage 1 begins with the run; a later one needs reported progress to tell, and without it is taken as given.
  if (stage === 1 || progress === undefined)
    return `stopped as unsuccessful at stage ${stage}${stage === 1 ? '' : ' (as given: no progress reported)'}${how}`;
  const reached = stageReached(stages, progress);
  if (stage > reached)
    return {
      problem:
        `stage: ${job.id} reported ${percent(progress)} of its iterations, which is in stage ${reached} of ` +
        `${stages.length} (stage ${reached + 1} begins at ${percent(shareBefore(stages, reached))}), got ${stage}`,
    };
  return `stopped as unsuccessful at stage ${stage}${how}`;
}

/** The share of its iterations a job reported done, or undefined when it reported none (or declares no total). */
function progressOf(job: JobRecord): number | undefined {
  const total = job.totalIterations ?? job.spec.totalIterations;
  if (total === undefined || total <= 0 || job.completedIterations <= 0) return undefined;
  return Math.min(1, job.completedIterations / total);
}

/** The share of the run the first `k` stages take. */
function shareBefore(stages: readonly number[], k: number): number {
  const all = stages.reduce((a, b) => a + b, 0);
  return stages.slice(0, k).reduce((a, b) => a + b, 0) / all;
}

/** The stage (1-based) a job at `progress` is in: stage k once the first k − 1 stages' share is done. */
function stageReached(stages: readonly number[], progress: number): number {
  let k = 1;
  // A hair of tolerance: progress and shares are ratios in floating point, and a stage begins exactly at its share.
  while (k < stages.length && shareBefore(stages, k) <= progress + 1e-9) k += 1;
  return k;
}

function percent(share: number): string {
  return `${Number((share * 100).toFixed(1))}%`;
}
