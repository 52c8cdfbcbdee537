import { createInterface } from 'node:readline/promises';
import type { Command } from 'commander';
import { LIVE_JOB_STATES } from '../../controller/state/lifecycle.js';
import { ValidationError } from '../../core/validation.js';
import { FleetwiseClient } from '../client.js';
import { addConnectionOptions, type ConnectionOptions } from '../client-connection.js';
import { ApiError, failureWithLines } from '../client-errors.js';
import type { JobSummaryResponse } from '../api-responses.js';
import { requireJobIds } from '../job-id-arguments.js';
import { readJobs } from '../job-reads.js';
import { printJson } from '../table.js';
import { terminalSafe } from '../terminal-text.js';

interface CancelOptions extends ConnectionOptions {
  readonly json?: boolean;
  readonly all?: boolean;
  readonly team?: string;
  readonly yes?: boolean;
  readonly array?: boolean;
}

async function confirm(question: string): Promise<boolean> {
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    return /^y(es)?$/i.test((await rl.question(question)).trim());
  } finally {
    rl.close();
  }
}

/**
 * The error of a cancel that failed after others went through (the job went away since it was checked, the controller
 * stopped answering), naming the jobs already cancelled: as a detail of the controller's answer (so --json's error
 * lists them too), else on a line of its own.
 */
function withAlreadyCancelled(error: unknown, answered: readonly JobSummaryResponse[]): unknown {
  const done = answered.filter((j) => j.state === 'cancelled').map((j) => j.id);
  if (done.length === 0) return error;
  const note = `already cancelled: ${done.join(', ')}`;
  if (error instanceof ApiError) return error.withDetailsAdded([note]);
  return failureWithLines('', error, [note]);
}

export function registerCancel(program: Command): void {
  addConnectionOptions(
    program
      .command('cancel')
      .description('cancel jobs: their tasks stop and their instances are freed at the next round')
      .argument('[id...]', 'job ids, e.g. job-7')
      .option('--all', "every job not yet ended that the token sees (a team token: its team's)")
      .option('--team <team>', 'with --all: only this team (admin token)')
      .option('-y, --yes', 'with --all: do not ask for confirmation on a terminal')
      .option('--array', 'cancel the whole array each id belongs to (its jobs not yet ended)')
      .option(
        '--json',
        'print the jobs as they stand after the cancel as a JSON array (one already ended keeps the state it ended ' +
          'in; --array: only the jobs it cancelled)',
      ),
  ).action(async (ids: string[], options: CancelOptions) => {
    if (options.all === true && ids.length > 0)
      throw new ValidationError('arguments', ['--all: give job ids or --all, not both']);
    if (options.all !== true && ids.length === 0)
      throw new ValidationError('arguments', ['id: give the job ids to cancel, or --all']);
    if (options.all !== true && options.team !== undefined)
      throw new ValidationError('arguments', ['--team: only with --all']);
    if (options.all === true && options.array === true)
      throw new ValidationError('arguments', [
        '--array: give the ids of jobs of the arrays to cancel, not --all',
      ]);
    // An id named twice is one job: cancelled, printed and listed once.
    ids = [...new Set(ids)];
    const client = FleetwiseClient.fromOptions(options);
    let scope = '';
    if (options.array === true) {
      // Each id stands for its whole array; the controller cancels its jobs not yet ended. Every id is checked to be
      // of an array first, so a wrong one does not leave the arrays before it cancelled.
      requireJobIds(ids, 'arguments');
      const alone = (await Promise.all(ids.map((id) => client.getJob(id)))).filter(
        (j) => j.array === undefined,
      );
      if (alone.length > 0)
        throw new ValidationError(
          'arguments',
          alone.map(
            (j) => `${j.id} (${j.name}) is not a job of an array: cancel it by its id, without --array`,
          ),
        );
      const cancelled = new Map<string, JobSummaryResponse>();
      for (const id of ids) for (const job of await client.cancelArray(id)) cancelled.set(job.id, job);
      if (options.json === true) return printJson([...cancelled.values()]);
      if (cancelled.size === 0)
        return void process.stdout.write(
          `no jobs to cancel: every job of ${ids.length === 1 ? 'the array' : 'these arrays'} has ended\n`,
        );
      for (const job of cancelled.values())
        process.stdout.write(terminalSafe(`${job.id} (${job.name}): ${job.state}\n`));
      return;
    }
    if (options.all === true) {
      // The API scopes the list to a team token's team, so --all never reaches another team's jobs.
      const live = await client.listJobs({
        states: LIVE_JOB_STATES,
        ...(options.team === undefined ? {} : { team: options.team }),
      });
      ids = live.map((j) => j.id);
      if (ids.length === 0) {
        if (options.json === true) printJson([]);
        else
          process.stdout.write(
            `no jobs to cancel: none ${options.team === undefined ? 'that this token sees' : `of team ${options.team}`} is queued or running\n`,
          );
        return;
      }
      const teams = [...new Set(live.map((j) => j.team))].sort();
      scope = terminalSafe(`of ${teams.length === 1 ? 'team' : 'teams'} ${teams.join(', ')}`);
      if (options.yes !== true && process.stdin.isTTY && process.stderr.isTTY) {
        const go = await confirm(`cancel ${ids.length} job(s) ${scope} (${ids.join(', ')})? [y/N] `);
        if (!go) throw new Error('not cancelled');
      }
    } else {
      // Every id is checked before any is cancelled, so a wrong or missing one does not leave the jobs before it
      // cancelled.
      requireJobIds(ids, 'arguments');
      await readJobs(client, ids);
    }
    // Each job as the controller answered its cancel: cancelled, or as it ended if it had already (a cancel of an
    // ended job changes nothing), as the text lines and --json both show it.
    const answered: JobSummaryResponse[] = [];
    for (const id of ids) {
      let job: JobSummaryResponse;
      try {
        job = await client.cancelJob(id);
      } catch (e) {
        throw withAlreadyCancelled(e, answered);
      }
      answered.push(job);
      if (options.json !== true)
        process.stdout.write(terminalSafe(`${job.id} (${job.name}): ${job.state}\n`));
    }
    if (options.json === true) printJson(answered);
    else if (options.all === true) {
      // A job listed as live may have ended before its cancel arrived: it is answered in the state it ended in.
      const ended = answered.filter((j) => j.state !== 'cancelled').length;
      process.stdout.write(
        `cancelled ${answered.length - ended} job(s) ${scope}` +
          (ended === 0 ? '' : `; ${ended} had ended meanwhile`) +
          '\n',
      );
    }
  });
}
