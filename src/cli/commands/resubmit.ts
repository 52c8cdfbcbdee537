import type { Command } from 'commander';
import { isFinalJobState } from '../../controller/state/lifecycle.js';
import { ValidationError } from '../../core/validation.js';
import { arrayMembers } from '../array-members.js';
import { FleetwiseClient, type SubmittedJob } from '../client.js';
import { addConnectionOptions, type ConnectionOptions } from '../client-connection.js';
import { ApiError, failureWithLines, NamedRefusal } from '../client-errors.js';
import type { JobDocumentResponse } from '../api-responses.js';
import { requireJobIds } from '../job-id-arguments.js';
import { readJobs } from '../job-reads.js';
import {
  inSubmissionOrder,
  keptDependencies,
  resubmissionKey,
  withRenamedDependencies,
} from '../resubmission.js';
import { formatIdList } from '../table.js';
import { arrayName } from './job.js';
import { sayResending } from './submit.js';
import { terminalSafe } from '../terminal-text.js';

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
        'an id of an array stands for its jobs that ended without succeeding (each runs again with its index)',
      )
      .option('--json', 'print {"from": …, "id": …} per job (one JSON object per line) instead of text'),
  ).action(async (ids: string[], options: ResubmitOptions) => {
    requireJobIds(ids, 'arguments');
    const client = FleetwiseClient.fromOptions(options);
    const { chosen, read, leftAlone } = await chosenJobs(client, ids, options.array === true);
    // Under --json stderr holds only the error, one JSON object, and stdout a line per job resubmitted: an array's
    // jobs not ended yet are not among them, as the --array rule chooses (its succeeded ones are not either).
    if (leftAlone.length > 0 && options.json !== true)
      process.stderr.write(`left alone, not ended yet: ${formatIdList(leftAlone)}\n`);
    if (chosen.length === 0) {
      // Under --json no line is the answer: nothing was resubmitted.
      if (options.json !== true)
        process.stderr.write('nothing to resubmit: no job of these arrays ended without succeeding\n');
      return;
    }
    // The views of jobs named outright were read to choose them; an array's jobs are read now, for their specs.
    const unread = chosen.filter((id) => !read.has(id));
    const views = new Map([...read, ...(await readJobs(client, unread)).map((j) => [j.id, j] as const)]);
    const jobs = inSubmissionOrder(chosen).map((id) => views.get(id) as JobDocumentResponse);
    // Everything is checked before anything is submitted, so a refusal leaves nothing half done.
    await refuseUnmetDependencies(client, jobs);
    // Old id → new. Each job goes after the ones it names (they were submitted before it), so whatever it waits for
    // among these is renamed by the time it goes.
    const renamed = new Map<string, string>();
    for (const job of jobs) {
      let rerun: Rerun;
      try {
        rerun = await rerunOf(
          client,
          job,
          withRenamedDependencies(job.spec, renamed),
          // Under --json stderr holds only the error, one JSON object: a resend is not told.
          options.json === true ? undefined : sayResending(job.id),
        );
      } catch (e) {
        const done = [...renamed].map(([from, to]) => `${from} → ${to}`);
        const added = done.length === 0 ? [] : [`already resubmitted: ${formatIdList(done)}`];
        // The controller's refusal keeps its status, reason and details apart for --json.
        if (e instanceof ApiError) throw new NamedRefusal(job.id, e, e.details, added);
        throw failureWithLines(`${job.id}: `, e, added);
      }
      const { again, failedBefore, gaveUp } = rerun;
      renamed.set(job.id, again.id);
      const before = again.replayed === true && !again.resent;
      // Its line under --json says so: `replayed`, an ended `state` and the reruns before in `failedBefore`.
      if (gaveUp && options.json !== true)
        process.stderr.write(
          `${job.id}: its last ${MAX_RERUNS_FOLLOWED} reruns ended without succeeding; not rerun again (resubmit ${again.id} to)\n`,
        );
      if (options.json === true)
        process.stdout.write(
          `${JSON.stringify({ from: job.id, id: again.id, name: again.name, team: again.team, state: again.state, ...(again.array === undefined ? {} : { array: again.array }), ...(before ? { replayed: true } : {}), ...(failedBefore.length === 0 ? {} : { failedBefore }) })}\n`,
        );
      else
        process.stdout.write(
          terminalSafe(
            `${job.id} (${arrayName(job)}, ${job.state}) → ${again.id}: ${again.state}` +
              `${failedBefore.length === 0 ? '' : ` (its earlier rerun ${formatIdList(failedBefore)} ended without succeeding)`}` +
              `${before ? ' (resubmitted before)' : ''}\n`,
          ),
        );
    }
  });
}

/** A job's rerun, and the reruns of it made before that ended without succeeding, oldest first. */
interface Rerun {
  readonly again: SubmittedJob;
  readonly failedBefore: readonly string[];
  /** `again` ended without succeeding too, after MAX_RERUNS_FOLLOWED before it: not rerun again. */
  readonly gaveUp: boolean;
}

/** The longest chain of earlier reruns followed (each ended without succeeding) before one more is made. */
const MAX_RERUNS_FOLLOWED = 100;

/**
 * Submit `spec`, the rerun of `job`, keyed by the job it reruns: a second run of this command (or a resend of a lost
 * answer) gets the rerun made the first time, never another. When that earlier rerun has ended without succeeding,
 * it is run again in its turn (keyed by it), so running the command again reruns whatever of it has not succeeded
 * yet, as a first run does.
 */
async function rerunOf(
  client: FleetwiseClient,
  job: JobDocumentResponse,
  spec: Record<string, unknown>,
  onResend: ((reason: string, delayMs: number) => void) | undefined,
): Promise<Rerun> {
  const failedBefore: string[] = [];
  let of: { readonly id: string; readonly spec: Readonly<Record<string, unknown>> } = job;
  for (;;) {
    const again = await client.submitJob(spec, {
      idempotencyKey: resubmissionKey(of.id, of.spec, spec),
      ...(onResend === undefined ? {} : { onResend }),
    });
    const unsuccessful = isFinalJobState(again.state) && again.state !== 'succeeded';
    // A rerun just made (this command's own lost first send answered again) is queued, never ended: only a rerun
    // from before can have ended without succeeding.
    if (again.replayed !== true || !unsuccessful) return { again, failedBefore, gaveUp: false };
    if (failedBefore.length >= MAX_RERUNS_FOLLOWED) return { again, failedBefore, gaveUp: true };
    failedBefore.push(again.id);
    // Keyed by the rerun it reruns now, and by what that one waited for: as `fleetwise resubmit` of it would key it.
    of = await client.getJob(again.id);
  }
}

/**
 * The jobs to run again: each id itself, which must have ended (one still queued or running would run twice); with
 * `array`, an id of an array stands for its jobs that ended without succeeding (those not ended are left alone).
 */
async function chosenJobs(
  client: FleetwiseClient,
  ids: readonly string[],
  array: boolean,
): Promise<{
  readonly chosen: string[];
  readonly read: ReadonlyMap<string, JobDocumentResponse>;
  /** Jobs of the arrays named that have not ended yet. */
  readonly leftAlone: string[];
}> {
  const chosen = new Set<string>();
  const problems: string[] = [];
  const running = new Set<string>();
  const named = await readJobs(client, [...new Set(ids)]);
  for (const job of named) {
    if (array && job.array !== undefined) {
      if (chosen.has(job.id) || running.has(job.id)) continue; // another id of an array already read
      for (const member of await arrayMembers(client, job.id)) {
        if (!isFinalJobState(member.state)) running.add(member.id);
        else if (member.state !== 'succeeded') chosen.add(member.id);
      }
    } else if (!isFinalJobState(job.state))
      problems.push(
        `${job.id} (${arrayName(job)}) is ${job.state}: it runs again once it has ended (or cancel it first)`,
      );
    else chosen.add(job.id);
  }
  if (problems.length > 0) throw new ValidationError('arguments', problems);
  return { chosen: [...chosen], read: new Map(named.map((j) => [j.id, j])), leftAlone: [...running] };
}

/**
 * Refuse when a job waits for one not run again with it that ended without succeeding: the controller would refuse
 * that job, after the ones before it went.
 */
async function refuseUnmetDependencies(
  client: FleetwiseClient,
  jobs: readonly JobDocumentResponse[],
): Promise<void> {
  const resubmitted = new Set(jobs.map((j) => j.id));
  const kept = new Map(jobs.map((j) => [j.id, keptDependencies(j.spec, resubmitted)]));
  const states = new Map(
    (await readJobs(client, [...new Set([...kept.values()].flat())])).map((d) => [d.id, d.state]),
  );
  const problems = jobs.flatMap((job) => {
    const unmet = (kept.get(job.id) ?? []).filter((id) => {
      const state = states.get(id);
      return state !== undefined && isFinalJobState(state) && state !== 'succeeded';
    });
    return unmet.length === 0
      ? []
      : [
          `${job.id} waits for ${formatIdList(unmet)}, which ended without succeeding and ${unmet.length === 1 ? 'is' : 'are'} ` +
            `not resubmitted with it: name ${unmet.length === 1 ? 'it' : 'them'} too to run ${unmet.length === 1 ? 'it' : 'them'} again first`,
        ];
  });
  if (problems.length > 0) throw new ValidationError('arguments', problems);
}
