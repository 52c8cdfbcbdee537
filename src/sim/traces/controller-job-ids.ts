import { ValidationError } from '../../core/validation.js';
import type { Trace, TraceJob } from '../../world/trace.js';

/** How a run names the trace's jobs: as the trace does, or as the controller's state store would. */
export const TRACE_JOB_IDS = ['trace', 'controller'] as const;
export type TraceJobIds = (typeof TRACE_JOB_IDS)[number];

/**
 * The trace with its jobs named as the controller names what it is sent: `job-1`, `job-2`, … in submission (arrival)
 * order, dependencies renamed with them. Eva breaks ties by comparing task and instance ids as text, and a trace's
 * `9` sorts after its `10` where the controller's `job-10` sorts after `job-9`, so the same trace under its own names
 * and under the controller's is planned differently now and then, in either runtime. Named alike, the engine and the
 * controller runtime see the same ids and can be compared plan by plan.
 */
export function withControllerJobIds(trace: Trace): Trace {
  const names = new Map(trace.jobs.map((job, i) => [job.id, `job-${i + 1}`]));
  // Refused here, in the trace's own names: renamed, a duplicate would be reported under its new name, and a
  // dependency on a job not in the trace could come to name one that is (`job-3`).
  const problems: string[] = [];
  if (names.size < trace.jobs.length) {
    const seen = new Set<string>();
    for (const job of trace.jobs)
      if (seen.has(job.id)) problems.push(`job ${job.id}: duplicate job id`);
      else seen.add(job.id);
  }
  for (const job of trace.jobs)
    for (const id of job.dependsOn ?? [])
      if (!names.has(id)) problems.push(`job ${job.id}: dependsOn ${id} is not a job of the trace`);
  if (problems.length > 0) throw new ValidationError(`${trace.name} (--job-ids controller)`, problems);
  const renamed = (id: string): string => names.get(id) as string;
  return {
    ...trace,
    jobs: trace.jobs.map((job): TraceJob => ({
      ...job,
      id: renamed(job.id),
      ...(job.dependsOn === undefined ? {} : { dependsOn: job.dependsOn.map(renamed) }),
    })),
  };
}
