import type { SimJob } from './entities.js';
import { DEFAULT_TRACE_TEAM, type TraceJob } from './trace.js';

/**
 * Job dependencies in the simulator, as the controller keeps them (src/controller/job-dependencies.ts): a job whose
 * `dependsOn` names a job that has not finished arrives held, out of every round, and joins the queue when the last
 * of them finishes. Both runtimes hold a job alike, so a trace of pipelines replays the same in either, and the
 * controller's completion-time predictions run its held jobs forward with this rule.
 */

/**
 * What is wrong with a trace's dependencies (empty: nothing), a line per fault: each must name a job earlier in the
 * trace (a dependency exists when its dependent is submitted, so the graph has no cycle), of the same team (as the
 * controller requires), and one that succeeds (the
 * controller ends a job whose dependency failed without running it, which a trace cannot replay as a run). In a world
 * taken mid-run (`mayHaveEnded`) a dependency that is not in it has ended, so it is met.
 */
export function dependencyProblems(jobs: readonly TraceJob[], mayHaveEnded = false): string[] {
  const problems: string[] = [];
  const earlier = new Map<string, TraceJob>();
  for (const job of jobs) {
    for (const id of job.dependsOn ?? []) {
      const dependency = earlier.get(id);
      if (id === job.id) problems.push(`job ${job.id}: dependsOn names the job itself`);
      else if (dependency === undefined) {
        if (!mayHaveEnded || jobs.some((j) => j.id === id))
          problems.push(`job ${job.id}: dependsOn ${id} is not a job earlier in the trace`);
      } else if ((dependency.team ?? DEFAULT_TRACE_TEAM) !== (job.team ?? DEFAULT_TRACE_TEAM))
        problems.push(
          `job ${job.id}: dependsOn ${id}, a job of team ${dependency.team ?? DEFAULT_TRACE_TEAM} (a job waits only for its own team's)`,
        );
      else if (dependency.successful === false)
        problems.push(
          `job ${job.id}: dependsOn ${id}, which fails in the trace, so this job could never start`,
        );
    }
    earlier.set(job.id, job);
  }
  return problems;
}

/** Whether a dependency of `job` has not finished yet; ids that are not jobs of the run (finished before) are met. */
export function waitsForDependencies(job: SimJob, jobsById: ReadonlyMap<string, SimJob>): boolean {
  return (job.spec.dependsOn ?? []).some((id) => {
    const dependency = jobsById.get(id);
    return dependency !== undefined && dependency.status !== 'finished';
  });
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
