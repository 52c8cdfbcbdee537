import { z } from 'zod';
import { MARKETS } from '../core/market.js';
import type { Configuration, DecisionRecord } from '../scheduler/types.js';
import type { JobSpec } from './job-spec/spec.js';

/**
 * The controller's durable state (ARCHITECTURE.md "The two runtimes"): jobs, tasks, instances, intents, per-round
 * plans and decisions, an append-only event log, team tokens (hashed) and scheduler key-values. Every method is one
 * transaction; `transaction(fn)` groups several into one. Intents are recorded before a side effect (launch,
 * terminate, start or stop a task) and marked done or failed after it, so a controller restarted at any line finds
 * the side effects it may have started and reconciles them (level-triggered).
 *
 * Implemented by SqliteStateStore (one controller: WAL, one transaction per change), PostgresStateStore (several
 * controllers sharing a database, one active under a lease: ha/) and MemoryStateStore (simulator and tests); all three
 * pass the same contract tests (ARCHITECTURE.md "High availability: two controllers, one PostgreSQL"). Times are
 * seconds on the store's clock (epoch seconds in production, virtual seconds in the simulator).
 */

export type JsonValue =
  null | boolean | number | string | readonly JsonValue[] | { readonly [key: string]: JsonValue };

export const JOB_STATES = [
  'queued',
  'starting',
  'running',
  'migrating',
  'succeeded',
  'failed',
  'cancelled',
  /** Stopped at a stage as unsuccessful (success-ranked ordering): by exit code or by request; not a failure. */
  'unsuccessful',
] as const;
export type JobState = (typeof JOB_STATES)[number];

/** pending: not placed; starting: being started on `instanceId`; checkpointing: asked to checkpoint and stop. */
export const TASK_STATES = [
  'pending',
  'starting',
  'running',
  'checkpointing',
  'stopped',
  'succeeded',
  'failed',
] as const;
export type TaskState = (typeof TASK_STATES)[number];

export const INSTANCE_STATES = [
  'requested',
  'launching',
  'running',
  'draining',
  'terminating',
  'terminated',
] as const;
export type InstanceState = (typeof INSTANCE_STATES)[number];

export const INTENT_STATES = ['pending', 'done', 'failed'] as const;
export type IntentState = (typeof INTENT_STATES)[number];

export interface JobRecord {
  /** `job-<n>`, n increasing from 1 in submission order. */
  readonly id: string;
  readonly name: string;
  readonly team: string;
  readonly spec: JobSpec;
  readonly state: JobState;
  /** Why the job is in its state, when a transition gave a reason (e.g. "instance i-… lost"). */
  readonly reason?: string | undefined;
  readonly submittedAtSeconds: number;
  /** First time the job entered `running`. */
  readonly startedAtSeconds?: number | undefined;
  /** When the job reached succeeded, failed, cancelled or unsuccessful. */
  readonly finishedAtSeconds?: number | undefined;
  readonly updatedAtSeconds: number;
  readonly completedIterations: number;
  readonly totalIterations?: number | undefined;
  /** Moves and returns to the queue begun: counted when the job's first task is told to checkpoint and stop. */
  readonly migrations: number;
  /** The attempt running, or the last one made: 1 at submission, one more per retry (`retryStrategy`). */
  readonly attempts: number;
  /** How each attempt that was retried failed, oldest first; absent before the first retry. */
  readonly attemptFailures?: readonly AttemptFailure[] | undefined;
}

/** The failure that ended an attempt of a job. */
export interface AttemptFailureInput {
  /** The task whose failure ended the attempt. */
  readonly taskId: string;
  readonly exitCode?: number | undefined;
  /** The task's failure reason (exit code, last output) and what `retryStrategy` made of it. */
  readonly reason: string;
  /**
   * When the task failed, if before now (its worker reported the exit late: the controller was down): kept within
   * the job's run and now. Absent: now.
   */
  readonly atSeconds?: number | undefined;
}

export interface AttemptFailure extends AttemptFailureInput {
  /** 1-based. */
  readonly attempt: number;
  readonly atSeconds: number;
}

export interface TaskRecord {
  /** `<job id>.<index>`, e.g. `job-7.0`. */
  readonly id: string;
  readonly jobId: string;
  readonly index: number;
  readonly name: string;
  /** Co-location key (ExpandedTask.workloadKey). */
  readonly workloadKey: string;
  readonly state: TaskState;
  /** The instance the task is committed to (starting, running or checkpointing there). */
  readonly instanceId?: string | undefined;
  readonly lastCheckpointKey?: string | undefined;
  readonly lastCheckpointAtSeconds?: number | undefined;
  readonly updatedAtSeconds: number;
}

export interface InstanceRecord {
  /** `inst-<n>`: ours, known before the cloud assigns its id. */
  readonly id: string;
  /** The cloud's id (EC2 `i-…`) once the launch call returned it. */
  readonly cloudId?: string | undefined;
  readonly typeName: string;
  readonly state: InstanceState;
  /** Before its launch the zone asked for, after it the zone the cloud placed it in. */
  readonly availabilityZone?: string | undefined;
  /**
   * The cluster placement group (latency-aware placement): before its launch the one asked for, after it the one the
   * cloud really put it in (none when the launch fell back without the group).
   */
  readonly placementGroup?: string | undefined;
  /** Idempotency token of the launch (EC2 ClientToken): retrying a launch after a crash cannot start a second instance. */
  readonly launchToken: string;
  readonly requestedAtSeconds: number;
  readonly launchedAtSeconds?: number | undefined;
  readonly runningAtSeconds?: number | undefined;
  readonly terminatedAtSeconds?: number | undefined;
  readonly updatedAtSeconds: number;
  /** sha256 of the token the instance's worker authenticates with (the raw token is never stored). */
  readonly workerTokenHash?: string | undefined;
  readonly reason?: string | undefined;
}

/** The idempotency key of an instance's launch intent: one launch per instance record, found again by it. */
export function launchIntentKey(instanceId: string): string {
  return `launch:${instanceId}`;
}

/** Side effects the controller records before performing them. Add a kind here with its payload schema. */
export const intentPayloadSchemas = {
  launch: z.strictObject({
    instanceId: z.string().min(1),
    typeName: z.string().min(1),
    launchToken: z.string().min(1).max(64),
    availabilityZone: z.string().min(1).optional(),
    /** How the plan buys it; absent: on demand (intents written before spot support). */
    market: z.enum(MARKETS).optional(),
  }),
  terminate: z.strictObject({ instanceId: z.string().min(1), cloudId: z.string().min(1).optional() }),
  'start-task': z.strictObject({ taskId: z.string().min(1), instanceId: z.string().min(1) }),
  'stop-task': z.strictObject({
    taskId: z.string().min(1),
    instanceId: z.string().min(1),
    checkpoint: z.boolean(),
  }),
  'checkpoint-task': z.strictObject({ taskId: z.string().min(1), instanceId: z.string().min(1) }),
} as const;

export type IntentKind = keyof typeof intentPayloadSchemas;
export const INTENT_KINDS = Object.keys(intentPayloadSchemas) as IntentKind[];
export type IntentPayload<K extends IntentKind> = z.output<(typeof intentPayloadSchemas)[K]>;

export type IntentInput = {
  [K in IntentKind]: { readonly kind: K; readonly payload: IntentPayload<K> };
}[IntentKind];

export type IntentRecord = IntentInput & {
  readonly id: number;
  readonly state: IntentState;
  /** Caller's idempotency key: recording an intent with a key already used returns the existing intent. */
  readonly key?: string | undefined;
  /** The scheduling round that asked for it, if any. */
  readonly round?: number | undefined;
  readonly error?: string | undefined;
  readonly createdAtSeconds: number;
  readonly updatedAtSeconds: number;
};

export interface RoundInput {
  readonly configuration: Configuration;
  readonly decision: DecisionRecord;
}

export interface RoundRecord extends RoundInput {
  /** Increasing from 1. */
  readonly round: number;
  readonly atSeconds: number;
}

/** The rounds recorded within a span of time (store clock, seconds, both ends included; an end left out: open). */
export interface RoundWindow {
  readonly sinceSeconds?: number | undefined;
  readonly untilSeconds?: number | undefined;
}

export interface EventInput {
  /** Dotted kind, e.g. `job.state`, `instance.state`, `task.checkpoint`, `round.decision`. */
  readonly kind: string;
  readonly jobId?: string | undefined;
  readonly taskId?: string | undefined;
  readonly instanceId?: string | undefined;
  readonly message?: string | undefined;
  readonly data?: JsonValue | undefined;
}

export interface EventRecord extends EventInput {
  readonly seq: number;
  readonly atSeconds: number;
}

export interface TeamTokenRecord {
  readonly team: string;
  readonly label?: string | undefined;
  /** First 12 hex digits of the hash: enough to tell tokens apart in a listing, useless to an attacker. */
  readonly hashPrefix: string;
  readonly createdAtSeconds: number;
  readonly revokedAtSeconds?: number | undefined;
}

export interface JobFilter {
  readonly states?: readonly JobState[] | undefined;
  readonly team?: string | undefined;
  /**
   * Only jobs still to end and those that ended at or after this time (epoch seconds): a listing of current work
   * that does not grow with the controller's whole history.
   */
  readonly endedSince?: number | undefined;
  /** Only jobs submitted after this one (a job id): the next page of a listing. */
  readonly afterId?: string | undefined;
  /** At most this many, the first in submission order. */
  readonly limit?: number | undefined;
}
export interface TaskFilter {
  readonly jobId?: string | undefined;
  readonly instanceId?: string | undefined;
  readonly states?: readonly TaskState[] | undefined;
  /** Only tasks whose job is in one of these states (a round reads the tasks of the jobs still to run, not all). */
  readonly jobStates?: readonly JobState[] | undefined;
}
export interface InstanceFilter {
  readonly states?: readonly InstanceState[] | undefined;
}
export interface IntentFilter {
  readonly states?: readonly IntentState[] | undefined;
  readonly kind?: IntentKind | undefined;
}
export interface EventFilter {
  readonly afterSeq?: number | undefined;
  readonly jobId?: string | undefined;
  readonly taskId?: string | undefined;
  readonly instanceId?: string | undefined;
  readonly kind?: string | undefined;
  /** Events of any of these kinds (one read, in sequence order, where a read per kind would not be one snapshot). */
  readonly kinds?: readonly string[] | undefined;
  readonly limit?: number | undefined;
  /** Newest first (and `limit` keeps the newest); oldest first otherwise. */
  readonly newestFirst?: boolean | undefined;
}

/** The id and submission time a job keeps when it is submitted again (restore from a backup). */
export interface KeptJobIdentity {
  /** `job-<n>`, as the store gave it. */
  readonly id: string;
  readonly submittedAtSeconds: number;
}

/** How a task's state is set. */
export interface TaskStateOptions {
  /**
   * When the change happened, if before now (an exit its worker reported late): its `task.state` event takes it (never
   * after now), so the task's time on its instance ends there. The caller keeps it after the task's last change.
   */
  readonly atSeconds?: number | undefined;
}

/** How a job's state is set. */
export interface JobStateOptions {
  /**
   * When the change happened, if before now (a restore ends a job as the job archive says it ended): its start and
   * finish times and its event take it (never after now, nor before the job started or was submitted).
   */
  readonly atSeconds?: number | undefined;
}

export interface NewInstance {
  readonly typeName: string;
  readonly availabilityZone?: string | undefined;
  readonly placementGroup?: string | undefined;
  /** Defaults to `<store id>-<instance id>`, unique across databases so a fresh database never reuses a token. */
  readonly launchToken?: string | undefined;
}

export interface InstanceChange {
  readonly cloudId?: string | undefined;
  readonly availabilityZone?: string | undefined;
  /** The placement group obtained; `null`: none (a launch that fell back without the group asked for). */
  readonly placementGroup?: string | null | undefined;
  readonly reason?: string | undefined;
  /**
   * Entering `terminated`: when the instance really ended, if before now (the cloud says when, and the controller
   * was not running to see it). Kept within [its launch, now].
   */
  readonly endedAtSeconds?: number | undefined;
  /**
   * Getting its cloud id: when the cloud says it launched, if before now (an instance found by its launch token after
   * a crash ran, and was billed, from then). Kept within [its request, now].
   */
  readonly launchedAtSeconds?: number | undefined;
}

export interface StateCounts {
  readonly jobs: Readonly<Record<JobState, number>>;
  readonly tasks: Readonly<Record<TaskState, number>>;
}

export interface StateStore {
  /** Run `fn` as one transaction: everything it writes commits together or not at all (nested calls nest). */
  transaction<T>(fn: () => T): T;
  /**
   * Run `fn` once the outermost transaction open now has committed (at once outside any), and never if what called
   * this rolls back: for what lives outside the store (a /metrics counter) and must count only what was committed.
   */
  afterCommit(fn: () => void): void;

  // Jobs and their tasks
  /**
   * Store a validated spec as a queued job with one pending task per expanded task. With `kept`, the job gets the id
   * and submission time it had before (a restore re-submits the jobs its backup missed); that id must be free.
   */
  submitJob(spec: JobSpec, kept?: KeptJobIdentity): JobRecord;
  /**
   * Ids up to job-`throughSeq` are taken though no job here has them (the job archive knows them): later submissions
   * get higher ones. Never moves the counter down.
   */
  reserveJobIds(throughSeq: number): void;
  getJob(id: string): JobRecord | undefined;
  /** In submission order. */
  listJobs(filter?: JobFilter): JobRecord[];
  /** How many jobs `listJobs(filter)` would list, without reading them. */
  countJobs(filter?: JobFilter): number;
  /** Move a job to `state` (same state: no-op). Illegal moves (out of a final state) throw IllegalTransitionError. */
  setJobState(id: string, state: JobState, reason?: string, options?: JobStateOptions): JobRecord;
  /** One more move or return to the queue: the job's first task was told to checkpoint and stop (lifecycle.ts). */
  countMigration(id: string): JobRecord;
  recordJobProgress(id: string, completedIterations: number, totalIterations?: number): JobRecord;
  /**
   * End the job's current attempt with `failure` and queue it for the next: the failure is kept with its attempt
   * number, `attempts` counts one more, the job moves to queued (with `reason`) and a `job.retry` event is logged.
   * Its tasks are the caller's to stop and release. A job in a final state cannot be retried.
   */
  retryJob(id: string, failure: AttemptFailureInput, reason: string): JobRecord;
  getTask(id: string): TaskRecord | undefined;
  /** In submission order, then task index. */
  listTasks(filter?: TaskFilter): TaskRecord[];
  /**
   * How many jobs and tasks are in each state, counted without reading them (/metrics asks on every scrape). Optional:
   * without it, callers count what listJobs and listTasks return.
   */
  countByState?(): StateCounts;
  /**
   * Move a task to `state`. `instanceId` commits it to an instance (required for starting/running/checkpointing
   * unless already set); pending, stopped, succeeded and failed release it. A task of a finished job can only stop.
   */
  setTaskState(id: string, state: TaskState, instanceId?: string, options?: TaskStateOptions): TaskRecord;
  /**
   * A task's newest checkpoint, with its `task.checkpoint` event (the one event a checkpoint leaves). `fromInstanceId`
   * is the instance that uploaded it, when not the task's own (a moving task checkpoints on the instance it leaves).
   */
  recordCheckpoint(taskId: string, key: string, atSeconds?: number, fromInstanceId?: string): TaskRecord;

  // Instances
  createInstance(input: NewInstance): InstanceRecord;
  getInstance(id: string): InstanceRecord | undefined;
  findInstanceByCloudId(cloudId: string): InstanceRecord | undefined;
  /** In creation order. */
  listInstances(filter?: InstanceFilter): InstanceRecord[];
  /**
   * Move an instance along requested → launching → running ⇄ draining → terminating → terminated (any live state may
   * jump to terminated when the cloud reports it gone). Tasks stay committed to it: the reconciler decides whether
   * they checkpointed and releases them.
   */
  setInstanceState(id: string, state: InstanceState, change?: InstanceChange): InstanceRecord;
  setWorkerToken(instanceId: string, rawToken: string): InstanceRecord;
  instanceForWorkerToken(rawToken: string): InstanceRecord | undefined;

  // Intents: written before the side effect, completed after it.
  recordIntent(
    intent: IntentInput,
    options?: { readonly key?: string; readonly round?: number },
  ): IntentRecord;
  completeIntent(id: number): IntentRecord;
  failIntent(id: number, error: string): IntentRecord;
  getIntent(id: number): IntentRecord | undefined;
  /** The intent recorded with this idempotency key (e.g. `launch:<instance>`), through the stores' unique index. */
  getIntentByKey(key: string): IntentRecord | undefined;
  /** Oldest first. */
  listIntents(filter?: IntentFilter): IntentRecord[];
  /**
   * Delete the oldest finished (done or failed) intents last updated before `beforeSeconds`, at most `limit` of them;
   * returns how many. Launches are kept: an instance's launch says which market it was bought on, which its costs
   * read for as long as they are reported. Nothing else reads a finished intent back.
   */
  pruneFinishedIntents(beforeSeconds: number, limit: number): number;

  // Plans and decisions, one record per scheduling round
  recordRound(input: RoundInput): RoundRecord;
  getRound(round: number): RoundRecord | undefined;
  latestRound(): RoundRecord | undefined;
  /** Newest first; with `window`, only the rounds recorded within it (the newest `limit` of those). */
  listRounds(limit?: number, window?: RoundWindow): RoundRecord[];
  /** Delete all but the newest `keep` rounds; returns how many were deleted. */
  pruneRounds(keep: number): number;

  // Append-only event log
  appendEvent(event: EventInput): EventRecord;
  /** Oldest first (ascending seq). */
  listEvents(filter?: EventFilter): EventRecord[];
  /**
   * Delete the oldest events of `kind` recorded before `beforeSeconds`, at most `limit` of them; returns how many.
   * For history nothing reads back (a task's newest checkpoint is on its record): the log keeps its sequence numbers.
   */
  pruneEvents(kind: string, beforeSeconds: number, limit: number): number;

  // Team tokens (API authentication), stored as sha256 hashes
  addTeamToken(team: string, rawToken: string, label?: string): TeamTokenRecord;
  /** The team a valid, unrevoked token belongs to. */
  teamForToken(rawToken: string): string | undefined;
  revokeTeamToken(rawToken: string): boolean;
  /**
   * Revoke the token a listing names by its hash prefix (an admin has no raw token to give once it was handed out):
   * the revoked record, or undefined when no token has that prefix; throws when it is already revoked.
   */
  revokeTeamTokenByPrefix(hashPrefix: string): TeamTokenRecord | undefined;
  listTeamTokens(team?: string): TeamTokenRecord[];

  // Scheduler state (e.g. the co-location table as JSON)
  getValue(key: string): JsonValue | undefined;
  setValue(key: string, value: JsonValue): void;
  deleteValue(key: string): boolean;

  close(): void;
}

export interface StateStoreOptions {
  /** The store's clock in seconds (default: wall-clock epoch seconds). The simulator passes its virtual clock. */
  readonly nowSeconds?: () => number;
}

export class StateStoreError extends Error {
  override name = 'StateStoreError';
}

/**
 * The store failed, not the request: a damaged or read-only database, a statement the database refused (PostgresError;
 * the API's 503 when it passes, a timeout or an unreachable server), or a value no store can hold (a caller's bug).
 * Not a StateStoreError, which is a conflict with the state a client caused (the API's 409, told to the client): this
 * one is the API's 500 and logged, its path and remedies for the operator's eyes, not a team's.
 */
export class StateStoreFaultError extends Error {
  override name = 'StateStoreFaultError';
}

export class UnknownRecordError extends StateStoreError {
  override name = 'UnknownRecordError';
  constructor(
    readonly kind: 'job' | 'task' | 'instance' | 'intent',
    readonly id: string | number,
  ) {
    super(`unknown ${kind} ${id}`);
  }
}

export class IllegalTransitionError extends StateStoreError {
  override name = 'IllegalTransitionError';
  constructor(
    readonly kind: 'job' | 'task' | 'instance' | 'intent',
    readonly id: string | number,
    readonly from: string,
    readonly to: string,
    detail?: string,
  ) {
    super(`${kind} ${id} cannot go from ${from} to ${to}${detail === undefined ? '' : ` (${detail})`}`);
  }
}

/** The database was written by a newer fleetwise: refuse rather than corrupt it. */
export class SchemaVersionError extends StateStoreError {
  override name = 'SchemaVersionError';
}

export function wallClockSeconds(): number {
  return Date.now() / 1000;
}
