import type { SimJob } from './entities.js';
import { DEFAULT_TRACE_TEAM, type TraceJob } from './trace.js';

/**
 * Job dependencies in the simulator, as the controller keeps them (src/controller/job-dependencies.ts): a job whose
 * `dependsOn` names a job that has not finished arrives held, out of every round, and joins the queue when the last
 * of them finishes. Both runtimes hold a job alike, so a trace of pipelines replays the same in either, and the
 * controller's completion-time predictions run its held jobs forward with this rule.
 */

/** Why a trace job may not wait for a job it names (dependencyFault). */
export type DependencyFault =
  | { readonly kind: 'itself' }
  /** Not a job before it in the trace: a dependency is submitted before its dependents, so there is no cycle. */
  | { readonly kind: 'not-earlier' }
  | { readonly kind: 'arrives-later'; readonly atSeconds: number }
  /** The controller lets a job wait only for its own team's. */
  | { readonly kind: 'other-team'; readonly team: string }
  /** The controller ends a job whose dependency failed without running it, which a run cannot replay. */
  | { readonly kind: 'fails' };

type DependencyView = Pick<TraceJob, 'id' | 'arrivalSeconds' | 'team' | 'successful'>;

/**
 * What is wrong with `job` waiting for the job `id` (`dependency`: the job of that id listed before it, if any); the
 * one rule set of traces, which the engine checks before a run and the fleetwise JSON format when it is read.
 */
export function dependencyFault(
  job: DependencyView,
  id: string,
  dependency: DependencyView | undefined,
): DependencyFault | undefined {
  if (id === job.id) return { kind: 'itself' };
  if (dependency === undefined) return { kind: 'not-earlier' };
  if (dependency.arrivalSeconds > job.arrivalSeconds)
    return { kind: 'arrives-later', atSeconds: dependency.arrivalSeconds };
  const team = dependency.team ?? DEFAULT_TRACE_TEAM;
  if (team !== (job.team ?? DEFAULT_TRACE_TEAM)) return { kind: 'other-team', team };
  if (dependency.successful === false) return { kind: 'fails' };
  return undefined;
}

/**
 * What is wrong with a trace's dependencies (empty: nothing), a line per fault (dependencyFault). In a world taken
 * mid-run (`mayHaveEnded`) a dependency that is not in it has ended, so it is met.
 */
export function dependencyProblems(jobs: readonly TraceJob[], mayHaveEnded = false): string[] {
  const problems: string[] = [];
  const earlier = new Map<string, TraceJob>();
  const all = mayHaveEnded ? new Set(jobs.map((j) => j.id)) : undefined;
  for (const job of jobs) {
    for (const id of job.dependsOn ?? []) {
      const fault = dependencyFault(job, id, earlier.get(id));
      if (fault === undefined || (fault.kind === 'not-earlier' && all?.has(id) === false)) continue;
      problems.push(`job ${job.id}: dependsOn ${faultText(id, fault)}`);
    }
    earlier.set(job.id, job);
  }
  return problems;
}

function faultText(id: string, fault: DependencyFault): string {
  switch (fault.kind) {
    case 'itself':
      return 'names the job itself';
    case 'not-earlier':
      return `${id} is not a job earlier in the trace`;
    case 'arrives-later':
      return `${id}, which arrives after it (at ${fault.atSeconds} s)`;
    case 'other-team':
      return `${id}, a job of team ${fault.team} (a job waits only for its own team's)`;
    case 'fails':
      return `${id}, which fails in the trace, so this job could never start`;
  }
}

/**
 * The run's held jobs by the dependencies they wait for, each with how many of them have not finished: a finish
 * releases the jobs it was the last for without reading any other held job's list, so an array of 1,000 that waits for
 * all of another costs a count per finish, not a read of 1,000 lists of 1,000. Ids that are not jobs of the run
 * (finished before) are met.
 */
export class HeldJobs {
  /** Per held job, how many of the jobs it waits for have not finished. */
  private readonly unmet = new Map<SimJob, number>();
  /** Per job of the run, the held jobs waiting for it, in the order they were held. */
  private readonly dependents = new Map<string, SimJob[]>();

  constructor(private readonly jobsById: ReadonlyMap<string, SimJob>) {}

  /** Hold `job` until the jobs it waits for have finished; false (not held) when none is left to finish. */
  hold(job: SimJob): boolean {
    const waitsFor = new Set<string>();
    for (const id of job.spec.dependsOn ?? []) {
      const dependency = this.jobsById.get(id);
      if (dependency !== undefined && dependency.status !== 'finished') waitsFor.add(id);
    }
    if (waitsFor.size === 0) return false;
    this.unmet.set(job, waitsFor.size);
    for (const id of waitsFor) {
      const waiting = this.dependents.get(id);
      if (waiting === undefined) this.dependents.set(id, [job]);
      else waiting.push(job);
    }
    return true;
  }

  /** The held jobs for which the job `id`, which has just finished, was the last left to finish, in the order held. */
  finished(id: string): SimJob[] {
    const waiting = this.dependents.get(id);
    if (waiting === undefined) return [];
    this.dependents.delete(id);
    const released: SimJob[] = [];
    for (const job of waiting) {
      const left = (this.unmet.get(job) ?? 1) - 1;
      if (left > 0) this.unmet.set(job, left);
      else {
        this.unmet.delete(job);
        released.push(job);
      }
    }
    return released;
  }
}

/**
 * Seconds from joining the queue to the first placement, per job placed: the wait a scheduler is answerable for. A
 * job joins the queue at its arrival, or, held for its dependencies, when the last of them finished.
 */
export function waitsToPlace(jobs: readonly SimJob[]): number[] {
  const byId = new Map(jobs.map((j) => [j.spec.id, j]));
  return jobs.flatMap((j) => {
    if (j.firstPlacedSeconds === undefined) return [];
    const queuedSince = (j.spec.dependsOn ?? []).reduce(
      (t, id) => Math.max(t, byId.get(id)?.endSeconds ?? t),
      j.spec.arrivalSeconds,
    );
    return [j.firstPlacedSeconds - queuedSince];
  });
}
