import { arrayIdsOf, isWholeArray } from '../controller/job-spec/array.js';
import { ValidationError } from '../core/validation.js';
import type { FleetwiseClient } from './client.js';
import type { JobListResponse } from './api-responses.js';

type ListedJob = JobListResponse['jobs'][number];

/** Jobs read per page while gathering an array (the API's page limit is larger). */
const PAGE = 500;

/**
 * Every job of the array `id` belongs to, in index order: the jobs at its consecutive ids (job-spec/array.ts), read
 * as the pages after the one before its index 0, and checked to be that array.
 */
export async function arrayMembers(client: FleetwiseClient, id: string): Promise<ListedJob[]> {
  const job = await client.getJob(id);
  const ids = arrayIdsOf(job);
  // Named with --array, a job of no array is the command's input at fault (exit 2), as `cancel --array` says it.
  if (ids === undefined || job.array === undefined)
    throw new ValidationError('arguments', [
      `${id} (${job.name}) is not a job of an array: name it without --array`,
    ]);
  const first = Number((ids[0] as string).slice('job-'.length));
  const members: ListedJob[] = [];
  let after: string | undefined = first > 1 ? `job-${first - 1}` : undefined;
  while (members.length < ids.length) {
    const page = await client.listJobsPage({
      limit: Math.min(PAGE, ids.length - members.length),
      ...(after === undefined ? {} : { after }),
    });
    members.push(...page.jobs);
    if (page.next === undefined || page.jobs.length === 0) break;
    after = page.next;
  }
  if (!isWholeArray(job, members))
    throw new Error(
      `${id} says it is index ${job.array.index} of an array of ${job.array.size}, but ${ids[0]} … ${ids.at(-1)} ` +
        'are not that array (it was submitted alone, with its index): name it without --array',
    );
  return members;
}
