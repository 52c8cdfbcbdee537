import type { Command } from 'commander';
import { z } from 'zod';
import { parseWith } from '../../core/validation.js';
import {
  addConnectionOptions,
  FleetwiseClient,
  type ConnectionOptions,
  type JobSummaryResponse,
} from '../client.js';
import { pollIntervalOption, sleep } from '../poll.js';
import { formatDollars, formatProgress, formatTable, formatTime, printJson } from '../table.js';
import { formatEta, formatQueue, queueFieldsOf } from './job.js';

interface JobsOptions extends ConnectionOptions {
  readonly json?: boolean;
  readonly state?: string;
  readonly team?: string;
  readonly watch?: boolean;
  readonly interval?: string;
}

const optionsSchema = z.object({ interval: pollIntervalOption });

/** A job with what it has cost so far (the controller's cost accounting); null when the controller has no figure. */
export type JobWithCost = JobSummaryResponse & { readonly cost: number | null };

/** The jobs and, from the controller's cost accounting, each one's cost so far. */
export async function jobsWithCost(
  client: FleetwiseClient,
  filter: { readonly states?: readonly string[]; readonly team?: string },
): Promise<JobWithCost[]> {
  const [jobs, costs] = await Promise.all([
    client.listJobs(filter),
    // A controller that cannot account costs still lists its jobs.
    client.costs().catch(() => undefined),
  ]);
  const byJob = new Map((costs?.byJob ?? []).map((line) => [line.id, line.cost]));
  return jobs.map((j) => ({ ...j, cost: costs === undefined ? null : (byJob.get(j.id) ?? 0) }));
}

function formatJobs(jobs: readonly JobWithCost[]): string {
  if (jobs.length === 0) return 'no jobs\n';
  // Most jobs never retry: the column appears only once one has.
  const retried = jobs.some((j) => (j.attempts ?? 1) > 1);
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
    jobs.map((j) => {
      const fields = queueFieldsOf(j);
      return [
        j.id,
        j.name,
        j.team,
        j.state,
        formatProgress(j.progress),
        j.migrations,
        ...(retried ? [`${j.attempts ?? 1}/${j.maxAttempts ?? 1}`] : []),
        j.cost === null ? '-' : formatDollars(j.cost),
        formatTime(j.submittedAtSeconds),
        formatQueue(fields),
        formatEta(fields),
      ];
    }),
  );
}

export function registerJobs(program: Command): void {
  addConnectionOptions(
    program
      .command('jobs')
      .description("list jobs with what each has cost so far (a team token lists its own team's)")
      .option('--state <states>', 'only these states, comma-separated (queued,starting,running,migrating,…)')
      .option('--team <team>', 'only this team (admin token)')
      .option('--json', 'print a JSON array of jobs (id, name, team, state, progress, cost, queue, eta, …)')
      .option('-w, --watch', 'redraw every --interval seconds until Ctrl-C (with --json: one array per line)')
      .option('--interval <seconds>', 'with --watch: seconds between redraws', '2'),
  ).action(async (options: JobsOptions) => {
    const { interval } = parseWith(optionsSchema, options, 'fleetwise jobs options');
    const client = FleetwiseClient.fromOptions(options);
    const filter = {
      ...(options.state === undefined ? {} : { states: options.state.split(',').map((s) => s.trim()) }),
      ...(options.team === undefined ? {} : { team: options.team }),
    };
    if (options.watch !== true) {
      const jobs = await jobsWithCost(client, filter);
      if (options.json === true) return printJson(jobs);
      return void process.stdout.write(formatJobs(jobs));
    }
    // Ctrl-C is how a watch ends: not an error.
    process.once('SIGINT', () => process.exit(0));
    const clear = process.stdout.isTTY ? '\x1b[H\x1b[2J' : '';
    let first = true;
    for (;;) {
      // A watch outlives a controller restart: a failed poll is shown and the next one retries. The first must
      // succeed, so a wrong token or address fails at once.
      const jobs = await jobsWithCost(client, filter).catch((e: unknown) => {
        if (first) throw e;
        return e as Error;
      });
      first = false;
      if (jobs instanceof Error) process.stderr.write(`fleetwise: ${jobs.message}\n`);
      else if (options.json === true) process.stdout.write(`${JSON.stringify(jobs)}\n`);
      else
        process.stdout.write(
          `${clear}every ${interval} s, Ctrl-C to stop: ${client.server} at ${formatTime(Date.now() / 1000)}\n\n` +
            `${formatJobs(jobs)}${clear === '' ? '\n' : ''}`,
        );
      await sleep(interval);
    }
  });
}
