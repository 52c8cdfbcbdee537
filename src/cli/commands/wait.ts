import type { Command } from 'commander';
import { z } from 'zod';
import { isFinalJobState } from '../../controller/state/lifecycle.js';
import { parseDurationSeconds } from '../../core/duration.js';
import { parseWith } from '../../core/validation.js';
import { arrayMembers } from '../array-members.js';
import { requireJobIds } from '../job-id-arguments.js';
import { readJobs } from '../job-reads.js';
import { FleetwiseClient } from '../client.js';
import { addConnectionOptions, type ConnectionOptions } from '../client-connection.js';
import type { JobDocumentResponse, JobSummaryResponse } from '../api-responses.js';
import type { JobDocumentAnswer } from '../../controller/api/routes-jobs.js';
import type { JobSummary } from '../../controller/api/views.js';
import { arrayName } from './job.js';
import { pollIntervalOption, ReadsThroughRestarts, sleep } from '../poll.js';
import { formatIdList, printJson } from '../table.js';
import { terminalSafeDeep } from '../terminal-text.js';

interface WaitOptions extends ConnectionOptions {
  readonly array?: boolean;
  readonly timeout?: string;
  readonly interval?: string;
  readonly json?: boolean;
}

const optionsSchema = z.object({
  interval: pollIntervalOption.default(5),
  timeout: z
    .string()
    .optional()
    .transform((text, ctx) => {
      if (text === undefined) return undefined;
      const seconds = parseDurationSeconds(text);
      if (seconds === undefined || !(seconds > 0)) {
        ctx.addIssue({
          code: 'custom',
          message: `${JSON.stringify(text)}: expected a duration, e.g. 90s, 30m or 2h`,
        });
        return z.NEVER;
      }
      return seconds;
    }),
});

/**
 * How long past --timeout the poll on the deadline may take to be answered: a controller answers a poll in
 * milliseconds, so this only keeps a job that ended just before the deadline from being missed.
 */
const LAST_POLL_GRACE_MS = 1000;

/** The longest delay a Node timer keeps (2^31 − 1 ms); a longer one fires at once (AbortSignal.timeout included). */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * The fields a job's document has beyond its summary: dropped, so `--json` prints each job in one shape whether it was
 * read by its id or, with --array, from the listing: the job's summary, as the API lists jobs.
 */
const DOCUMENT_ONLY: Readonly<Record<Exclude<keyof JobDocumentAnswer, keyof JobSummary>, true>> = {
  spec: true,
  instances: true,
  tasks: true,
  etaSeconds: true,
  submissionEta: true,
  predictionError: true,
  attemptFailures: true,
  restarts: true,
  coStart: true,
  dependencies: true,
  startsNoEarlierThanSeconds: true,
  latestWait: true,
};

function summaryOf(document: JobDocumentResponse): JobSummaryResponse {
  return Object.fromEntries(
    Object.entries(document).filter(([key]) => !Object.hasOwn(DOCUMENT_ONLY, key)),
  ) as JobSummaryResponse;
}

export function registerWait(program: Command): void {
  addConnectionOptions(
    program
      .command('wait')
      .description(
        'wait until jobs end, printing each end; exits 0 when every one succeeded, 1 when one did not or on --timeout',
      )
      .argument('<id...>', 'job ids, e.g. job-7')
      .option('--array', 'wait for the whole array each id belongs to')
      .option('--timeout <duration>', 'give up after this long (90s, 30m, 2h, …), exiting 1')
      .option('--interval <seconds>', 'seconds between polls of the jobs not yet ended (default 5)')
      .option('--json', 'print the ended jobs as a JSON array at the end'),
  ).action(async (ids: string[], options: WaitOptions) => {
    requireJobIds(ids, 'arguments');
    const { interval, timeout } = parseWith(optionsSchema, options, 'fleetwise wait options');
    const deadline = timeout === undefined ? undefined : Date.now() + timeout * 1000;
    // Every request ends by the deadline (and the grace of the poll on it), so a controller that stops answering
    // cannot hold the command past --timeout for a request's own timeout, or one per batch of jobs read.
    // A deadline beyond a timer's reach (about 24.8 days) needs no bound: each request's own timeout is far shorter,
    // and the poll loop keeps the deadline.
    const boundMs = deadline === undefined ? undefined : deadline - Date.now() + LAST_POLL_GRACE_MS;
    const client =
      boundMs === undefined || boundMs > MAX_TIMER_MS
        ? FleetwiseClient.fromOptions(options)
        : FleetwiseClient.fromOptions(options).boundedBy(AbortSignal.timeout(boundMs));
    const pastDeadline = (): boolean => deadline !== undefined && Date.now() >= deadline;
    const ended = new Map<string, JobSummaryResponse>();
    let waitFor: readonly string[] = [...new Set(ids)];
    const timedOut = (): Error => {
      const left = waitFor.filter((id) => !ended.has(id));
      return new Error(
        `timed out after ${options.timeout ?? ''}: ${left.length} of ${waitFor.length} not ended (${formatIdList(left)})`,
      );
    };
    /** A read cut off by the deadline is the timeout, not the controller failing. */
    const byDeadline = async <T>(read: () => Promise<T>): Promise<T> => {
      try {
        return await read();
      } catch (e) {
        if (pastDeadline()) throw timedOut();
        throw e;
      }
    };
    const arrays = options.array === true ? await byDeadline(() => arraysOf(client, ids)) : undefined;
    waitFor = arrays === undefined ? [...new Set(ids)] : [...new Set(arrays.flatMap((a) => a.ids))];
    // An array is read a page at a time (its jobs have consecutive ids), not a request per job: 10,000 jobs are 20.
    const poll = async (pending: readonly string[]): Promise<JobSummaryResponse[]> => {
      if (arrays === undefined) return (await readJobs(client, pending)).map(summaryOf);
      const left = new Set(pending);
      const read: JobSummaryResponse[] = [];
      for (const array of arrays)
        if (array.ids.some((id) => left.has(id)))
          read.push(...(await arrayMembers(client, array.first)).filter((j) => left.has(j.id)));
      return read;
    };
    const reads = new ReadsThroughRestarts(options.json !== true);
    for (;;) {
      const pending = waitFor.filter((id) => !ended.has(id));
      // A controller restarting is not a job failing (exit 1 means a job did not succeed, or the timeout): a poll
      // that cannot reach it is tried again until --timeout.
      for (const job of (await reads.read(() => byDeadline(() => poll(pending)))) ?? [])
        if (isFinalJobState(job.state)) {
          ended.set(job.id, job);
          if (options.json !== true) process.stdout.write(`${endLine(job)}\n`);
        }
      if (ended.size === waitFor.length) break;
      const now = Date.now();
      if (deadline !== undefined && now >= deadline) throw timedOut();
      // The last poll falls on the deadline, so a job ending just before it counts.
      await sleep(deadline === undefined ? interval : Math.min(interval, (deadline - now) / 1000));
    }
    const all = waitFor.map((id) => ended.get(id) as JobSummaryResponse);
    const failed = all.filter((j) => j.state !== 'succeeded');
    if (options.json === true) printJson(all);
    else if (all.length > 1) process.stdout.write(`${summary(all)}\n`);
    if (failed.length > 0) process.exitCode = 1;
  });
}

/** The arrays the ids belong to, each once (two ids of one array name it once), with their jobs in order. */
async function arraysOf(
  client: FleetwiseClient,
  ids: readonly string[],
): Promise<{ readonly first: string; readonly ids: string[] }[]> {
  const arrays: { readonly first: string; readonly ids: string[] }[] = [];
  const seen = new Set<string>();
  for (const id of ids) {
    if (seen.has(id)) continue;
    const members = (await arrayMembers(client, id)).map((m) => m.id);
    for (const m of members) seen.add(m);
    arrays.push({ first: members[0] as string, ids: members });
  }
  return arrays;
}

function endLine(answer: JobSummaryResponse): string {
  const job = terminalSafeDeep(answer);
  return `${job.id} (${arrayName(job)}): ${job.state}${job.reason === undefined ? '' : ` (${job.reason})`}`;
}

function summary(jobs: readonly JobSummaryResponse[]): string {
  const counts = new Map<string, number>();
  for (const j of jobs) counts.set(j.state, (counts.get(j.state) ?? 0) + 1);
  return `${jobs.length} jobs ended: ${[...counts].map(([state, n]) => `${n} ${state}`).join(', ')}`;
}
