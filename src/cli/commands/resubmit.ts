import type { Command } from 'commander';
import { isFinalJobState } from '../../controller/state/lifecycle.js';
import { ValidationError } from '../../core/validation.js';
import { arrayMembers } from '../array-members.js';
import { requireJobIds } from '../job-id-arguments.js';
import {
  addConnectionOptions,
  FleetwiseClient,
  type ConnectionOptions,
  type JobDocumentResponse,
  type JobSummaryResponse,
} from '../client.js';
import { inSubmissionOrder, keptDependencies, withRenamedDependencies } from '../resubmission.js';
import { formatIdList } from '../table.js';
import { arrayName } from './job.js';

interface ResubmitOptions extends ConnectionOptions {
  readonly array?: boolean;
  readonly json?: boolean;
}

export function registerResubmit(program: Command): void {
  addConnectionOptions(
    program
      .command('resubmit')
      .description(
        'run ended jobs again as new jobs, with the specs they were submitted with; a job waiting for another ' +
          'resubmitted with it waits for the new one',
      )
      .argument('<id...>', 'job ids, e.g. job-7 (jobs that have ended)')
      .option(
        '--array',
        'each id stands for the jobs of its array that ended without succeeding (each runs again with its index)',
      )
      .option('--json', 'print {"from": …, "id": …} per job (one JSON object per line) instead of text'),
  ).action(async (ids: string[], options: ResubmitOptions) => {
    requireJobIds(ids, 'arguments');
    const client = FleetwiseClient.fromOptions(options);
    const chosen = options.array === true ? await failedOfArrays(client, ids) : await endedJobs(client, ids);
    if (chosen.length === 0)
      return void process.stdout.write(
        `nothing to resubmit: no job of ${ids.length === 1 ? 'the array' : 'these arrays'} ended without succeeding\n`,
      );
    // Old id → new. Each job goes after the ones it names (they were submitted before it), so whatever it waits for
    // among these is renamed by the time it goes.
    const renamed = new Map<string, string>();
    const resubmitted = new Set(chosen);
    for (const id of inSubmissionOrder(chosen)) {
      const job = await client.getJob(id);
      let again: JobSummaryResponse;
      try {
        again = await client.submitJob(withRenamedDependencies(job.spec, renamed));
      } catch (e) {
        throw new Error(`${id}: ${(e as Error).message}${refusalHint(job, resubmitted, renamed)}`, {
          cause: e,
        });
      }
      renamed.set(id, again.id);
      if (options.json === true)
        process.stdout.write(
          `${JSON.stringify({ from: id, id: again.id, name: again.name, team: again.team, state: again.state, ...(again.array === undefined ? {} : { array: again.array }) })}\n`,
        );
      else process.stdout.write(`${id} (${arrayName(job)}, ${job.state}) → ${again.id}: ${again.state}\n`);
    }
  });
}

/** What to say after the controller refused a job: what was already submitted, and which of its waits it kept. */
function refusalHint(
  job: JobDocumentResponse,
  resubmitted: ReadonlySet<string>,
  renamed: ReadonlyMap<string, string>,
): string {
  const lines: string[] = [];
  if (renamed.size > 0)
    lines.push(`already resubmitted: ${[...renamed].map(([from, to]) => `${from} → ${to}`).join(', ')}`);
  const kept = keptDependencies(job.spec, resubmitted);
  if (kept.length > 0)
    lines.push(
      `${job.id} waits for ${formatIdList(kept)}, not resubmitted with it: name ${kept.length === 1 ? 'it' : 'them'} too to run ${kept.length === 1 ? 'it' : 'them'} again first`,
    );
  return lines.length === 0 ? '' : `\n${lines.join('\n')}`;
}

/** The jobs named, each checked to have ended (a job still queued or running would run twice). */
async function endedJobs(client: FleetwiseClient, ids: readonly string[]): Promise<string[]> {
  const problems: string[] = [];
  for (const id of new Set(ids)) {
    const job = await client.getJob(id);
    if (!isFinalJobState(job.state))
      problems.push(
        `${id} (${arrayName(job)}) is ${job.state}: it runs again once it has ended (or cancel it first)`,
      );
  }
  if (problems.length > 0) throw new ValidationError('arguments', problems);
  return [...new Set(ids)];
}

/** The jobs of the arrays the ids belong to that ended without succeeding; those not yet ended are left alone. */
async function failedOfArrays(client: FleetwiseClient, ids: readonly string[]): Promise<string[]> {
  const chosen = new Set<string>();
  const running: string[] = [];
  for (const id of ids)
    for (const member of await arrayMembers(client, id)) {
      if (!isFinalJobState(member.state)) running.push(member.id);
      else if (member.state !== 'succeeded') chosen.add(member.id);
    }
  if (running.length > 0)
    process.stderr.write(`left alone, not ended yet: ${formatIdList([...new Set(running)])}\n`);
  return [...chosen];
}
