import type { FleetwiseClient, JobListResponse } from './client.js';

type ListedJob = JobListResponse['jobs'][number];

/** Jobs read per page while gathering an array (the API's page limit is larger). */
const PAGE = 500;

/**
 * Every job of the array `id` belongs to, in index order. An array is stored in one transaction, so its jobs have
 * consecutive ids from its index 0: they are read as the page after the one before it and checked to be the same
 * array (name, team, size, each index in its place), which a job submitted alone with an index is not.
 */
export async function arrayMembers(client: FleetwiseClient, id: string): Promise<ListedJob[]> {
  const job = await client.getJob(id);
  if (job.array === undefined) throw new Error(`${id} (${job.name}) is not a job of an array`);
  const { index, size } = job.array;
  const seq = Number(id.slice('job-'.length));
  const first = seq - index;
  const members: ListedJob[] = [];
  let after: string | undefined = first > 1 ? `job-${first - 1}` : undefined;
  while (members.length < size) {
    const page = await client.listJobsPage({
      limit: Math.min(PAGE, size - members.length),
      ...(after === undefined ? {} : { after }),
    });
    members.push(...page.jobs);
    if (page.next === undefined || page.jobs.length === 0) break;
    after = page.next;
  }
  const sameArray = members.length === size && members.every((m, k) => isMember(m, job, size, first, k));
  if (!sameArray)
    throw new Error(
      `${id} says it is index ${index} of an array of ${size}, but job-${first} … job-${first + size - 1} are not ` +
        'that array (it was submitted alone, with its index): cancel it by its id',
    );
  return members;
}

/** `m` is index `k` of the array `of` belongs to, whose index 0 is job-`first`. */
function isMember(
  m: ListedJob,
  of: { readonly name: string; readonly team: string },
  size: number,
  first: number,
  k: number,
): boolean {
  return (
    m.id === `job-${first + k}` &&
    m.name === of.name &&
    m.team === of.team &&
    m.array?.index === k &&
    m.array.size === size
  );
}
