import type { JobRecord } from '../state-store.js';
import { HttpError } from './errors.js';
import type { ApiControllerService } from './routing.js';

/**
 * A submission is answered 201 only once the job is durable beyond the controller's machine (its spec in the job
 * archive, src/controller/backup/job-archive.ts): a job a client saw accepted survives the loss of the machine. When
 * the object store does not take the spec, the controller has withdrawn the job and the client is told to retry.
 */
export async function keepAcceptedJob(service: ApiControllerService, job: JobRecord): Promise<void> {
  if (service.keepSubmission === undefined) return;
  try {
    await service.keepSubmission(job);
  } catch (e) {
    throw new HttpError(
      503,
      `the job could not be made durable (the object store did not take its spec: ${
        e instanceof Error ? e.message : String(e)
      }); ${job.id} was withdrawn, nothing will run: submit it again`,
    );
  }
}
