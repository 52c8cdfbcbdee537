import type { Command } from 'commander';
import { ValidationError } from '../../core/validation.js';
import { z } from 'zod';
import { parseWith } from '../../core/validation.js';
import { isFinalJobState } from '../../controller/state/lifecycle.js';
import { JOB_STATES } from '../../controller/state-store.js';
import { FleetwiseClient, type JobListFilter } from '../client.js';
import { addConnectionOptions, type ConnectionOptions } from '../client-connection.js';
import type { JobSummaryResponse } from '../api-responses.js';
import { pollIntervalOption, ReadsThroughRestarts, sleep } from '../poll.js';
import { formatDollars, formatIdList, formatProgress, formatTable, formatTime, printJson } from '../table.js';
import { arrayName, completionText, formatEta, formatQueue, queueFieldsOf, type QueueFields } from './job.js';
import { groupArrays, stateCounts } from '../array-rows.js';
import { terminalSafe, terminalSafeDeep } from '../terminal-text.js';

interface JobsOptions extends ConnectionOptions {
  readonly json?: boolean;
  readonly state?: string;
  readonly team?: string;
  readonly all?: boolean;
  readonly endedSince?: string;
  readonly watch?: boolean;
  readonly interval?: string;
  readonly expand?: boolean;
}

const optionsSchema = z.object({ interval: pollIntervalOption });

/** What `fleetwise jobs` lists unless told otherwise: the work still to end and what ended in the last day. */
export const DEFAULT_ENDED_SINCE = '24h';

/** A job with what it has cost so far (the controller's cost accounting); null when the controller has no figure. */
export type JobWithCost = JobSummaryResponse & { readonly cost: number | null };

interface JobListing {
  readonly jobs: readonly JobWithCost[];
  /** Jobs the filter selects that ended before the window (not listed); undefined with --all. */
  readonly endedEarlier: number | undefined;
}

/** The jobs and, from the controller's cost accounting, each one's cost so far, read a page at a time. */
async function listJobs(client: FleetwiseClient, filter: JobListFilter): Promise<JobListing> {
  const page = await client.listAllJobs({ ...filter, withCost: true });
  return { jobs: page.jobs.map((j) => ({ ...j, cost: j.cost ?? null })), endedEarlier: page.endedEarlier };
}

function formatListing(
  { jobs, endedEarlier }: JobListing,
  endedSince: string | undefined,
  expand: boolean,
): string {
  const more =
    endedEarlier === undefined || endedEarlier === 0
      ? ''
      : `${endedEarlier} more ${endedEarlier === 1 ? 'job' : 'jobs'} ended before the window (--ended-since ${endedSince ?? ''}): --all lists every job\n`;
  if (jobs.length === 0) return `no jobs\n${more}`;
  return `${formatJobs(jobs, expand)}${more}`;
}

function formatJobs(listed: readonly JobWithCost[], expand: boolean): string {
  const jobs = terminalSafeDeep(listed);
  // Most jobs never retry: the column appears only once one has.
  const retried = jobs.some((j) => (j.attempts ?? 1) > 1);
  const rows = expand ? jobs.map((job) => ({ kind: 'job' as const, job })) : groupArrays(jobs);
  return formatTable(
    [
      'ID',
      'NAME',
      'TEAM',
      'STATE',
      'PROGRESS',
      'MIGRATIONS',
      ...(retried ? ['ATTEMPTS'] : []),
      'COST',
      'SUBMITTED',
      'QUEUE',
      'ETA',
    ],
    rows.map((row) => {
      if (row.kind === 'array') return arrayRow(row.jobs, retried);
      const j = row.job;
      const fields = queueFieldsOf(j);
      return [
        j.id,
        arrayName(j),
        j.team,
        j.state,
        formatProgress(j.progress),
        j.migrations,
        ...(retried ? [`${j.attempts ?? 1}/${j.maxAttempts ?? 1}`] : []),
        j.cost === null ? '-' : formatDollars(j.cost),
        formatTime(j.submittedAtSeconds),
        formatQueue(fields),
        // An ended job's last prediction is no estimate of anything any more.
        isFinalJobState(j.state) ? '-' : formatEta(fields),
      ];
    }),
  );
}

/** An array's jobs listed one after another, as one row: their span, states, summed progress, moves and cost. */
function arrayRow(jobs: readonly JobWithCost[], retried: boolean): (string | number)[] {
  const first = jobs[0] as JobWithCost;
  const last = jobs.at(-1) as JobWithCost;
  const totals = jobs.map((j) => j.progress.total);
  const live = jobs.filter((j) => !isFinalJobState(j.state));
  const liveFields = live.map(queueFieldsOf);
  const costs = jobs.map((j) => j.cost);
  return [
    `${first.id}…${last.id}`,
    `${first.name}[${first.array?.index ?? 0}–${last.array?.index ?? 0}]`,
    first.team,
    stateCounts(jobs.map((j) => j.state)),
    formatProgress({
      completed: jobs.reduce((sum, j) => sum + j.progress.completed, 0),
      total: totals.includes(null) ? null : (totals as number[]).reduce((a, b) => a + b, 0),
    }),
    jobs.reduce((sum, j) => sum + j.migrations, 0),
    ...(retried ? ['-'] : []),
    costs.includes(null) ? '-' : formatDollars((costs as number[]).reduce((a, b) => a + b, 0)),
    formatTime(first.submittedAtSeconds),
    arrayQueue(live.flatMap((j, i) => (j.state === 'queued' ? [liveFields[i] as QueueFields] : []))),
    arrayEta(liveFields),
  ];
}

/**
 * An array's queued jobs: `5 waiting` in the queue, `after job-3` while they are held for their dependencies (all they
 * wait for, summarised), `2 waiting, 3 after job-3` when both; `-` when none is queued.
 */
function arrayQueue(queued: readonly QueueFields[]): string {
  if (queued.length === 0) return '-';
  const waitsFor = new Set<string>();
  let held = 0;
  for (const fields of queued) {
    if (fields.waitingFor === undefined || fields.waitingFor.length === 0) continue;
    held += 1;
    for (const id of fields.waitingFor) waitsFor.add(id);
  }
  if (held === 0) return `${queued.length} waiting`;
  const after = `after ${formatIdList([...waitsFor])}`;
  return held === queued.length ? after : `${queued.length - held} waiting, ${held} ${after}`;
}

/**
 * When an array ends, as its jobs still to end say: `never` if one never will (the caps can never admit it, or it
 * waits for such a job), else `beyond …` if one completes past where its prediction stopped (the furthest such bound),
 * else `pending` while one's first prediction runs, else the latest predicted completion once every one has one.
 */
function arrayEta(live: readonly QueueFields[]): string {
  if (live.length === 0) return '-';
  const etas = live.flatMap((f) => (f.eta === undefined || f.eta === null ? [] : [f.eta]));
  if (etas.some((eta) => completionText(eta) === 'never')) return 'never';
  const beyond = etas
    .filter((eta) => eta.completionSeconds === null && eta.completesAfterSeconds !== undefined)
    .reduce<(typeof etas)[number] | undefined>(
      (furthest, eta) =>
        furthest === undefined || (eta.completesAfterSeconds ?? 0) > (furthest.completesAfterSeconds ?? 0)
          ? eta
          : furthest,
      undefined,
    );
  if (beyond !== undefined) return completionText(beyond) ?? '-';
  if (live.some((f) => formatEta(f) === 'pending')) return 'pending';
  // The array ends with its last job.
  const ends = etas.flatMap((eta) => (eta.completionSeconds === null ? [] : [eta.completionSeconds]));
  return ends.length < live.length ? '-' : formatTime(ends.reduce((a, b) => Math.max(a, b)));
}

/**
 * `--state queued,running`: each a job state, checked here so a mistake names the flag and the value (the controller
 * would refuse it too, naming only its query field).
 */
function stateOption(text: string): string[] {
  const states = text.split(',').map((s) => s.trim());
  const unknown = [...new Set(states.filter((s) => !(JOB_STATES as readonly string[]).includes(s)))];
  if (unknown.length > 0)
    throw new ValidationError(
      '--state',
      unknown.map((s) => `${JSON.stringify(s)}: not a job state; expected one of ${JOB_STATES.join(', ')}`),
    );
  return states;
}

export function registerJobs(program: Command): void {
  addConnectionOptions(
    program
      .command('jobs')
      .description(
        `list the jobs still to end and those that ended in the last ${DEFAULT_ENDED_SINCE}, with what each has cost so far (a team token lists its own team's)`,
      )
      .option('--state <states>', 'only these states, comma-separated (queued,starting,running,migrating,…)')
      .option('--team <team>', 'only this team (admin token)')
      .option(
        '--ended-since <time>',
        `list the jobs that ended since then, as epoch seconds, an ISO 8601 time (UTC unless it names an offset) or an age like 7d (default ${DEFAULT_ENDED_SINCE})`,
      )
      .option('--all', 'every job the controller has, however long ago it ended')
      .option(
        '--expand',
        "a row per job of an array (by default an array's jobs listed together are one row)",
      )
      .option('--json', 'print a JSON array of jobs (id, name, team, state, progress, cost, queue, eta, …)')
      .option(
        '-w, --watch',
        'redraw every --interval seconds until Ctrl-C (with --json: one array per line, ending on a failure other ' +
          'than the controller restarting)',
      )
      .option('--interval <seconds>', 'with --watch: seconds between redraws', '2'),
  ).action(async (options: JobsOptions) => {
    const { interval } = parseWith(optionsSchema, options, 'fleetwise jobs options');
    if (options.all === true && options.endedSince !== undefined)
      throw new ValidationError('--ended-since', ['--all lists every job: leave one of them out']);
    const states = options.state === undefined ? undefined : stateOption(options.state);
    const client = FleetwiseClient.fromOptions(options);
    // A long-lived controller has ended far more jobs than it runs: without --all the listing is current work.
    const endedSince = options.all === true ? undefined : (options.endedSince ?? DEFAULT_ENDED_SINCE);
    const filter: JobListFilter = {
      ...(states === undefined ? {} : { states }),
      ...(options.team === undefined ? {} : { team: options.team }),
      ...(endedSince === undefined ? {} : { endedSince }),
    };
    if (options.watch !== true) {
      const listing = await listJobs(client, filter);
      if (options.json === true) return printJson(listing.jobs);
      return void process.stdout.write(formatListing(listing, endedSince, options.expand === true));
    }
    // Ctrl-C is how a watch ends: not an error.
    process.once('SIGINT', () => process.exit(0));
    if (options.json === true) {
      // Under --json stderr holds only the error the command ends with (one JSON object): a controller restarting
      // is waited through unsaid, as `wait --json` does (the lines on stdout pause); any other failure ends it.
      const reads = new ReadsThroughRestarts(false);
      for (;;) {
        const listing = await reads.read(() => listJobs(client, filter));
        if (listing !== undefined) process.stdout.write(`${JSON.stringify(listing.jobs)}\n`);
        await sleep(interval);
      }
    }
    const clear = process.stdout.isTTY ? '\x1b[H\x1b[2J' : '';
    let first = true;
    for (;;) {
      // A watch outlives a controller restart: a failed poll is shown and the next one retries. The first must
      // succeed, so a wrong token or address fails at once.
      const listing = await listJobs(client, filter).catch((e: unknown) => {
        if (first) throw e;
        return e as Error;
      });
      first = false;
      if (listing instanceof Error) process.stderr.write(`fleetwise: ${terminalSafe(listing.message)}\n`);
      else
        process.stdout.write(
          `${clear}every ${interval} s, Ctrl-C to stop: ${client.server} at ${formatTime(Date.now() / 1000)}\n\n` +
            `${formatListing(listing, endedSince, options.expand === true)}${clear === '' ? '\n' : ''}`,
        );
      await sleep(interval);
    }
  });
}
