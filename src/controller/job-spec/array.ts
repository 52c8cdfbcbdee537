import type { JobSpec } from './spec.js';

/**
 * Which jobs make one array. An array is stored in one transaction, so its jobs have consecutive ids from its index 0;
 * a job submitted alone with an index (to run one job of an array again) is not one of them.
 */

/** What says a job is one of an array: from a job record or from the API's view of it. */
export interface ArrayMemberFacts {
  readonly id: string;
  readonly name: string;
  readonly team: string;
  /** Absent for a job not of an array. */
  readonly array?: { readonly index: number; readonly size: number } | undefined;
}

/** A stored job (its id and spec) as the array rules read it. */
export function arrayFactsOf(
  id: string,
  spec: Pick<JobSpec, 'name' | 'team' | 'arrayProperties'>,
): ArrayMemberFacts {
  const a = spec.arrayProperties;
  return {
    id,
    name: spec.name,
    team: spec.team,
    ...(a?.index === undefined ? {} : { array: { index: a.index, size: a.size } }),
  };
}

/** The ids the array `job` belongs to would have, index 0 first (undefined: `job` is of no array). */
export function arrayIdsOf(job: ArrayMemberFacts): string[] | undefined {
  if (job.array === undefined) return undefined;
  const first = Number(job.id.slice('job-'.length)) - job.array.index;
  return Array.from({ length: job.array.size }, (_, k) => `job-${first + k}`);
}

/** Whether the jobs found at `arrayIdsOf(of)` (in order; undefined where none) are the array `of` belongs to. */
export function isWholeArray(
  of: ArrayMemberFacts,
  found: readonly (ArrayMemberFacts | undefined)[],
): boolean {
  const ids = arrayIdsOf(of);
  return (
    ids !== undefined &&
    found.length === ids.length &&
    found.every(
      (m, k) =>
        m !== undefined &&
        m.id === ids[k] &&
        m.name === of.name &&
        m.team === of.team &&
        m.array?.index === k &&
        m.array.size === of.array?.size,
    )
  );
}

/**
 * How many jobs a spec not yet validated submits as an array (its `arrayProperties.size` when it has no index), for
 * the CLI's checks before sending it; undefined for one job, or when the field is not a number (validation names it).
 */
export function writtenArraySize(raw: unknown): number | undefined {
  const array =
    typeof raw === 'object' && raw !== null
      ? (raw as { arrayProperties?: unknown }).arrayProperties
      : undefined;
  if (typeof array !== 'object' || array === null || 'index' in array) return undefined;
  const size = (array as { size?: unknown }).size;
  return typeof size === 'number' ? size : undefined;
}
