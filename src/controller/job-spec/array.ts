import { arraySubmissionSize, JOB_SPEC_LIMITS, type JobSpec } from './spec.js';

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

/** The bytes one job's spec takes in the state store (its JSON, as the store writes it). */
export function storedSpecBytes(spec: JobSpec): number {
  return Buffer.byteLength(JSON.stringify(spec), 'utf8');
}

/**
 * Why an array is too large to store, or undefined: each of its jobs keeps a copy of its spec, so its size × the
 * spec's bytes is bounded in all (JOB_SPEC_LIMITS.maxArraySpecBytes), not only each of the two on its own.
 */
export function arraySpecBytesProblem(spec: JobSpec): string | undefined {
  const size = arraySubmissionSize(spec);
  if (size === undefined) return undefined;
  const limit = JOB_SPEC_LIMITS.maxArraySpecBytes;
  const each = storedSpecBytes(spec);
  const total = size * each;
  if (total <= limit) return undefined;
  return (
    `arrayProperties.size: ${size} jobs × ${each} bytes of spec each make ${total} bytes, at most ${limit} ` +
    `(${limit / (1024 * 1024)} MiB) in one array, so at most ${Math.floor(limit / each)} jobs of this spec: ` +
    'keep large values (env, command, the queue section) out of the spec, e.g. in a file the tasks read, or ' +
    'submit fewer jobs per array'
  );
}
