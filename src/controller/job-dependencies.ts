import type { JobSpec } from './job-spec/spec.js';
import type { ControllerLogger } from './seams.js';
import { isFinalJobState } from './state/lifecycle.js';
import type { JobRecord, JobState, StateStore } from './state-store.js';

/**
 * A job's `dependsOn` (AWS Batch's job dependencies): it stays queued, out of every round, until each job it names
 * has succeeded; when one of them ends any other way (failed, cancelled, unsuccessful) it can never run, and ends
 * failed saying which. A job names only earlier jobs of its own team, so dependencies never form a cycle.
 */

/** A dependency as the job view shows it. */
export interface DependencyView {
  readonly id: string;
  /** Its state, or null when the store no longer has it (cannot happen: jobs are kept). */
  readonly state: JobState | null;
  /** While it has not succeeded: its latest predicted completion (epoch seconds), when it has one. */
  readonly predictedCompletionSeconds?: number;
}

/** A job's latest predicted completion (epoch seconds), undefined without one (queue-records.ts). */
export type PredictedCompletion = (jobId: string) => number | undefined;

/** Why a submission's `dependsOn` cannot be taken (empty: it can), one line per dependency at fault. */
export function dependencyProblems(spec: JobSpec, team: string, store: StateStore): string[] {
  const problems: string[] = [];
  for (const id of spec.dependsOn ?? []) {
    const dependency = store.getJob(id);
    // Another team's job is not named as such: a team sees only its own jobs.
    if (dependency === undefined || dependency.team !== team)
      problems.push(`dependsOn: no job ${id} of team ${team}`);
    else if (isFinalJobState(dependency.state) && dependency.state !== 'succeeded')
      problems.push(`dependsOn: ${id} ended ${dependency.state}, so this job could never start`);
  }
  return problems;
}

/** The job's dependencies, each with its state and, until it has succeeded, its predicted completion. */
export function dependencyViews(
  job: JobRecord,
  store: StateStore,
  predictedCompletion: PredictedCompletion,
): DependencyView[] {
  return (job.spec.dependsOn ?? []).map((id) => {
    const state = store.getJob(id)?.state ?? null;
    // One that ended has no completion to predict: its last ETA (kept in the store) is stale.
    const completion = state === null || isFinalJobState(state) ? undefined : predictedCompletion(id);
    return completion === undefined ? { id, state } : { id, state, predictedCompletionSeconds: completion };
  });
}

/**
 * The earliest a job held for `dependsOn` can start, from their predictions: the latest predicted completion among
 * those that have not succeeded. A dependency without a predicted completion (none yet, or past the horizon) that is
 * itself held counts by the earliest it can start (it ends later still, so the bound holds). Undefined when the job
 * waits for none, or when one of them has neither (an unknown duration). The job's own prediction holds it the same
 * way (eta-world.ts); this bound is what its dependencies' predictions say alone. Dependencies name earlier jobs
 * only, so the recursion ends.
 */
export function earliestStartSeconds(
  dependsOn: readonly string[] | undefined,
  store: StateStore,
  predictedCompletion: PredictedCompletion,
  memo: Map<string, number | undefined> = new Map(),
): number | undefined {
  const unmet = unmetOf(dependsOn, store);
  if (unmet.length === 0) return undefined;
  let latest = Number.NEGATIVE_INFINITY;
  for (const id of unmet) {
    // Ended without success: the job can never start (the next round fails it), whatever its last ETA said.
    const state = store.getJob(id)?.state;
    if (state === undefined || isFinalJobState(state)) return undefined;
    let bound = predictedCompletion(id);
    if (bound === undefined) {
      if (!memo.has(id)) {
        const dependency = store.getJob(id);
        memo.set(
          id,
          dependency?.state === 'queued'
            ? earliestStartSeconds(dependency.spec.dependsOn, store, predictedCompletion, memo)
            : undefined,
        );
      }
      bound = memo.get(id);
    }
    if (bound === undefined) return undefined;
    latest = Math.max(latest, bound);
  }
  return latest;
}

/** The job's dependencies that have not succeeded yet. */
export function unmetDependencies(job: JobRecord, store: StateStore): string[] {
  return unmetOf(job.spec.dependsOn, store);
}

/** Those of `dependsOn` that have not succeeded yet (a spec's, for a dry run). */
export function unmetOf(dependsOn: readonly string[] | undefined, store: StateStore): string[] {
  return (dependsOn ?? []).filter((id) => store.getJob(id)?.state !== 'succeeded');
}

/** True while a dependency of the job has not succeeded yet (it is kept out of rounds and predictions). */
export function waitsForDependencies(job: JobRecord, store: StateStore): boolean {
  return unmetDependencies(job, store).length > 0;
}

export interface JobDependenciesDeps {
  readonly store: StateStore;
  readonly log: ControllerLogger;
  /** End the job as failed for `reason` (job-control.ts). */
  readonly fail: (jobId: string, reason: string) => JobRecord;
}

export class JobDependencies {
  constructor(private readonly deps: JobDependenciesDeps) {}

  /**
   * End as failed every queued job one of whose dependencies ended without success, or is not in the state at all (a
   * submission checks that each exists, so only a state restored without it lacks one); returns them. In submission
   * order, so a chain fails whole in one call: each job's dependencies come before it.
   */
  failUnreachable(): JobRecord[] {
    const { store } = this.deps;
    const ended: JobRecord[] = [];
    for (const job of store.listJobs({ states: ['queued'] })) {
      if (job.spec.dependsOn === undefined) continue;
      let reason: string | undefined;
      let dependency: string | undefined;
      for (const id of job.spec.dependsOn) {
        const d = store.getJob(id);
        if (d === undefined) reason = `dependency ${id} is not in the state: this job can never start`;
        else if (isFinalJobState(d.state) && d.state !== 'succeeded')
          reason = `dependency ${id} ended ${d.state}: this job can never start`;
        if (reason !== undefined) {
          dependency = id;
          break;
        }
      }
      if (reason === undefined) continue;
      this.deps.log.warn(`${job.id} ${reason}`, { jobId: job.id, dependency });
      ended.push(this.deps.fail(job.id, reason));
    }
    return ended;
  }
}
