import { JOB_STATES, type JobState } from '../controller/state-store.js';

/** What grouping a listing by array reads of a job. */
export interface ListedArrayJob {
  readonly id: string;
  readonly name: string;
  readonly team: string;
  readonly array?: { readonly index: number; readonly size: number } | undefined;
}

/** A run of a listing: one job, or the jobs of one array listed one after another (two or more). */
export type ListingRow<J> =
  { readonly kind: 'job'; readonly job: J } | { readonly kind: 'array'; readonly jobs: readonly J[] };

/**
 * A listing (in id order) with each array's jobs that follow one another made one row: consecutive ids, the same name,
 * team and size, indexes one after another. A job of an array listed alone (the others ended before the window, or
 * submitted alone with its index) stays a row of its own.
 */
export function groupArrays<J extends ListedArrayJob>(jobs: readonly J[]): ListingRow<J>[] {
  const rows: ListingRow<J>[] = [];
  let run: J[] = [];
  const flush = (): void => {
    if (run.length === 1) rows.push({ kind: 'job', job: run[0] as J });
    else if (run.length > 1) rows.push({ kind: 'array', jobs: run });
    run = [];
  };
  for (const job of jobs) {
    const last = run.at(-1);
    if (last === undefined || !follows(last, job)) flush();
    if (job.array === undefined) {
      flush();
      rows.push({ kind: 'job', job });
    } else run.push(job);
  }
  flush();
  return rows;
}

function follows(a: ListedArrayJob, b: ListedArrayJob): boolean {
  return (
    a.array !== undefined &&
    b.array !== undefined &&
    a.name === b.name &&
    a.team === b.team &&
    a.array.size === b.array.size &&
    b.array.index === a.array.index + 1 &&
    seqOf(b.id) === seqOf(a.id) + 1
  );
}

function seqOf(id: string): number {
  return Number(id.slice('job-'.length));
}

/** How many of the jobs are in each state, live states first (`2 running, 5 queued, 3 succeeded`). */
export function stateCounts(states: readonly JobState[]): string {
  const order: readonly JobState[] = ['running', 'migrating', 'starting', 'queued', ...JOB_STATES];
  const counts = new Map<JobState, number>();
  for (const s of states) counts.set(s, (counts.get(s) ?? 0) + 1);
  return [...new Set(order)]
    .filter((s) => counts.has(s))
    .map((s) => `${counts.get(s)} ${s}`)
    .join(', ');
}
