import { NEVER_UNDER_CAPS_BASIS } from '../../controller/queue-records.js';
import { isFinalJobState } from '../../controller/state/lifecycle.js';
import { JOB_STATES, type JobState } from '../../controller/state-store.js';
import { ValidationError } from '../../core/validation.js';
import type { Command } from 'commander';
import { z } from 'zod';
import { FleetwiseClient } from '../client.js';
import { addConnectionOptions, type ConnectionOptions } from '../client-connection.js';
import { requireJobIds } from '../job-id-arguments.js';
import type { JobDocumentResponse, JobSummaryResponse, LatestWait } from '../api-responses.js';
import { durationText } from '../../core/duration.js';
import { formatIdList, formatProgress, formatTable, formatTime, printJson } from '../table.js';
import { stateCounts } from '../array-rows.js';
import { terminalSafeDeep } from '../terminal-text.js';

interface JobOptions extends ConnectionOptions {
  readonly json?: boolean;
  readonly markUnsuccessful?: boolean;
  readonly stage?: string;
  readonly reason?: string;
}

// The queue layer's fields of the job views. The client's schemas let unknown fields through; these are
// read leniently so a controller without the queue layer still prints the rest.
const etaSchema = z.object({
  startSeconds: z.number().nullable(),
  completionSeconds: z.number().nullable(),
  completesAfterSeconds: z.number().optional(),
  computedAtSeconds: z.number(),
  basis: z.string(),
});
const queueSchema = z.object({
  classId: z.string(),
  status: z.enum(['admitted', 'waiting']),
  position: z.number().nullable(),
  reason: z.string().nullable(),
  detail: z.string(),
});
const queueFieldsSchema = z.object({
  queue: queueSchema.nullable().optional().catch(undefined),
  eta: etaSchema.nullable().optional().catch(undefined),
  etaPending: z.boolean().optional().catch(undefined),
  waitingFor: z.array(z.string()).optional().catch(undefined),
  submissionEta: etaSchema.nullable().optional().catch(undefined),
  predictionError: z
    .object({ errorSeconds: z.number(), errorPercent: z.number().nullable() })
    .nullable()
    .optional()
    .catch(undefined),
});
export type QueueFields = z.output<typeof queueFieldsSchema>;

export function queueFieldsOf(job: unknown): QueueFields {
  const parsed = queueFieldsSchema.safeParse(job);
  return parsed.success ? parsed.data : {};
}

// Read leniently too: a controller that predates submission warnings sends none.
const warningsSchema = z.object({ warnings: z.array(z.string()).catch([]) });

// Runs its instance or worker ended (controller/explain.ts jobRestarts); none from a controller that does not say.
const restartsSchema = z.object({
  restarts: z.array(z.object({ atSeconds: z.number(), cause: z.string() })).catch([]),
});

/** The job's restarts, oldest first, or none. */
export function restartsOf(job: unknown): { atSeconds: number; cause: string }[] {
  const parsed = restartsSchema.safeParse(job);
  return parsed.success ? parsed.data.restarts : [];
}

/** Restarts named in the job view; more are counted. */
const RESTARTS_NAMED = 3;

/**
 * `restarts   1 (inst-4 was lost: worker stopped heartbeating)`: runs its instance or worker ended, the newest named;
 * none for a job that never restarted.
 */
export function restartLines(restarts: readonly { cause: string }[]): string[] {
  if (restarts.length === 0) return [];
  const named = restarts.slice(-RESTARTS_NAMED).map((r) => r.cause);
  const earlier = restarts.length - named.length;
  return [
    keyValue(
      'restarts',
      `${restarts.length} (${named.join('; ')}${earlier === 0 ? '' : `; ${earlier} earlier`})`,
    ),
  ];
}

/** The job's warnings (how it runs here that its submitter may not expect), or none. */
export function warningsOf(job: unknown): string[] {
  const parsed = warningsSchema.safeParse(job);
  return parsed.success ? parsed.data.warnings : [];
}

/** `small #2 (caps)`, `small admitted`, `after job-3` (held for its dependencies, summarised), or `-`. */
export function formatQueue(fields: QueueFields): string {
  if (fields.waitingFor !== undefined && fields.waitingFor.length > 0)
    return `after ${formatIdList(fields.waitingFor)}`;
  const q = fields.queue;
  if (q === undefined || q === null) return '-';
  if (q.status === 'admitted') return `${q.classId} admitted`;
  return `${q.classId} ${q.position === null ? '' : `#${q.position} `}(${q.reason ?? 'waiting'})`;
}

/** Where the job view's values start: its keys are padded to it. */
const VALUE_COLUMN = 11;

/**
 * A line of the job view: `key` padded to the value column, then `value`, its further lines indented to that column
 * (a reason can span lines: a failed task's last output is one), so the keys stay alone on the left.
 */
export function keyValue(key: string, value: string): string {
  return `${key.padEnd(VALUE_COLUMN - 1)} ${value.split(/\r?\n/).join(`\n${' '.repeat(VALUE_COLUMN)}`)}`;
}

/**
 * An earlier attempt's failure in the job view: when, which task, its exit code, then the task's reason under the
 * value column. A reason that already names the exit code (a worker's: `exit code 7; last output: …`) says it alone.
 */
export function attemptFailureText(failure: JobDocumentResponse['attemptFailures'][number]): string {
  const { attempt, atSeconds, taskId, exitCode, reason } = failure;
  const named = exitCode !== undefined && new RegExp(`\\bexit code ${exitCode}\\b`).test(reason);
  const code = exitCode === undefined || named ? '' : `, exit code ${exitCode}`;
  return `attempt ${attempt}  failed ${formatTime(atSeconds)}: task ${taskId}${code}\n${keyValue('', reason)}`;
}

/** What the views' ETAs carry that the CLI prints. */
export interface EtaFields {
  readonly completionSeconds: number | null;
  readonly completesAfterSeconds?: number | undefined;
  readonly computedAtSeconds: number;
  readonly basis?: string | undefined;
}

/**
 * The predicted completion time, `beyond 30 days` when the prediction stopped short of it, `never` for a job the caps
 * can never admit (or one held for it; its basis says so), or undefined.
 */
export function completionText(eta: EtaFields): string | undefined {
  if (eta.completionSeconds !== null) return formatTime(eta.completionSeconds);
  if (eta.basis?.startsWith(NEVER_UNDER_CAPS_BASIS) === true) return 'never';
  if (eta.completesAfterSeconds === undefined) return undefined;
  return `beyond ${durationText(eta.completesAfterSeconds - eta.computedAtSeconds)}`;
}

/** The predicted completion time, `beyond N days`, `pending` while the first prediction runs, or `-`. */
export function formatEta(fields: QueueFields): string {
  if ((fields.eta === undefined || fields.eta === null) && fields.etaPending === true) return 'pending';
  return (fields.eta === undefined || fields.eta === null ? undefined : completionText(fields.eta)) ?? '-';
}

/** A length of time, unsigned: where it says which way, the words around it do. */
function formatDuration(seconds: number): string {
  const s = Math.abs(seconds);
  return s < 120
    ? `${Math.round(s)} s`
    : s < 7200
      ? `${(s / 60).toFixed(1)} min`
      : `${(s / 3600).toFixed(2)} h`;
}

/** How far an ended job was from its submission prediction: "23.97 h earlier than predicted at submission (…)". */
export function predictionErrorText(err: { errorSeconds: number; errorPercent: number | null }): string {
  if (Math.round(Math.abs(err.errorSeconds)) === 0) return 'none: it ended as predicted at submission';
  const percent = err.errorPercent === null ? '' : ` (${err.errorPercent.toFixed(1)}% of the predicted JCT)`;
  return `${formatDuration(err.errorSeconds)} ${err.errorSeconds > 0 ? 'later' : 'earlier'} than predicted at submission${percent}`;
}

/**
 * The job's place in the queue as the job view says it: `class small, position 2 (class-share): …`, or for a wait
 * outside admission's reasons (held for capacity) `class small, waiting: <detail>`.
 */
export function queuePlaceText(q: NonNullable<QueueFields['queue']>): string {
  if (q.status === 'admitted') return `class ${q.classId}, admitted (${q.detail})`;
  const place = q.position === null ? 'waiting' : `position ${q.position}`;
  return `class ${q.classId}, ${place}${q.reason === null ? '' : ` (${q.reason})`}: ${q.detail}`;
}

/**
 * The queue and ETA lines; an ended job shows what was predicted at submission and how far off it was, no ETA. A job
 * with no place in the queue yet (held for capacity since its submission) says what the latest round kept it waiting
 * for.
 */
function etaLines(fields: QueueFields, ended: boolean, latestWait: LatestWait | null | undefined): string[] {
  const lines: string[] = [];
  const q = fields.queue;
  if (q !== undefined && q !== null) lines.push(keyValue('queue', queuePlaceText(q)));
  else if (!ended && latestWait !== undefined && latestWait !== null)
    lines.push(keyValue('queue', `waiting: ${latestWait.summary}`));
  const eta = fields.eta;
  if (ended) lines.push('eta        - (the job ended)');
  else if (eta !== undefined && eta !== null) {
    const start = eta.startSeconds === null ? '' : `, start ${formatTime(eta.startSeconds)}`;
    lines.push(
      `eta        ${completionText(eta) ?? 'unknown'}${start} (computed ${formatTime(eta.computedAtSeconds)})`,
      keyValue('basis', eta.basis),
    );
  } else if (fields.etaPending === true)
    lines.push('eta        pending (the first prediction is being computed)');
  else lines.push('eta        -');
  const first = fields.submissionEta;
  if (first !== undefined && first !== null)
    lines.push(
      `predicted  ${completionText(first) ?? 'unknown'} at submission (${first.basis.replace(/^at submission: /, '')})`,
    );
  const err = fields.predictionError;
  if (err !== undefined && err !== null) lines.push(`error      ${predictionErrorText(err)}`);
  return lines;
}

export function registerJob(program: Command): void {
  addConnectionOptions(
    program
      .command('job')
      .description(
        'show one job: state, progress, queue place, ETA, migrations, attempts and how each failed, instances and tasks',
      )
      .argument('<id>', 'job id, e.g. job-7')
      .option('--json', 'print the job document as JSON')
      .option(
        '--mark-unsuccessful',
        'end the job as unsuccessful (stopped at a stage, e.g. a diverged trial): its capacity is freed',
      )
      .option('--stage <n>', 'with --mark-unsuccessful: the stage (1-based) it was stopped at')
      .option('--reason <text>', 'with --mark-unsuccessful: why, shown in the job view'),
  ).action(async (id: string, options: JobOptions) => {
    // Refused here as bad input, as cancel and wait refuse it, rather than as the controller's 404 (or no answer).
    requireJobIds([id], 'arguments');
    const client = FleetwiseClient.fromOptions(options);
    if (options.markUnsuccessful === true) {
      let stage: number | undefined;
      if (options.stage !== undefined) {
        // Decimal digits only: Number() would also take 0x2, 1e0 and " 2".
        stage = /^\d+$/.test(options.stage) ? Number(options.stage) : Number.NaN;
        if (!Number.isSafeInteger(stage) || stage < 1)
          throw new ValidationError('--stage', [`expected a stage number ≥ 1, got ${options.stage}`]);
      }
      const answer = await client.markUnsuccessful(id, {
        ...(stage === undefined ? {} : { stage }),
        ...(options.reason === undefined ? {} : { reason: options.reason }),
      });
      if (options.json === true) return printJson(answer);
      const ended = terminalSafeDeep(answer);
      return void process.stdout.write(
        `${ended.id} ${ended.state}${ended.reason === undefined ? '' : ` (${ended.reason})`}\n`,
      );
    }
    if (options.stage !== undefined || options.reason !== undefined)
      throw new ValidationError(options.stage !== undefined ? '--stage' : '--reason', [
        'goes with --mark-unsuccessful',
      ]);
    const document = await client.getJob(id);
    if (options.json === true) return printJson(document);
    const job = terminalSafeDeep(document);
    // A job that reports no iterations and declares none shows no count, as `fleetwise jobs` does.
    const progress =
      job.progress.total === null
        ? job.progress.completed > 0
          ? `${job.progress.completed} iterations`
          : '-'
        : `${job.progress.completed}/${job.progress.total} iterations (${formatProgress(job.progress)})`;
    const lines = [
      `job        ${job.id} (${arrayName(job)}${job.array === undefined ? '' : `, of an array of ${job.array.size}`})`,
      `team       ${job.team}`,
      keyValue('state', `${job.state}${job.reason === undefined ? '' : ` (${job.reason})`}`),
      `progress   ${progress}`,
      `migrations ${job.migrations}`,
      ...restartLines(restartsOf(job)),
      `attempts   attempt ${job.attempts ?? 1} of ${job.maxAttempts ?? 1}`,
      ...job.attemptFailures.map(attemptFailureText),
      `submitted  ${formatTime(job.submittedAtSeconds)}`,
      `started    ${formatTime(job.startedAtSeconds)}`,
      `finished   ${formatTime(job.finishedAtSeconds)}`,
      ...dependencyLines(job, Date.now() / 1000),
      ...coStartLines(job.coStart ?? null, job.taskCount),
      ...etaLines(queueFieldsOf(job), isFinalJobState(job.state), job.latestWait),
      ...warningsOf(job).map((w) => keyValue('warning', w)),
    ];
    process.stdout.write(`${lines.join('\n')}\n\n`);
    process.stdout.write(
      formatTable(
        ['TASK', 'NAME', 'STATE', 'INSTANCE'],
        job.tasks.map((t) => [t.id, t.name, t.state, t.instanceId ?? '-']),
      ),
    );
    if (job.instances.length > 0) {
      process.stdout.write('\n');
      process.stdout.write(
        formatTable(
          ['INSTANCE', 'CLOUD ID', 'TYPE', 'STATE', 'ZONE', 'TASKS'],
          job.instances.map((i) => [
            i.id,
            i.cloudId ?? '-',
            i.typeName,
            i.state,
            i.availabilityZone ?? '-',
            i.taskIds.join(','),
          ]),
        ),
      );
    }
  });
}

/** Dependencies named one by one in the job view; more are summarised (an array may wait for all of another). */
const DEPENDENCIES_NAMED = 4;

/**
 * `depends on job-3 (succeeded), job-4 (running, predicted to end …)`, or for many, their ids summarised, how many are
 * in each state and the latest predicted end; and while one has not succeeded, that the job waits for it and the
 * earliest it can start by their predictions (when that is still ahead).
 */
function dependencyLines(job: JobDocumentResponse, nowSeconds: number): string[] {
  if (job.dependencies.length === 0) return [];
  const lines = [`depends on ${dependenciesText(job.dependencies)}`];
  const waiting = job.dependencies.filter((d) => d.state !== 'succeeded');
  if (job.state === 'queued' && waiting.length > 0) {
    const bound = job.startsNoEarlierThanSeconds;
    const start =
      bound !== null && bound > nowSeconds
        ? ` (by ${predictionsOf(waiting.length)} it starts no earlier than ${formatTime(bound)})`
        : '';
    lines.push(`waiting    for ${formatIdList(waiting.map((d) => d.id))} to succeed${start}`);
  }
  return lines;
}

function dependenciesText(dependencies: JobDocumentResponse['dependencies']): string {
  if (dependencies.length <= DEPENDENCIES_NAMED)
    return dependencies
      .map((d) => {
        const predicted =
          d.predictedCompletionSeconds === undefined
            ? ''
            : `, predicted to end ${formatTime(d.predictedCompletionSeconds)}`;
        return `${d.id} (${d.state ?? 'unknown'}${predicted})`;
      })
      .join(', ');
  const states = dependencies.flatMap((d) => (isJobState(d.state) ? [d.state] : []));
  const unknown = dependencies.length - states.length;
  const predicted = dependencies.flatMap((d) =>
    d.predictedCompletionSeconds === undefined ? [] : [d.predictedCompletionSeconds],
  );
  return (
    `${formatIdList(dependencies.map((d) => d.id))}: ${stateCounts(states)}` +
    `${unknown === 0 ? '' : `${states.length === 0 ? '' : ', '}${unknown} unknown`}` +
    `${predicted.length === 0 ? '' : `; the last predicted to end ${formatTime(predicted.reduce((a, b) => Math.max(a, b)))}`}`
  );
}

function isJobState(state: string | null): state is JobState {
  return state !== null && (JOB_STATES as readonly string[]).includes(state);
}

/** `its prediction` for one dependency, `their predictions` for more. */
export function predictionsOf(dependencies: number): string {
  return dependencies === 1 ? 'its prediction' : 'their predictions';
}

/**
 * A multi-task job's start: held tasks while it waits, then its start skew and barrier-idle cost, which start of the
 * job they are of, or the barrier-idle cost alone of holds that ended without a start; and, when the job started more
 * than once or held tasks besides, its barrier-idle cost over all of them (what /metrics counted for it). Tasks held
 * again after a release (the job moved) show as held: the release shown otherwise is of a start that is over.
 */
export function coStartLines(coStart: JobDocumentResponse['coStart'], taskCount: number): string[] {
  if (coStart === null || coStart === undefined) return [];
  const lines: string[] = [];
  if (coStart.readyTaskIds.length > 0)
    lines.push(`co-start   ${coStart.readyTaskIds.length} of ${taskCount} tasks ready, held for the others`);
  else if (coStart.releasedAtSeconds !== undefined)
    lines.push(`co-start   released together ${formatTime(coStart.releasedAtSeconds)}`);
  if (coStart.startSkewSeconds !== undefined)
    lines.push(
      `start skew ${coStart.startSkewSeconds.toFixed(1)} s, barrier-idle $${(coStart.barrierIdleCost ?? 0).toFixed(4)}` +
        (coStart.start === undefined
          ? ''
          : ` (start ${coStart.start} of ${coStart.starts ?? coStart.start})`),
    );
  // Holds that ended without a start (a re-plan, a drained or lost instance, the job's end) cost all the same, and
  // have no skew to show beside them.
  else if (coStart.barrierIdleCost !== undefined)
    lines.push(`barrier-idle $${coStart.barrierIdleCost.toFixed(4)}, held without a start`);
  const total = coStart.totalBarrierIdleCost;
  const starts = coStart.starts ?? 0;
  // The lines above are of one start or hold: the total says what the others cost, unless it would repeat them.
  if (total !== undefined && (starts > 1 || total.toFixed(4) !== (coStart.barrierIdleCost ?? 0).toFixed(4)))
    lines.push(
      `barrier-idle $${total.toFixed(4)} in all (${starts} ${starts === 1 ? 'start' : 'starts'} and any holds ` +
        'that ended without one)',
    );
  return lines;
}

/** A job's name, with its index when it is one job of an array (`sweep[3]`). */
export function arrayName(job: Pick<JobSummaryResponse, 'name' | 'array'>): string {
  return job.array === undefined ? job.name : `${job.name}[${job.array.index}]`;
}
