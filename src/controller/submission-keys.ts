import { createHash } from 'node:crypto';
import { stringify } from 'safe-stable-stringify';
import { z } from 'zod';
import type { JobSpec } from './job-spec/spec.js';
import { jobSeqOf } from './state/lifecycle.js';
import type { JobRecord, StateStore } from './state-store.js';

/**
 * Idempotent submission: a client that sends a submission with an idempotency key (the API's `Idempotency-Key`
 * header) and gets no answer (a timeout, a dropped connection, a controller restart) can send it again with the same
 * key and is answered with the job(s) the first one made, never a second copy. The key is recorded in the
 * submission's own transaction, so a job exists exactly when its key does; a team's keys are its own. Keys are kept as
 * long as the jobs they name (the store keeps every job), so a key also makes a submission repeatable much later:
 * `fleetwise resubmit` keys each rerun by the job it reruns, so running it twice reruns once.
 */

/** What an idempotency key may be: printable, no spaces, 1–255 characters (a UUID, `nightly/2026-12-02`, …). */
export const IDEMPOTENCY_KEY_PATTERN = /^[A-Za-z0-9._:/@+=-]{1,255}$/;
export const IDEMPOTENCY_KEY_RULE =
  '1–255 characters of letters, digits and . _ : / @ + = - (a UUID, say); the same key sends the same submission again';

/**
 * One keyed submission: what was asked (its spec's hash) and the jobs it made. An array's ids follow one another, so
 * a run of ids is kept as its first and its count (a 10,000-job array is one short record, not 10,000 ids).
 */
export interface SubmissionKeyRecord {
  readonly requestHash: string;
  readonly jobIds: readonly string[];
  readonly atSeconds: number;
  /**
   * Which run of a controller's API recorded it (a random id per start), if any. One recorded by the running one was
   * answered, or withdrawn, before its key could be seen again; one recorded by an earlier run may have been left
   * between its commit and its job archive writes by a stop, so a resend makes its jobs durable before being told of
   * them (the writes are idempotent). Knowing it costs no write after the commit.
   */
  readonly madeBy: string | undefined;
}

const storedSchema = z.object({
  requestHash: z.string(),
  firstJobId: z.string(),
  jobCount: z.number().int().positive(),
  atSeconds: z.number(),
  madeBy: z.string().optional(),
});
type StoredSubmissionKey = z.output<typeof storedSchema>;

/** A job's record says this when its submission could not be made durable and the client was told to retry. */
export const WITHDRAWN_AT_SUBMISSION = 'withdrawn at submission';

export function isWithdrawnAtSubmission(job: JobRecord): boolean {
  return job.state === 'cancelled' && (job.reason?.startsWith(WITHDRAWN_AT_SUBMISSION) ?? false);
}

/**
 * Whether a key's submission was never answered: one of its jobs withdrawn (the controller stopped between the
 * withdrawal and forgetting the key, or a restore brought back a key from before it) or missing (a state restored
 * from before the key). Its key then answers for nothing, and a resend submits anew.
 */
export function wasWithdrawn(store: StateStore, record: SubmissionKeyRecord): boolean {
  return record.jobIds.some((id) => {
    const job = store.getJob(id);
    return job === undefined || isWithdrawnAtSubmission(job);
  });
}

/** The same key sent again with another spec: a client reusing a key by mistake, never a retry. */
export class SubmissionKeyReusedError extends Error {
  override name = 'SubmissionKeyReusedError';
  constructor(
    readonly key: string,
    readonly jobIds: readonly string[],
  ) {
    super(
      `the idempotency key ${JSON.stringify(key)} was used for another submission (${jobIds.length === 1 ? jobIds[0] : `${jobIds[0]} … ${jobIds.at(-1)}`}): ` +
        'a retry sends the same spec with the same key; a new submission takes a new key',
    );
  }
}

/** A key recorded between the caller's look and its commit (a concurrent retry): answer that submission instead. */
export class SubmissionKeyTakenError extends Error {
  override name = 'SubmissionKeyTakenError';
  constructor() {
    super('submitted already with this idempotency key');
  }
}

/** A submission's key as the caller gives it: the team scopes it, the hash tells a retry from a reuse. */
export interface SubmissionKey {
  readonly team: string;
  readonly key: string;
  readonly requestHash: string;
}

// Teams are names without '/', so the team part of the store key cannot run into the key part.
const storeKey = (team: string, key: string): string => `submission-key/${team}/${key}`;

/** The hash of what a submission asks: its validated spec, key order aside (a retry may serialise it otherwise). */
export function requestHashOf(spec: JobSpec): string {
  return createHash('sha256')
    .update(stringify(spec) ?? '')
    .digest('hex');
}

export function findSubmission(
  store: StateStore,
  team: string,
  key: string,
): SubmissionKeyRecord | undefined {
  const value = store.getValue(storeKey(team, key));
  if (value === undefined) return undefined;
  const parsed = storedSchema.safeParse(value);
  // A value this code did not write is no submission: better a second job than a wrong answer naming other jobs.
  if (!parsed.success) return undefined;
  const { firstJobId, jobCount, madeBy, ...rest } = parsed.data;
  const first = jobSeqOf(firstJobId);
  return { ...rest, madeBy, jobIds: Array.from({ length: jobCount }, (_, i) => `job-${first + i}`) };
}

/**
 * Record the key of a submission that made `jobs` (ids in a run, as one submission makes them), inside the
 * submission's transaction: throws (rolling the submission back) when the key was recorded meanwhile.
 */
export function recordSubmissionKey(
  store: StateStore,
  submission: SubmissionKey,
  jobs: readonly JobRecord[],
  options: { readonly madeBy?: string | undefined } = {},
): void {
  const first = jobs[0];
  if (first === undefined) throw new Error('a submission key names at least one job');
  const seq = jobSeqOf(first.id);
  if (jobs.some((j, i) => jobSeqOf(j.id) !== seq + i))
    throw new Error(`a submission's jobs follow one another: ${jobs.map((j) => j.id).join(', ')}`);
  store.transaction(() => {
    const earlier = findSubmission(store, submission.team, submission.key);
    if (earlier !== undefined) {
      if (earlier.requestHash !== submission.requestHash)
        throw new SubmissionKeyReusedError(submission.key, earlier.jobIds);
      throw new SubmissionKeyTakenError();
    }
    const stored: StoredSubmissionKey = {
      requestHash: submission.requestHash,
      firstJobId: first.id,
      jobCount: jobs.length,
      atSeconds: first.submittedAtSeconds,
      ...(options.madeBy === undefined ? {} : { madeBy: options.madeBy }),
    };
    store.setValue(storeKey(submission.team, submission.key), stored);
  });
}

/**
 * Forget a key whose submission was withdrawn (its spec could not be made durable): the client is told to retry, and
 * the retry, with the same key, must submit anew rather than be answered with the withdrawn job.
 */
export function forgetSubmissionKey(store: StateStore, team: string, key: string): void {
  store.deleteValue(storeKey(team, key));
}
