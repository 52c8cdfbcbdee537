import { ValidationError } from '../core/validation.js';
import { writtenArraySize } from '../controller/job-spec/array.js';
import { arrayPropertiesSchema } from '../controller/job-spec/schema.js';
import { JOB_SPEC_LIMITS } from '../controller/job-spec/spec.js';
import type { RawSpec } from './submit-contexts.js';

/**
 * The rules `submit` checks arrays, dependencies and chains of spec files by before anything is sent: `--array N`,
 * `--chain` (each step waits for the one before it) and `--per-index` (arrays paired job by job).
 */

/** `--array N`, checked as the spec's arrayProperties.size is. */
export function arraySizeOption(text: string): number {
  const size = /^\d+$/.test(text.trim()) ? Number(text) : Number.NaN;
  const checked = arrayPropertiesSchema.safeParse({ size });
  if (!checked.success)
    throw new ValidationError('--array', [
      Number.isNaN(size)
        ? `${JSON.stringify(text)}: expected a whole number of jobs`
        : `${text}: ${checked.error.issues[0]?.message ?? 'not a valid array size'}`,
    ]);
  return size;
}

/** The spec as an array of `size` jobs (replacing any arrayProperties it had). */
export function withArray(raw: RawSpec, size: number): RawSpec {
  return { ...raw, arrayProperties: { size } };
}

/** An array dependency as a spec writes it (AWS Batch's N_TO_N). */
export interface PerIndexDependency {
  readonly jobId: string;
  readonly type: 'N_TO_N';
}

/**
 * The spec with `dependencies` added to its own `dependsOn` (each job once); checked by the controller like the
 * rest.
 */
export function withDependencies(
  raw: RawSpec,
  dependencies: readonly (string | PerIndexDependency)[],
): RawSpec {
  if (dependencies.length === 0) return raw;
  const own = Array.isArray(raw['dependsOn']) ? (raw['dependsOn'] as unknown[]) : [];
  const named = new Set(own.map(namedJob));
  const added = dependencies.filter((d) => {
    const id = namedJob(d);
    if (named.has(id)) return false;
    named.add(id);
    return true;
  });
  return { ...raw, dependsOn: [...own, ...added] };
}

/** The job a dependency names (a job id, or an N_TO_N entry's jobId); anything else is left to validation. */
export function namedJob(dependency: unknown): unknown {
  return typeof dependency === 'object' && dependency !== null && 'jobId' in dependency
    ? (dependency as { jobId: unknown }).jobId
    : dependency;
}

/**
 * A step after an array waits for every job of it: refused before anything is submitted when that is more than a job
 * may wait for, rather than after the steps before it were.
 */
export function checkChainAfterArrays(files: readonly string[], specs: readonly RawSpec[]): void {
  const problems = files.flatMap((file, i) => {
    const before = i === 0 ? undefined : writtenArraySize(specs[i - 1] as RawSpec);
    if (before === undefined) return [];
    const own = specs[i]?.['dependsOn'];
    const waits = before + (Array.isArray(own) ? own.length : 0);
    return waits > JOB_SPEC_LIMITS.maxDependencies
      ? [
          `${file} would wait for ${waits} jobs (all ${before} of the array before it), at most ` +
            `${JOB_SPEC_LIMITS.maxDependencies}: --per-index pairs arrays job by job`,
        ]
      : [];
  });
  if (problems.length > 0) throw new ValidationError('--chain', problems);
}

/** `count` job ids none of `taken`, standing in for jobs not yet submitted (as many as there will be). */
export function standInIds(count: number, taken: ReadonlySet<unknown>): string[] {
  const ids: string[] = [];
  for (let n = 1; ids.length < count; n++) {
    const id = `job-${900_000_000_000_000 + n}`;
    if (!taken.has(id)) ids.push(id);
  }
  return ids;
}

/** A step waits for jobs of its own team only: each step of a chain is for the team of the one before it. */
export function checkChainTeams(files: readonly string[], teams: readonly (string | undefined)[]): void {
  const problems = files.flatMap((file, i) => {
    const team = teams[i];
    const before = i === 0 ? undefined : teams[i - 1];
    return before === undefined || team === before
      ? []
      : [
          `${file} is for team ${team ?? '?'}, ${files[i - 1]} before it for team ${before}: a job waits only for ` +
            'jobs of its own team',
        ];
  });
  if (problems.length > 0) throw new ValidationError('--chain', problems);
}

/** `--per-index` pairs the jobs of consecutive arrays by index: every file an array, all of one size. */
export function checkPerIndex(files: readonly string[], specs: readonly RawSpec[], chain: boolean): void {
  if (!chain) throw new ValidationError('--per-index', ['goes with --chain (it says how each step waits)']);
  const sizes = specs.map(writtenArraySize);
  const problems = files.flatMap((file, i) =>
    sizes[i] === undefined
      ? [`${file} is not an array (give arrayProperties.size, or --array N)`]
      : i > 0 && sizes[i] !== sizes[i - 1]
        ? [
            `${file} is an array of ${sizes[i]}, ${files[i - 1]} of ${sizes[i - 1]}: only arrays of one size pair by index`,
          ]
        : [],
  );
  if (problems.length > 0) throw new ValidationError('--per-index', problems);
}
