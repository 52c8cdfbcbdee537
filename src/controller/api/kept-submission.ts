import { runBounded } from '../../core/bounded.js';
import type { ArchivedSubmissionKey } from '../backup/job-archive.js';
import type { JobRecord } from '../state-store.js';
import { WITHDRAWN_AT_SUBMISSION } from '../submission-keys.js';
import { HttpError } from './errors.js';
import type { ApiControllerService } from './routing.js';

/**
 * A submission is answered 201 only once the job is durable beyond the controller's machine (its spec in the job
 * archive, src/controller/backup/job-archive.ts): a job a client saw accepted survives the loss of the machine. When
 * the object store does not take the spec, the controller has withdrawn the job and the client is told to retry.
 */
export async function keepAcceptedJob(
  service: ApiControllerService,
  job: JobRecord,
  key?: ArchivedSubmissionKey,
): Promise<void> {
  if (service.keepSubmission === undefined) return;
  try {
    await service.keepSubmission(job, key, { withdraw: true, ofArray: false });
  } catch (e) {
    throw new HttpError(
      503,
      `the job could not be made durable (the object store did not take its spec: ${
        e instanceof Error ? e.message : String(e)
      }); ${job.id} was withdrawn, nothing will run: submit it again`,
    );
  }
}

/**
 * Archive writes in flight at once for an array's jobs: a 10,000-job array at S3's tens of milliseconds a put is
 * answered in seconds, within what the AWS SDK's default 50 sockets carry at once.
 */
const ARRAY_KEEP_CONCURRENCY = 48;

/**
 * An array is answered 201 only once every one of its jobs is durable (as `keepAcceptedJob`). When the object store
 * does not take one, the whole array is withdrawn (an array runs whole or not at all) and the client told to retry.
 */
export async function keepAcceptedArray(
  service: ApiControllerService,
  jobs: readonly JobRecord[],
  key?: ArchivedSubmissionKey,
): Promise<void> {
  const keep = service.keepSubmission?.bind(service);
  if (keep === undefined) return;
  // A job it cannot keep, it withdraws itself.
  const failure = await runBounded(jobs, ARRAY_KEEP_CONCURRENCY, (job) =>
    keep(job, key, { withdraw: true, ofArray: true }),
  );
  if (failure === undefined) return;
  const why = failure.error instanceof Error ? failure.error.message : String(failure.error);
  // One commit: a stop midway cannot leave part of the array to run (those withdrawn by their own failed keep are
  // returned as they are).
  const failed = failure.item.id;
  service.cancelMany(
    jobs.filter((j) => j.id !== failed).map((j) => j.id),
    `${WITHDRAWN_AT_SUBMISSION}: ${failed} of its array could not be made durable`,
  );
  const ids = `${(jobs[0] as JobRecord).id} … ${(jobs.at(-1) as JobRecord).id}`;
  throw new HttpError(
    503,
    `the array could not be made durable (the object store did not take the spec of ${failure.item.id}: ${why}); ` +
      `all ${jobs.length} of its jobs (${ids}) were withdrawn, nothing will run: submit it again`,
  );
}

/**
 * Make durable the jobs of a keyed submission made before but never answered (the controller stopped between its
 * commit and the archive writes), answering its resend. Nothing is withdrawn: the jobs may be running by now, and a
 * store that fails again is a 503 to retry with the same key.
 */
export async function keepAgain(
  service: ApiControllerService,
  jobs: readonly JobRecord[],
  key: ArchivedSubmissionKey,
): Promise<void> {
  const keep = service.keepSubmission?.bind(service);
  if (keep === undefined) return;
  // A submission's record names several jobs only for an array.
  const failure = await runBounded(jobs, ARRAY_KEEP_CONCURRENCY, (job) =>
    keep(job, key, { withdraw: false, ofArray: jobs.length > 1 }),
  );
  if (failure === undefined) return;
  throw new HttpError(
    503,
    `the job(s) of this submission were made but could not be made durable (the object store did not take a spec: ${
      failure.error instanceof Error ? failure.error.message : String(failure.error)
    }); send it again with the same Idempotency-Key`,
  );
}
