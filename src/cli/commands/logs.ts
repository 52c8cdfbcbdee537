import type { Command } from 'commander';
import { z } from 'zod';
import { isFinalJobState, PLACED_TASK_STATES } from '../../controller/state/lifecycle.js';
import { parseWith } from '../../core/validation.js';
import { FleetwiseClient } from '../client.js';
import { addConnectionOptions, type ConnectionOptions } from '../client-connection.js';
import { requireJobIds } from '../job-id-arguments.js';
import { ApiError } from '../client-errors.js';
import { LogPartsPrinter, type LogPartSource } from '../log-parts-printer.js';
import type { JobDocumentResponse, JobSummaryResponse } from '../api-responses.js';
import { pollIntervalOption, ReadsThroughRestarts, sleep } from '../poll.js';
import { terminalSafe } from '../terminal-text.js';

interface LogsOptions extends ConnectionOptions {
  readonly follow?: boolean;
  readonly interval?: string;
}

const optionsSchema = z.object({ interval: pollIntervalOption });

/**
 * How long after its job ended a task may take to stop, beyond its checkpoint timeout: the stop reaches its worker at
 * the next heartbeat, which kills it, uploads the rest of its log and reports it stopped at the one after; a worker
 * that has gone silent is declared lost by then (the controller's workerHeartbeatTimeoutSeconds, 60 s by default),
 * which ends its tasks. Past it, following gives up on what is still to come rather than hang.
 */
const STOP_MARGIN_SECONDS = 90;

const checkpointTimeoutSchema = z.looseObject({
  checkpoint: z.looseObject({ timeoutSeconds: z.number() }).optional().catch(undefined),
});

/**
 * How long a job's tasks may take to stop once it ended: a stop under way when it ended (a move) may checkpoint for
 * the job's checkpoint timeout first; a cancel's stop kills at once.
 */
function stopBoundSeconds(job: JobDocumentResponse): number {
  const spec = checkpointTimeoutSchema.safeParse(job.spec);
  return (spec.success ? (spec.data.checkpoint?.timeoutSeconds ?? 0) : 0) + STOP_MARGIN_SECONDS;
}

/**
 * Tasks of a job that may still write output: those on an instance. An ended job's tasks run on until their workers
 * stop them, uploading the rest of their logs before they report it; a task never placed wrote nothing.
 */
function tasksStillRunning(job: JobDocumentResponse): number {
  return job.tasks.filter((t) => PLACED_TASK_STATES.includes(t.state)).length;
}

/** Why a job has no output yet, or none at all. */
export function noOutputReason(job: JobSummaryResponse): string {
  if (job.startedAtSeconds === undefined)
    return isFinalJobState(job.state)
      ? `${job.id} ended ${job.state} before it started${job.reason === undefined ? '' : ` (${job.reason})`}: it has no output`
      : `${job.id} has not started yet (${job.state}): no output so far; fleetwise job ${job.id} says why it waits`;
  return `${job.id} (${job.state}) has written no output${isFinalJobState(job.state) ? '' : ' yet'}`;
}

/** The controller serves logs only whole (one from before parts): 404 for the route, or 501. */
function servesOnlyWholeLogs(error: unknown): boolean {
  return error instanceof ApiError && (error.status === 404 || error.status === 501);
}

function partsOf(client: FleetwiseClient, id: string): LogPartSource {
  return {
    parts: async () => (await client.logParts(id)).parts,
    bytes: (part, from) => client.logBytes(id, part, from),
  };
}

/**
 * The controller serves a job's logs as one text: each run of a task is a part headed `==> key <==` (as `tail` heads
 * files), in start order. Following compares part by part, because an earlier part can still grow (another task of the
 * job) while a later one exists.
 */
export function splitLogParts(text: string): { key: string; body: string }[] {
  const parts: { key: string; body: string }[] = [];
  const header = /^==> (.+) <==\n/gm;
  let match: RegExpExecArray | null;
  let last: { key: string; start: number } | undefined;
  const leading = text.search(header);
  header.lastIndex = 0;
  if (leading !== 0 && text !== '')
    parts.push({ key: '', body: leading === -1 ? text : text.slice(0, leading) });
  while ((match = header.exec(text)) !== null) {
    if (last !== undefined) parts.push({ key: last.key, body: text.slice(last.start, match.index) });
    last = { key: match[1] ?? '', start: match.index + match[0].length };
  }
  if (last !== undefined) parts.push({ key: last.key, body: text.slice(last.start) });
  return parts;
}

/** Prints what is new in each part since the last call; a part's header when output switches to it. */
class LogFollower {
  private readonly printed = new Map<string, number>();
  private current: string | undefined;
  printedAnything = false;

  constructor(private readonly write: (text: string) => void) {}

  update(text: string): void {
    for (const { key, body } of splitLogParts(text)) {
      const seen = this.printed.get(key) ?? 0;
      if (body.length <= seen) continue;
      if (this.current !== key && key !== '') this.write(`==> ${key} <==\n`);
      this.current = key;
      this.write(body.slice(seen));
      this.printed.set(key, body.length);
      this.printedAnything = true;
    }
  }
}

export function registerLogs(program: Command): void {
  addConnectionOptions(
    program
      .command('logs')
      .description("print a job's task logs (collected by the worker agent)")
      .argument('<id>', 'job id, e.g. job-7')
      .option('-f, --follow', 'keep printing new output until the job ends')
      .option('--interval <seconds>', 'with --follow: seconds between polls', '2'),
  ).action(async (id: string, options: LogsOptions) => {
    // Refused here as bad input, as cancel and wait refuse it, rather than as the controller's 404 (or no answer).
    requireJobIds([id], 'arguments');
    const { interval } = parseWith(optionsSchema, options, 'fleetwise logs options');
    const client = FleetwiseClient.fromOptions(options);
    const write = (text: string): void => void process.stdout.write(text);
    if (options.follow !== true) {
      // Streamed as the controller reads it (one listing of the store, however long the log): each part it sends
      // ends with a newline.
      const bytes = await client.writeLogs(id, (chunk) => void process.stdout.write(chunk));
      if (bytes === 0) process.stderr.write(`${terminalSafe(noOutputReason(await client.getJob(id)))}\n`);
      return;
    }
    // Only what is new in each part is fetched; a controller that serves logs only whole is followed the old way.
    const printer = new LogPartsPrinter(write);
    const follower = new LogFollower(write);
    let wholeOnly = false;
    let toldWaiting = false;
    /** Until when (ms) the output of an ended job's tasks still stopping is waited for, once it is seen so. */
    let stoppingUntilMs: number | undefined;
    const reads = new ReadsThroughRestarts();
    for (;;) {
      // The state first: output written before the job ended is then in the logs read after it. A controller
      // restarting meanwhile is waited for.
      const read = await reads.read(async () => {
        const job = await client.getJob(id);
        if (!wholeOnly)
          try {
            await printer.update(partsOf(client, id));
            return job;
          } catch (e) {
            if (!servesOnlyWholeLogs(e)) throw e;
            wholeOnly = true;
          }
        follower.update(await client.logs(id));
        return job;
      });
      if (read === undefined) {
        await sleep(interval);
        continue;
      }
      const job = read;
      if (isFinalJobState(job.state)) {
        // The job ends at once (a cancel) while its tasks stop only when their workers have stopped them: their last
        // output comes with their stop, so it is followed until every task has stopped, read above after the state.
        const running = tasksStillRunning(job);
        if (running > 0) {
          if (stoppingUntilMs === undefined) {
            stoppingUntilMs = Date.now() + stopBoundSeconds(job) * 1000;
            process.stderr.write(
              `${terminalSafe(`${job.id} ${job.state}`)}; following the last output of its ${running} task(s) still stopping\n`,
            );
          }
          if (Date.now() < stoppingUntilMs) {
            await sleep(interval);
            continue;
          }
          process.stderr.write(
            `${terminalSafe(job.id)}: ${running} task(s) had not stopped ${stopBoundSeconds(job)} s after it ended: ` +
              `output after this is not shown (fleetwise logs ${terminalSafe(job.id)} prints it once uploaded)\n`,
          );
        }
        printer.finish();
        if (!printer.printedAnything && !follower.printedAnything)
          process.stderr.write(`${terminalSafe(noOutputReason(job))}\n`);
        process.stderr.write(
          `${terminalSafe(`${job.id} ${job.state}${job.reason === undefined ? '' : `: ${job.reason}`}`)}\n`,
        );
        return;
      }
      if (job.startedAtSeconds === undefined && !toldWaiting) {
        process.stderr.write(`${terminalSafe(noOutputReason(job))}; waiting\n`);
        toldWaiting = true;
      }
      await sleep(interval);
    }
  });
}
