import type { z } from 'zod';
import { describeIssues } from '../../core/validation.js';
import type { JobSpec } from '../job-spec/spec.js';
import { expandTasks } from '../job-spec/tasks.js';
import {
  IllegalTransitionError,
  type AttemptFailure,
  type AttemptFailureInput,
  intentPayloadSchemas,
  StateStoreError,
  type EventInput,
  type IntentInput,
  type InstanceChange,
  type InstanceRecord,
  type InstanceState,
  type JobRecord,
  type JobState,
  type KeptJobIdentity,
  type NewInstance,
  type TaskRecord,
  type TaskState,
} from '../state-store.js';

/**
 * The state machines of jobs, tasks and instances, as pure functions from a record to the next record plus the
 * event that records the change. Both StateStore implementations apply these, so they cannot drift apart.
 */

const JOB_TRANSITIONS: Readonly<Record<JobState, readonly JobState[]>> = {
  // Unsuccessful: stopped at a stage (success-ranked ordering): a task's exit code, or a request at any time.
  queued: ['starting', 'failed', 'cancelled', 'unsuccessful'],
  // Back to queued when its instance is lost before it ran (it keeps its last checkpoint).
  starting: ['running', 'queued', 'failed', 'cancelled', 'unsuccessful'],
  running: ['migrating', 'queued', 'succeeded', 'failed', 'cancelled', 'unsuccessful'],
  // A move checkpoints the job, then restarts it elsewhere (starting) or resumes it in place (running); one that works
  // on until its new instances are ready (make before break) may finish first.
  migrating: ['starting', 'running', 'queued', 'succeeded', 'failed', 'cancelled', 'unsuccessful'],
  succeeded: [],
  failed: [],
  cancelled: [],
  unsuccessful: [],
};

const INSTANCE_TRANSITIONS: Readonly<Record<InstanceState, readonly InstanceState[]>> = {
  requested: ['launching', 'terminating', 'terminated'],
  launching: ['running', 'draining', 'terminating', 'terminated'],
  running: ['draining', 'terminating', 'terminated'],
  // A drain can be called off when a newer plan keeps the instance.
  draining: ['running', 'terminating', 'terminated'],
  terminating: ['terminated'],
  terminated: [],
};

export const FINAL_JOB_STATES: readonly JobState[] = ['succeeded', 'failed', 'cancelled', 'unsuccessful'];
/** The states of a job still to end: what a round plans for, and what is stopped or cancelled with the fleet. */
export const LIVE_JOB_STATES: readonly JobState[] = ['queued', 'starting', 'running', 'migrating'];
/** Task states that hold an instance. */
export const PLACED_TASK_STATES: readonly TaskState[] = ['starting', 'running', 'checkpointing'];

export function isFinalJobState(state: JobState): boolean {
  return FINAL_JOB_STATES.includes(state);
}

export function canTransitionJob(from: JobState, to: JobState): boolean {
  return from === to || JOB_TRANSITIONS[from].includes(to);
}

export function canTransitionInstance(from: InstanceState, to: InstanceState): boolean {
  return from === to || INSTANCE_TRANSITIONS[from].includes(to);
}

export interface Change<R> {
  readonly record: R;
  /** Undefined when nothing changed. */
  readonly event?: EventInput | undefined;
  /** When the change happened, the event's time: now unless it happened earlier (an end from the job archive). */
  readonly atSeconds?: number | undefined;
}

export function newJobRecord(id: string, spec: JobSpec, nowSeconds: number): JobRecord {
  return {
    id,
    name: spec.name,
    team: spec.team,
    spec,
    state: 'queued',
    submittedAtSeconds: nowSeconds,
    updatedAtSeconds: nowSeconds,
    completedIterations: 0,
    ...(spec.totalIterations === undefined ? {} : { totalIterations: spec.totalIterations }),
    migrations: 0,
    attempts: 1,
  };
}

export function newTaskRecords(job: JobRecord, nowSeconds: number): TaskRecord[] {
  return expandTasks(job.spec).map((t) => ({
    id: `${job.id}.${t.index}`,
    jobId: job.id,
    index: t.index,
    name: t.name,
    workloadKey: t.workloadKey,
    state: 'pending',
    updatedAtSeconds: nowSeconds,
  }));
}

export function submittedEvent(job: JobRecord, taskCount: number): EventInput {
  return {
    kind: 'job.submitted',
    jobId: job.id,
    message: `job ${job.name} of team ${job.team} submitted with ${taskCount} task(s)`,
    data: { name: job.name, team: job.team, tasks: taskCount },
  };
}

/**
 * Move a job to `to`. `atSeconds` dates a change that happened before now (a job restored ended as the job archive
 * says it ended): its start, finish and event take that time, so durations and the ended window are the job's own,
 * not the restore's; the record's update time stays now, when the record changed.
 */
export function transitionJob(
  job: JobRecord,
  to: JobState,
  nowSeconds: number,
  reason?: string,
  atSeconds?: number,
): Change<JobRecord> {
  if (job.state === to) return { record: job };
  if (!canTransitionJob(job.state, to)) throw new IllegalTransitionError('job', job.id, job.state, to);
  const at = changedAt(job, nowSeconds, atSeconds);
  const record: JobRecord = {
    ...job,
    state: to,
    reason,
    updatedAtSeconds: nowSeconds,
    startedAtSeconds: job.startedAtSeconds ?? (to === 'running' ? at : undefined),
    finishedAtSeconds: isFinalJobState(to) ? at : undefined,
  };
  return {
    record,
    ...(at === nowSeconds ? {} : { atSeconds: at }),
    event: {
      kind: 'job.state',
      jobId: job.id,
      message: `job ${job.id} ${job.state} → ${to}${reason === undefined ? '' : `: ${reason}`}`,
      data: { from: job.state, to, ...(reason === undefined ? {} : { reason }) },
    },
  };
}

/**
 * When a job's change happened: the time given, never after now (a clock ahead of this host's) and never before the
 * job started (or was submitted, never started), else now.
 */
function changedAt(job: JobRecord, nowSeconds: number, atSeconds: number | undefined): number {
  if (atSeconds === undefined || !Number.isFinite(atSeconds)) return nowSeconds;
  const earliest = Math.min(job.startedAtSeconds ?? job.submittedAtSeconds, nowSeconds);
  return Math.min(nowSeconds, Math.max(earliest, atSeconds));
}

/**
 * One more move (or return to the queue) of the job: counted when its first task is told to checkpoint and stop, not
 * when the round decides it. A make-before-break move waits for its new instances with its tasks running, and is
 * dropped if the job ends first: it never happened, and the simulator's runtimes do not count it either.
 */
export function withMigrationCounted(job: JobRecord, nowSeconds: number): Change<JobRecord> {
  return { record: { ...job, migrations: job.migrations + 1, updatedAtSeconds: nowSeconds } };
}

/**
 * When a task reported ended exited: the time its worker's report gives (`reportedSeconds`, on this controller's
 * clock: heard less the age the worker reported), never before the task's run began (`runSinceSeconds`, its last state
 * change: an age older than the run) nor after now; now when it reported none, as an older worker does.
 */
export function exitedWithin(
  reportedSeconds: number | undefined,
  runSinceSeconds: number,
  nowSeconds: number,
): number {
  if (reportedSeconds === undefined || !Number.isFinite(reportedSeconds)) return nowSeconds;
  return Math.min(nowSeconds, Math.max(Math.min(runSinceSeconds, nowSeconds), reportedSeconds));
}

/**
 * The job's next attempt after `failure` ended the current one (its state is the caller's to move). The failure is
 * dated at its `atSeconds` (the task's exit, heard late), within the job's run and now, else now.
 */
export function withRetry(
  job: JobRecord,
  failure: AttemptFailureInput,
  nowSeconds: number,
): Change<JobRecord> {
  if (isFinalJobState(job.state))
    throw new IllegalTransitionError('job', job.id, job.state, 'queued', 'a job that ended is not retried');
  const ended: AttemptFailure = {
    attempt: job.attempts,
    taskId: failure.taskId,
    ...(failure.exitCode === undefined ? {} : { exitCode: failure.exitCode }),
    reason: failure.reason,
    atSeconds: changedAt(job, nowSeconds, failure.atSeconds),
  };
  return {
    record: {
      ...job,
      attempts: job.attempts + 1,
      attemptFailures: [...(job.attemptFailures ?? []), ended],
      updatedAtSeconds: nowSeconds,
    },
    event: {
      kind: 'job.retry',
      jobId: job.id,
      taskId: failure.taskId,
      message: `job ${job.id} attempt ${job.attempts} failed (${failure.reason}); attempt ${job.attempts + 1} queued`,
      data: {
        attempt: job.attempts,
        next: job.attempts + 1,
        ...(failure.exitCode === undefined ? {} : { exitCode: failure.exitCode }),
        reason: failure.reason,
      },
    },
  };
}

export function withProgress(
  job: JobRecord,
  completedIterations: number,
  totalIterations: number | undefined,
  nowSeconds: number,
): JobRecord {
  if (!(Number.isFinite(completedIterations) && completedIterations >= 0))
    throw new StateStoreError(
      `job ${job.id}: completed iterations must be a non-negative number, got ${completedIterations}`,
    );
  if (totalIterations !== undefined && !(Number.isFinite(totalIterations) && totalIterations >= 0))
    throw new StateStoreError(
      `job ${job.id}: total iterations must be a non-negative number, got ${totalIterations}`,
    );
  return {
    ...job,
    completedIterations,
    totalIterations: totalIterations ?? job.totalIterations,
    updatedAtSeconds: nowSeconds,
  };
}

/**
 * `instance` is the record the task is to be committed to (already looked up by the store), if one was named.
 * Placed states keep or take an instance; the others release it. `atSeconds` dates a change that happened before now
 * (an exit heard late, `exitedWithin`): its event takes it, never after now, so the cost replay ends the task's time
 * on its instance there; the record's update time stays now.
 */
export function transitionTask(
  task: TaskRecord,
  job: JobRecord,
  to: TaskState,
  instance: InstanceRecord | undefined,
  nowSeconds: number,
  atSeconds?: number,
): Change<TaskRecord> {
  const placed = PLACED_TASK_STATES.includes(to);
  if (isFinalJobState(job.state) && (placed || to === 'pending'))
    throw new IllegalTransitionError('task', task.id, task.state, to, `job ${job.id} is ${job.state}`);
  if (instance !== undefined && !placed)
    throw new StateStoreError(
      `task ${task.id}: only starting, running or checkpointing tasks are on an instance`,
    );
  if (instance?.state === 'terminated')
    throw new IllegalTransitionError(
      'task',
      task.id,
      task.state,
      to,
      `instance ${instance.id} is terminated`,
    );
  const instanceId = placed ? (instance?.id ?? task.instanceId) : undefined;
  if (placed && instanceId === undefined)
    throw new StateStoreError(`task ${task.id}: a ${to} task needs the instance it is on`);
  if (task.state === to && task.instanceId === instanceId) return { record: task };
  const record: TaskRecord = { ...task, state: to, instanceId, updatedAtSeconds: nowSeconds };
  const where = instanceId === undefined ? '' : ` on ${instanceId}`;
  const at =
    atSeconds === undefined || !Number.isFinite(atSeconds) ? nowSeconds : Math.min(nowSeconds, atSeconds);
  return {
    record,
    ...(at === nowSeconds ? {} : { atSeconds: at }),
    event: {
      kind: 'task.state',
      jobId: task.jobId,
      taskId: task.id,
      instanceId: instanceId ?? task.instanceId,
      message: `task ${task.id} ${task.state} → ${to}${where}`,
      data: { from: task.state, to, ...(instanceId === undefined ? {} : { instanceId }) },
    },
  };
}

export function withCheckpoint(
  task: TaskRecord,
  key: string,
  atSeconds: number,
  nowSeconds: number,
  /** The instance that uploaded it; by default the task's own. */
  fromInstanceId: string | undefined = task.instanceId,
): Change<TaskRecord> {
  if (key.length === 0) throw new StateStoreError(`task ${task.id}: empty checkpoint key`);
  return {
    record: {
      ...task,
      lastCheckpointKey: key,
      lastCheckpointAtSeconds: atSeconds,
      updatedAtSeconds: nowSeconds,
    },
    event: {
      kind: 'task.checkpoint',
      jobId: task.jobId,
      taskId: task.id,
      instanceId: fromInstanceId,
      message: `task ${task.id} checkpointed to ${key}`,
      data: { key, atSeconds },
    },
  };
}

/** EC2 ClientToken is at most 64 ASCII characters. */
const MAX_LAUNCH_TOKEN_LENGTH = 64;

export function newInstanceRecord(
  id: string,
  input: NewInstance,
  storeId: string,
  nowSeconds: number,
): Change<InstanceRecord> {
  if (input.typeName.length === 0) throw new StateStoreError('an instance needs a type name');
  // The store's id and the instance's, and when it was asked for: a state restored from a backup (SQLite's own restore
  // renews the store id; PostgreSQL's backups cannot) numbers instances again from where the backup was, and a token
  // of the store and number alone would find the instance the lost history launched under it (EC2's ClientToken,
  // the launch-token tag) instead of launching. A retry after a crash reads the record, so it keeps its token.
  const launchToken = input.launchToken ?? `${storeId}-${id}-${Math.floor(nowSeconds)}`;
  if (
    launchToken.length === 0 ||
    launchToken.length > MAX_LAUNCH_TOKEN_LENGTH ||
    !/^[\x21-\x7e]+$/.test(launchToken)
  )
    throw new StateStoreError(
      `launch token must be 1–${MAX_LAUNCH_TOKEN_LENGTH} printable ASCII characters, got "${launchToken}"`,
    );
  const record: InstanceRecord = {
    id,
    typeName: input.typeName,
    state: 'requested',
    ...(input.availabilityZone === undefined ? {} : { availabilityZone: input.availabilityZone }),
    ...(input.placementGroup === undefined ? {} : { placementGroup: input.placementGroup }),
    launchToken,
    requestedAtSeconds: nowSeconds,
    updatedAtSeconds: nowSeconds,
  };
  return {
    record,
    event: {
      kind: 'instance.created',
      instanceId: id,
      message: `instance ${id} (${input.typeName}) requested`,
      data: { typeName: input.typeName, launchToken },
    },
  };
}

export function transitionInstance(
  instance: InstanceRecord,
  to: InstanceState,
  change: InstanceChange,
  nowSeconds: number,
): Change<InstanceRecord> {
  if (!canTransitionInstance(instance.state, to))
    throw new IllegalTransitionError('instance', instance.id, instance.state, to);
  if (change.cloudId !== undefined && instance.cloudId !== undefined && change.cloudId !== instance.cloudId)
    throw new StateStoreError(
      `instance ${instance.id} already has cloud id ${instance.cloudId}, not ${change.cloudId}`,
    );
  const cloudId = change.cloudId ?? instance.cloudId;
  const availabilityZone = change.availabilityZone ?? instance.availabilityZone;
  const placementGroup =
    change.placementGroup === null ? undefined : (change.placementGroup ?? instance.placementGroup);
  const unchanged =
    instance.state === to &&
    cloudId === instance.cloudId &&
    availabilityZone === instance.availabilityZone &&
    placementGroup === instance.placementGroup;
  if (unchanged) return { record: instance };
  const entering = instance.state !== to;
  // Billed from the moment the cloud gave it an id, whatever the record's state by then: a launch that returns after
  // the instance was dropped (requested → terminating) still runs until its terminate, and cost reports count it.
  const launched = to === 'launching' || (cloudId !== undefined && instance.cloudId === undefined);
  const record: InstanceRecord = {
    ...instance,
    state: to,
    cloudId,
    availabilityZone,
    placementGroup,
    reason: entering ? change.reason : instance.reason,
    updatedAtSeconds: nowSeconds,
    launchedAtSeconds:
      instance.launchedAtSeconds ?? (launched ? launchedAt(instance, change, nowSeconds) : undefined),
    runningAtSeconds: instance.runningAtSeconds ?? (to === 'running' ? nowSeconds : undefined),
    terminatedAtSeconds:
      to === 'terminated'
        ? (instance.terminatedAtSeconds ?? endedAt(instance, change, nowSeconds))
        : undefined,
  };
  return {
    record,
    event: {
      kind: 'instance.state',
      instanceId: instance.id,
      message: `instance ${instance.id}${cloudId === undefined ? '' : ` (${cloudId})`} ${instance.state} → ${to}${change.reason === undefined ? '' : `: ${change.reason}`}`,
      data: {
        from: instance.state,
        to,
        ...(cloudId === undefined ? {} : { cloudId }),
        ...(availabilityZone === undefined ? {} : { availabilityZone }),
        ...(placementGroup === undefined ? {} : { placementGroup }),
        ...(change.reason === undefined ? {} : { reason: change.reason }),
      },
    },
  };
}

/**
 * When an instance entering `terminated` ended: the time its change gives, never after now (a clock ahead of this
 * host's) and never before its launch (or its request, never launched), else now.
 */
function endedAt(instance: InstanceRecord, change: InstanceChange, nowSeconds: number): number {
  if (change.endedAtSeconds === undefined || !Number.isFinite(change.endedAtSeconds)) return nowSeconds;
  const earliest = Math.min(instance.launchedAtSeconds ?? instance.requestedAtSeconds, nowSeconds);
  return Math.min(nowSeconds, Math.max(earliest, change.endedAtSeconds));
}

/**
 * When an instance getting its cloud id launched: the time its change gives (the cloud's launch time of one found by
 * its launch token), never after now and never before its request, else now.
 */
function launchedAt(instance: InstanceRecord, change: InstanceChange, nowSeconds: number): number {
  if (change.launchedAtSeconds === undefined || !Number.isFinite(change.launchedAtSeconds)) return nowSeconds;
  const earliest = Math.min(instance.requestedAtSeconds, nowSeconds);
  return Math.min(nowSeconds, Math.max(earliest, change.launchedAtSeconds));
}

export function jobIdOf(n: number): string {
  return `job-${n}`;
}

/** The n of a `job-<n>` id (a kept id must be one the store could have given). */
export function jobSeqOf(id: string): number {
  const match = /^job-([1-9]\d{0,14})$/.exec(id);
  if (match?.[1] === undefined) throw new StateStoreError(`${JSON.stringify(id)} is not a job id (job-<n>)`);
  return Number(match[1]);
}

/** A new job's record, or one submitted again with the id and submission time it kept. */
export function submittedJobRecord(
  seq: number,
  spec: JobSpec,
  nowSeconds: number,
  kept: KeptJobIdentity | undefined,
): JobRecord {
  const job = newJobRecord(jobIdOf(seq), spec, nowSeconds);
  return kept === undefined ? job : { ...job, submittedAtSeconds: kept.submittedAtSeconds };
}

export function instanceIdOf(n: number): string {
  return `inst-${n}`;
}

/** Check an intent's payload against its kind's schema before it is stored (a reconciler bug fails loudly here). */
export function checkIntent(intent: IntentInput): IntentInput {
  const schema = (intentPayloadSchemas as Record<string, z.ZodType | undefined>)[intent.kind];
  if (schema === undefined)
    throw new StateStoreError(
      `unknown intent kind ${String(intent.kind)} (known: ${Object.keys(intentPayloadSchemas).join(', ')})`,
    );
  const result = schema.safeParse(intent.payload);
  if (!result.success)
    throw new StateStoreError(`intent ${intent.kind}: ${describeIssues(result.error).join('; ')}`);
  return intent;
}

export function checkEvent(event: EventInput): void {
  if (!/^[a-z][a-z0-9-]*(\.[a-z][a-z0-9-]*)*$/.test(event.kind))
    throw new StateStoreError(
      `event kind must be dotted lowercase words (e.g. job.state), got "${event.kind}"`,
    );
}

/**
 * A deep copy through JSON that callers cannot mutate: exactly what a round trip through SQLite's JSON columns
 * gives (undefined fields dropped), so both stores return the same values.
 */
export function frozenCopy<T>(value: T): T {
  return deepFreeze(JSON.parse(JSON.stringify(value)) as T);
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}
