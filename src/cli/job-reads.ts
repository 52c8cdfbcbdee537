import type { FleetwiseClient } from './client.js';
import type { JobDocumentResponse } from './api-responses.js';

/** Job views in flight at once (each a request to the controller). */
const CONCURRENT_READS = 8;

/** The jobs' views (state and spec), in the order given, a few requests at a time. */
export async function readJobs(
  client: FleetwiseClient,
  ids: readonly string[],
): Promise<JobDocumentResponse[]> {
  const jobs: JobDocumentResponse[] = [];
  for (let i = 0; i < ids.length; i += CONCURRENT_READS)
    jobs.push(...(await Promise.all(ids.slice(i, i + CONCURRENT_READS).map((id) => client.getJob(id)))));
  return jobs;
}
