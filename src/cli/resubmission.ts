import { createHash } from 'node:crypto';

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

/** The job a `dependsOn` entry names: a plain id, or the `jobId` of an `{ jobId, type }` entry; none for SEQUENTIAL. */
function namedJobOf(entry: unknown): string | undefined {
  if (typeof entry === 'string') return entry;
  if (typeof entry !== 'object' || entry === null || !('jobId' in entry)) return undefined;
  const jobId = (entry as { jobId: unknown }).jobId;
  return typeof jobId === 'string' ? jobId : undefined;
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
    const to = renamed.get(namedJobOf(entry) ?? '');
    if (to === undefined) return entry;
    return typeof entry === 'string' ? to : { ...(entry as object), jobId: to };
  };
  return { ...spec, dependsOn: dependsOn.map(rename) };
}

/** The ids among `dependsOn` not run again with the job. */
export function keptDependencies(
  spec: Readonly<Record<string, unknown>>,
  resubmitted: ReadonlySet<string>,
): string[] {
  const dependsOn = spec['dependsOn'];
  if (!Array.isArray(dependsOn)) return [];
  return dependsOn.flatMap((entry: unknown) => {
    const id = namedJobOf(entry);
    return id !== undefined && !resubmitted.has(id) ? [id] : [];
  });
}

/** Idempotency keys of reruns start with this; `fleetwise submit --idempotency-key` may not. */
export const RESUBMISSION_KEY_PREFIX = 'resubmit/';

/**
 * The idempotency key of the rerun of `jobId` as `spec` (`original` with its dependencies renamed): one rerun per
 * job, however often the command runs, and another when the rerun waits for other jobs (a second command that also
 * reruns a job it waits for), so that is a rerun of its own rather than a reuse of the first one's key.
 */
export function resubmissionKey(
  jobId: string,
  original: Readonly<Record<string, unknown>>,
  spec: Readonly<Record<string, unknown>>,
): string {
  const before = JSON.stringify(original['dependsOn'] ?? null);
  const now = JSON.stringify(spec['dependsOn'] ?? null);
  return before === now
    ? `${RESUBMISSION_KEY_PREFIX}${jobId}`
    : `${RESUBMISSION_KEY_PREFIX}${jobId}/${createHash('sha256').update(now).digest('hex').slice(0, 16)}`;
}
