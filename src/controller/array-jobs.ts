import {
  arrayFactsOf,
  arrayIdsOf,
  arraySpecBytesProblem,
  isWholeArray,
  type ArrayMemberFacts,
} from './job-spec/array.js';
import type { JobSpec } from './job-spec/spec.js';
import type { JobRecord, StateStore } from './state-store.js';

/** A job as the array rules read it. */
function facts(job: JobRecord): ArrayMemberFacts {
  return arrayFactsOf(job.id, job.spec);
}

/**
 * Every job of the array `job` belongs to, in index order, or why there is none: it is of no array, or was submitted
 * alone with its index (the jobs at its array's ids are not that array).
 */
export function wholeArrayOf(
  store: StateStore,
  job: JobRecord,
): { readonly jobs: JobRecord[] } | { readonly problem: string } {
  const of = facts(job);
  const ids = arrayIdsOf(of);
  if (ids === undefined) return { problem: `${job.id} (${job.name}) is not a job of an array` };
  const jobs = ids.map((m) => store.getJob(m));
  if (
    !isWholeArray(
      of,
      jobs.map((m) => (m === undefined ? undefined : facts(m))),
    )
  )
    return {
      problem:
        `${job.id} says it is index ${of.array?.index} of an array of ${ids.length}, but ${ids[0]} … ${ids.at(-1)} ` +
        'are not that array (it was submitted alone, with its index)',
    };
  return { jobs: jobs as JobRecord[] };
}

/**
 * The arrays an array being submitted pairs with by index (`sameIndexOf`, Batch's N_TO_N), each as its jobs in index
 * order, or why it cannot: each named job must be a job of the team's, of an array of the same size. An array too
 * large to store (its size × its spec's bytes) is refused here, before any lookup: a submission and its dry run both
 * ask this first.
 */
export function pairedArrays(
  spec: JobSpec,
  team: string,
  store: StateStore,
): { readonly arrays: JobRecord[][]; readonly problems: string[] } {
  const tooLarge = arraySpecBytesProblem(spec);
  if (tooLarge !== undefined) return { arrays: [], problems: [tooLarge] };
  const size = spec.arrayProperties?.size ?? 0;
  const arrays: JobRecord[][] = [];
  const problems: string[] = [];
  for (const id of spec.arrayProperties?.sameIndexOf ?? []) {
    const job = store.getJob(id);
    // Another team's job is not named as such: a team sees only its own jobs.
    if (job === undefined || job.team !== team) {
      problems.push(`dependsOn: no job ${id} of team ${team}`);
      continue;
    }
    const array = wholeArrayOf(store, job);
    if ('problem' in array) {
      problems.push(
        `dependsOn: ${array.problem}${facts(job).array === undefined ? ': N_TO_N pairs the jobs of two arrays' : ''}`,
      );
      continue;
    }
    if (array.jobs.length !== size) {
      problems.push(
        `dependsOn: ${id}'s array has ${array.jobs.length} jobs, this one ${size}: N_TO_N pairs arrays of one size`,
      );
      continue;
    }
    arrays.push(array.jobs);
  }
  return { arrays, problems };
}

/**
 * The spec of an array's job `index`: the array's spec with that index, waiting for what the array waits for, the job
 * of the same index of each paired array, and (SEQUENTIAL) `previous`, the job before it.
 */
export function arrayJobSpec(
  spec: JobSpec,
  index: number,
  paired: readonly (readonly JobRecord[])[],
  previous: JobRecord | undefined,
): JobSpec {
  const size = spec.arrayProperties?.size ?? 0;
  const dependsOn = [
    ...new Set([
      ...(spec.dependsOn ?? []),
      ...paired.map((jobs) => (jobs[index] as JobRecord).id),
      ...(spec.arrayProperties?.sequential === true && previous !== undefined ? [previous.id] : []),
    ]),
  ];
  const { dependsOn: _own, ...rest } = spec;
  return { ...rest, ...(dependsOn.length === 0 ? {} : { dependsOn }), arrayProperties: { size, index } };
}
