/**
 * Running ended jobs again (`fleetwise resubmit`): each job's spec as the controller shows it (its written form, which
 * a submission takes as is), submitted in the order the jobs were, with what each waited for renamed to the new job
 * when that one is submitted again too. So the failed part of a pipeline (a step and the steps after it that never
 * started because it failed) runs again in order, and the rest of what it waits for, already succeeded, is kept.
 */

/** Job ids in submission order (`job-9` before `job-10`): a job names only earlier jobs, so those go first. */
export function inSubmissionOrder(ids: Iterable<string>): string[] {
  const number = (id: string): number => Number(id.slice(id.lastIndexOf('-') + 1));
  return [...new Set(ids)].sort((a, b) => number(a) - number(b));
}

/**
 * The spec with each `dependsOn` entry that names a job in `renamed` naming its new job instead; a plain id and an
 * `{ jobId }` entry alike. Anything else is left for the controller to check.
 */
export function withRenamedDependencies(
  spec: Readonly<Record<string, unknown>>,
  renamed: ReadonlyMap<string, string>,
): Record<string, unknown> {
  const dependsOn = spec['dependsOn'];
  if (!Array.isArray(dependsOn)) return { ...spec };
  const rename = (entry: unknown): unknown => {
    if (typeof entry === 'string') return renamed.get(entry) ?? entry;
    if (typeof entry === 'object' && entry !== null && 'jobId' in entry) {
      const jobId = (entry as { jobId: unknown }).jobId;
      if (typeof jobId === 'string' && renamed.has(jobId)) return { ...entry, jobId: renamed.get(jobId) };
    }
    return entry;
  };
  return { ...spec, dependsOn: dependsOn.map(rename) };
}

/** The ids among `dependsOn` not run again with the job, for a hint when the controller refuses one. */
export function keptDependencies(
  spec: Readonly<Record<string, unknown>>,
  resubmitted: ReadonlySet<string>,
): string[] {
  const dependsOn = spec['dependsOn'];
  if (!Array.isArray(dependsOn)) return [];
  return dependsOn.flatMap((entry: unknown) => {
    const id =
      typeof entry === 'string'
        ? entry
        : typeof entry === 'object' && entry !== null && 'jobId' in entry
          ? (entry as { jobId: unknown }).jobId
          : undefined;
    return typeof id === 'string' && !resubmitted.has(id) ? [id] : [];
  });
}
