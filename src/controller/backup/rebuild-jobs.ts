import type { z } from 'zod';
import type { Catalog } from '../../core/catalog.js';
import { ValidationError } from '../../core/validation.js';
import { jobArchiveKeys, jobArchivePrefix, parseJobArchiveKey } from '../../protocol/object-keys.js';
import type { ObjectStore } from '../../storage/object-store.js';
import { validateJobSpec } from '../job-spec/parse.js';
import { arrayFactsOf, arrayIdsOf } from '../job-spec/array.js';
import type { JobSpec } from '../job-spec/spec.js';
import { writtenJobSpec } from '../job-spec/written-form.js';
import { canTransitionJob, isFinalJobState, jobSeqOf } from '../state/lifecycle.js';
import { endJobWithTasks, isEndedJobState } from '../job-end.js';
import {
  JOB_STATES,
  type IntentRecord,
  type JobRecord,
  type JobState,
  type StateStore,
} from '../state-store.js';
import {
  archivedEndSchema,
  archivedSpecSchema,
  readDocument,
  type ArchivedEnd,
  type ArchivedSpec,
} from './backup-documents.js';
import {
  findSubmission,
  forgetSubmissionKey,
  isWithdrawnAtSubmission,
  recordSubmissionKey,
  wasWithdrawn,
} from '../submission-keys.js';

/** Archive reads in flight at once: a restore reads only what its backup missed, but that may be many jobs. */
const READ_CONCURRENCY = 16;

export interface JobRebuildSummary {
  /** Jobs accepted after the backup, submitted again with their ids. */
  readonly resubmitted: readonly string[];
  /** Jobs that ended after the backup (or were accepted and ended after it), restored ended. */
  readonly ended: readonly string[];
  /**
   * Jobs of an array the loss cut short: some of its jobs are neither in the backup nor in the archive, so the array
   * was never answered (it is accepted whole, once every job is archived). Restored cancelled, never run.
   */
  readonly withdrawn: readonly string[];
}

/**
 * A document of the job archive that cannot be read (cut short, or not one): the restore stops before writing anything,
 * naming the job, the document, and what the operator can do about it.
 */
export class ArchivedDocumentError extends Error {
  override name = 'ArchivedDocumentError';

  constructor(
    readonly jobId: string,
    readonly part: 'spec' | 'end',
    detail: string,
  ) {
    super(
      `the job archive's ${part === 'spec' ? 'spec' : 'end record'} of ${jobId} is unreadable (${detail}); ` +
        (part === 'spec'
          ? `move that document aside to restore without ${jobId}`
          : `move that document aside to restore ${jobId} as not ended (it would run again)`),
    );
  }
}

interface ArchivedJob {
  spec: boolean;
  end: boolean;
}

/**
 * Bring a restored state up to the job archive (job-archive.ts): every job whose spec is archived but which the
 * backup lacks is submitted again with its id and submission time, and every job that ended after the backup is
 * ended as it did (never run again). Every archived spec is validated against `catalog` before anything is written,
 * and all of it is one transaction: a restore applies the whole archive or fails saying which job stops it.
 */
export async function rebuildJobs(
  store: StateStore,
  archive: { readonly objectStore: ObjectStore; readonly cluster: string },
  catalog: Catalog,
): Promise<JobRebuildSummary> {
  const { objectStore, cluster } = archive;
  const listed = new Map<string, ArchivedJob>();
  for await (const info of objectStore.list(jobArchivePrefix(cluster))) {
    const parsed = parseJobArchiveKey(cluster, info.key);
    if (parsed === undefined) continue;
    const entry = listed.get(parsed.jobId) ?? { spec: false, end: false };
    entry[parsed.part] = true;
    listed.set(parsed.jobId, entry);
  }
  const missing: string[] = [];
  const endedSince: string[] = [];
  for (const [jobId, parts] of listed) {
    const job = store.getJob(jobId);
    if (job === undefined && parts.spec) missing.push(jobId);
    else if (job !== undefined && parts.end && !isFinalJobState(job.state)) endedSince.push(jobId);
  }
  const read = async <T>(jobId: string, part: 'spec' | 'end', schema: z.ZodType<T>): Promise<T> => {
    const key = jobArchiveKeys(cluster, jobId)[part];
    // The store failing is thrown as it is (worth another try); what it holds failing to parse is the document's.
    const bytes = await objectStore.getBuffer(key);
    try {
      return readDocument(schema, bytes, `${objectStore.location} ${key}`);
    } catch (e) {
      throw new ArchivedDocumentError(jobId, part, (e as Error).message);
    }
  };
  const specs = await inBatches(missing, (jobId) => read(jobId, 'spec', archivedSpecSchema));
  const endIds = [...missing.filter((id) => listed.get(id)?.end === true), ...endedSince];
  const ends = new Map(
    (await inBatches(endIds, (jobId) => read(jobId, 'end', archivedEndSchema))).map((end) => [end.id, end]),
  );
  const validated = specs.map((archived) => ({ archived, spec: validArchivedSpec(archived, catalog) }));
  validated.sort((a, b) => jobSeqOf(a.archived.id) - jobSeqOf(b.archived.id));
  const known = (id: string): boolean => listed.get(id)?.spec === true || store.getJob(id) !== undefined;
  const cutShort = new Map(
    validated.flatMap(({ archived, spec }) => {
      const missing = arrayIdsOfSubmission(archived, spec)?.filter((id) => !known(id)) ?? [];
      return missing.length === 0 ? [] : [[archived.id, missing] as const];
    }),
  );

  return store.transaction(() => {
    // Every id the archive knows stays taken, a job it holds only the end of too (one withdrawn at submission after
    // the backup): given again, that end would apply to the new job at the next restore.
    const newest = [...listed.keys()].reduce((m, id) => Math.max(m, jobSeqOf(id)), 0);
    if (newest > 0) store.reserveJobIds(newest);
    for (const { archived, spec } of validated) {
      store.submitJob(spec, { id: archived.id, submittedAtSeconds: archived.submittedAtSeconds });
      store.appendEvent({
        kind: 'job.restored',
        jobId: archived.id,
        message: `${archived.id} submitted again from the job archive: it was accepted after the backup restored`,
      });
    }
    // Intents name one job's tasks each, so one read serves every job ended here.
    const pending = store.listIntents({ states: ['pending'] });
    const ended: string[] = [];
    for (const end of [...ends.values()].sort((a, b) => jobSeqOf(a.id) - jobSeqOf(b.id)))
      if (endAsArchived(store, end, pending)) ended.push(end.id);
    const withdrawn: string[] = [];
    for (const [id, missing] of cutShort) {
      if (isFinalJobState((store.getJob(id) as JobRecord).state)) continue;
      endJobWithTasks(
        store,
        id,
        'cancelled',
        `withdrawn at restore: its array was not accepted whole before the loss (${missing.slice(0, 3).join(', ')}` +
          `${missing.length > 3 ? ` and ${missing.length - 3} more` : ''} never stored)`,
        { pending },
      );
      withdrawn.push(id);
    }
    // Not the keys of submissions never answered: an array cut short, a job withdrawn for the archive (its retry,
    // with the same key, made the jobs the key names).
    restoreSubmissionKeys(
      store,
      validated.filter(
        ({ archived }) =>
          !cutShort.has(archived.id) && !isWithdrawnAtSubmission(store.getJob(archived.id) as JobRecord),
      ),
    );
    return { resubmitted: validated.map((v) => v.archived.id), ended, withdrawn };
  });
}

/**
 * The idempotency keys the restored jobs were submitted with (an array's jobs share one), so a client resending a
 * submission whose answer it lost in the loss is answered with its jobs, not given second copies. Jobs of an array the
 * loss cut short keep none: that submission was never answered, and its resend must submit anew.
 */
function restoreSubmissionKeys(
  store: StateStore,
  restored: readonly { readonly archived: ArchivedSpec; readonly spec: JobSpec }[],
): void {
  const byKey = new Map<string, { team: string; key: string; archived: ArchivedSpec[] }>();
  for (const { archived, spec } of restored) {
    const kept = archived.submissionKey;
    if (kept === undefined) continue;
    const slot = `${spec.team}\n${kept.key}`;
    const entry = byKey.get(slot) ?? { team: spec.team, key: kept.key, archived: [] };
    entry.archived.push(archived);
    byKey.set(slot, entry);
  }
  for (const { team, key, archived } of byKey.values()) {
    // A key names one job or one whole array. Jobs of two submissions under one key are a withdrawn submission whose
    // end record the loss took, and its retry: the key is the retry's, the newest job (or the whole array it is of),
    // with the retry's spec's hash (a withdrawal frees the key for any spec).
    const newest = archived.reduce((a, b) => (jobSeqOf(b.id) > jobSeqOf(a.id) ? b : a));
    const newestJob = store.getJob(newest.id) as JobRecord;
    const arrayIds = arrayIdsOfSubmission(newest, newestJob.spec);
    const held = new Set(archived.map((a) => a.id));
    const named =
      arrayIds !== undefined && arrayIds.every((id) => held.has(id))
        ? arrayIds.map((id) => store.getJob(id) as JobRecord)
        : [newestJob];
    const requestHash = newest.submissionKey?.requestHash ?? '';
    // The backup may hold the key already, naming jobs withdrawn since (their retry made these): replace it then.
    const earlier = findSubmission(store, team, key);
    if (earlier !== undefined && !wasWithdrawn(store, earlier)) continue;
    if (earlier !== undefined) forgetSubmissionKey(store, team, key);
    recordSubmissionKey(store, { team, key, requestHash }, named);
  }
}

/**
 * The ids of the array submission a job was one of, or undefined for a job submitted alone (a rerun of one job of an
 * array carries its index too: documents say which; those written before they said are taken by the index).
 */
function arrayIdsOfSubmission(archived: ArchivedSpec, spec: JobSpec): string[] | undefined {
  if (archived.ofArraySubmission === false) return undefined;
  return arrayIdsOf(arrayFactsOf(archived.id, spec));
}

function validArchivedSpec(archived: ArchivedSpec, catalog: Catalog): JobSpec {
  try {
    // The archive holds the spec as the controller stored it; it validates in the form a user writes, as accepted.
    return validateJobSpec(writtenJobSpec(archived.spec), `archived spec of ${archived.id}`, catalog, {
      accepted: true,
    });
  } catch (e) {
    if (!(e instanceof ValidationError)) throw e;
    // A demand no type of this catalog hosts says the cluster ran with another one; anything else, another version.
    const aboutCatalog = e.problems.some((p) => / catalog\b/.test(p));
    throw new ValidationError(e.source, [
      ...e.problems,
      aboutCatalog
        ? 'the job was accepted against another catalog: restore with the catalog the cluster ran with (--catalog)'
        : 'the job was accepted by another version of fleetwise: restore with the version the cluster ran',
    ]);
  }
}

/**
 * End a job as the archive says it ended, through the job lifecycle's own transitions and, at the last, the rule that
 * ends a job with its tasks (job-end.ts); false if already final. `pending`: the store's pending intents.
 */
function endAsArchived(store: StateStore, end: ArchivedEnd, pending: readonly IntentRecord[]): boolean {
  const job = store.getJob(end.id);
  const state = end.state;
  if (job === undefined || isFinalJobState(job.state) || !isEndedJobState(state)) return false;
  // The end of another submission under the same id (an id given again before ids the archive knew stayed taken).
  if (end.submittedAtSeconds !== undefined && end.submittedAtSeconds !== job.submittedAtSeconds) return false;
  // Dated when the job ended, not now: its finish time, its duration and the window of recently ended jobs are its own.
  // The steps on the way (a job queued in the backup that ran and ended since) are dated then too: when it started
  // is not archived, and a start after its end would make its run time negative.
  const at = { atSeconds: end.finishedAtSeconds };
  for (const step of transitionPath(job.state, state).slice(0, -1))
    store.setJobState(end.id, step, 'restored from the job archive', at);
  endJobWithTasks(store, end.id, state, archivedEndReason(end), { ...at, pending });
  return true;
}

/**
 * Why a restored job ended: the reason it ended with, if it had one, and when, from the archive. The state is not
 * repeated in it: a job's view shows its state beside its reason already.
 */
function archivedEndReason(end: ArchivedEnd): string {
  const when = new Date(end.finishedAtSeconds * 1000).toISOString();
  const restored = `ended ${when}, after the backup restored; from the job archive`;
  return end.reason === undefined ? restored : `${end.reason} (${restored})`;
}

/** The shortest run of legal job transitions from `from` to `to` (e.g. queued → starting → running → succeeded). */
function transitionPath(from: JobState, to: JobState): JobState[] {
  const previous = new Map<JobState, JobState>();
  const queue: JobState[] = [from];
  while (queue.length > 0) {
    const state = queue.shift() as JobState;
    if (state === to) break;
    for (const next of JOB_STATES)
      if (next !== state && !previous.has(next) && next !== from && canTransitionJob(state, next)) {
        previous.set(next, state);
        queue.push(next);
      }
  }
  const path: JobState[] = [];
  for (let at: JobState | undefined = to; at !== undefined && at !== from; at = previous.get(at))
    path.unshift(at);
  if (path[0] === undefined || !canTransitionJob(from, path[0]))
    throw new Error(`no job transition leads from ${from} to ${to}`);
  return path;
}

async function inBatches<T, R>(items: readonly T[], read: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = [];
  for (let i = 0; i < items.length; i += READ_CONCURRENCY)
    out.push(...(await Promise.all(items.slice(i, i + READ_CONCURRENCY).map(read))));
  return out;
}
