import {
  progressStartSeconds,
  type ClusterSnapshot,
  type NoCapacityOffering,
  type SchedInstance,
  type SchedJob,
  type SchedTask,
} from '../core/model.js';
import type { InstancePlacement, JobNetwork, MeasuredRtt, NetworkDeclaration } from '../core/network.js';
import { groupBy } from '../core/group.js';
import { expectedDurationOf, type TaskTemplateSpec } from './job-spec/spec.js';
import { expandTasks } from './job-spec/tasks.js';
import { unmetDependencies } from './job-dependencies.js';
import { jobTransitions, lastEnteredRunning } from './job-transitions.js';
import { launchedOnSpot } from './instance-market.js';
import { readNoCapacity } from './no-capacity-records.js';
import { SPOT_INTERRUPTION_EVENT } from './spot-interruptions.js';
import { isFinalJobState, LIVE_JOB_STATES, PLACED_TASK_STATES } from './state/lifecycle.js';
import { type InstanceRecord, type JobRecord, type StateStore, type TaskRecord } from './state-store.js';

/**
 * The scheduler's view of the controller's durable state (ARCHITECTURE.md "The round": snapshot in, plan out).
 *
 * - Instances: requested, launching and running ones. Draining, terminating and terminated instances are going
 *   away, so no plan may use them; tasks still on them appear unplaced to the scheduler and are moved off.
 * - Jobs: every job not finished. Queued jobs are reconfigurable, and running jobs once every task of their run is
 *   known prepared (JOB_PREPARED_EVENT); starting and migrating jobs, and running jobs whose tasks are still being
 *   prepared, are pinned where they are committed (Eva reference `_create_initial_config`; the engine's job turns
 *   `executing` only once all its tasks launched).
 * - A task moving to another instance (checkpointing at its source, a pending start at its destination) is
 *   reported at its destination: that is where the plan committed it and where it will need capacity.
 * - A pinned job with a task committed to an instance that is going away, or to none (a gang job going back to the
 *   queue whose first task stopped while a sibling's checkpoint still uploads), cannot move or start until it is
 *   reconfigurable again, and no plan can keep such a task where it is: the round sees the job with only its tasks
 *   committed to instances a plan may use, pinned there, so that the room they hold is not planned for another job;
 *   with none such, the job is left out.
 * - Where instances are (zone, placement group: asked for until launched, then obtained) and the round trips the
 *   workers measured between them, for latency-aware placement.
 * - How instances are bought (spot or on demand) and which ones EC2 recommended rebalancing, so a plan prices them
 *   at their pool and their risk; and which instances the cloud reclaimed lately, so the learned rebalance risk counts
 *   those and not every instance that left (scheduler/rebalance-risk.ts).
 * - The instance types the cloud refused lately for want of capacity in every zone, until its window ends, so the
 *   round keeps waiting the jobs only those types could host (round/capacity-holds.ts).
 */

export interface SnapshotInputs {
  readonly jobs: readonly JobRecord[];
  readonly tasks: readonly TaskRecord[];
  readonly instances: readonly InstanceRecord[];
  /** task id → destination instance of its pending start. */
  readonly pendingStarts: ReadonlyMap<string, string>;
  /** job id → when it last entered `running`. */
  readonly runningSince: ReadonlyMap<string, number>;
  /**
   * Running job id → when every task of its run was first known prepared (JOB_PREPARED_EVENT); a running job not in it
   * is still being prepared.
   */
  readonly preparedSince: ReadonlyMap<string, number>;
  /**
   * Migrating job id → when it last entered `running`: its tasks still running where they were (a move waiting for
   * its new instances) are in that run until they stop. For the work at risk (work-at-risk.ts), not the plan, which
   * sees a migrating job pinned and not running.
   */
  readonly migratingSince?: ReadonlyMap<string, number> | undefined;
  readonly nowSeconds: number;
  /** Round trips the workers measured (latency-matrix.ts); absent without workers that probe. */
  readonly measuredRtts?: readonly MeasuredRtt[] | undefined;
  /**
   * Instances bought on spot: launched with the spot market and not fallen back to on demand. Draining and
   * terminating ones too (the plan reads only the live ones): a task still running on one is at that market's risk.
   */
  readonly spotInstances?: ReadonlySet<string> | undefined;
  /** Instances EC2 recommended rebalancing (spot-interruptions.ts records it as an event). */
  readonly rebalanceRecommended?: ReadonlySet<string> | undefined;
  /**
   * Instances the cloud reclaimed within RECLAIM_LOOKBACK_SECONDS: a spot interruption notice, or lost to the cloud
   * with jobs on them (JOB_CAPACITY_LOST_EVENT). Absent: exits are not told apart (ClusterSnapshot).
   */
  readonly reclaimedInstances?: ReadonlySet<string> | undefined;
  /** job id → zones where instances it ran on were lost, oldest first (JOB_CAPACITY_LOST_EVENT). */
  readonly interruptedZones?: ReadonlyMap<string, readonly string[]> | undefined;
  /** Types the cloud refused for want of capacity in every zone, still in its window (no-capacity-records.ts). */
  readonly noCapacity?: readonly NoCapacityOffering[] | undefined;
  /**
   * Queued jobs waiting for their dependencies, and their tasks: out of the round, but in the completion-time
   * predictions, which hold them until their dependencies are predicted to finish (eta-world.ts).
   */
  readonly heldJobs?: readonly JobRecord[] | undefined;
  readonly heldTasks?: readonly TaskRecord[] | undefined;
  /** Held job id → the dependencies it waits for (those that have not succeeded); every held job has its entry. */
  readonly heldFor?: ReadonlyMap<string, readonly string[]> | undefined;
}

/** A job lost an instance under it (vanished: a spot reclaim, a stop); `data.zone` says where. */
export const JOB_CAPACITY_LOST_EVENT = 'job.capacity-lost';
/**
 * Every task of a running job is prepared (image fetched and built, checkpoint restored): their workers report them
 * running, or the co-start barrier released them ready (reconcile/effects/tasks.ts). Its init delay runs from here.
 */
export const JOB_PREPARED_EVENT = 'job.prepared';
/** How far apart the clocks of controllers sharing one store may be, as events and submissions are stamped. */
const CLOCK_SKEW_GRACE_SECONDS = 60;

const SCHEDULABLE_INSTANCE_STATES = new Set(['requested', 'launching', 'running']);

/**
 * How far back a reclaim is looked for. The rebalance risk decides on the first round an instance is missing from, a
 * round period or so after the reclaim: an hour covers a slow or stalled loop, and a controller down for longer only
 * censors the reclaims of that time. The read is bounded too (the newest first): a mass reclaim has the rounds that
 * follow it read their own.
 */
const RECLAIM_LOOKBACK_SECONDS = 3600;
const RECLAIM_EVENTS_READ = 500;

/** Read what a snapshot needs from the store. */
export function readSnapshotInputs(
  store: StateStore,
  nowSeconds: number,
  measuredRtts?: readonly MeasuredRtt[],
): SnapshotInputs {
  // A job waiting for its dependencies is out of the round until they have succeeded (predictions hold it).
  const jobs: JobRecord[] = [];
  const heldJobs: JobRecord[] = [];
  const heldFor = new Map<string, readonly string[]>();
  for (const job of store.listJobs({ states: LIVE_JOB_STATES })) {
    const unmet = job.state === 'queued' ? unmetDependencies(job, store) : [];
    if (unmet.length === 0) jobs.push(job);
    else {
      heldJobs.push(job);
      heldFor.set(job.id, unmet);
    }
  }
  // Only the live jobs' tasks: every task ever run is read once per round otherwise, and they grow for good.
  const tasks: TaskRecord[] = [];
  const heldTasks: TaskRecord[] = [];
  for (const task of store.listTasks({ jobStates: LIVE_JOB_STATES }))
    (heldFor.has(task.jobId) ? heldTasks : tasks).push(task);
  const instances = store.listInstances({
    states: ['requested', 'launching', 'running', 'draining', 'terminating'],
  });
  const pendingStarts = new Map<string, string>();
  for (const intent of store.listIntents({ states: ['pending'], kind: 'start-task' }))
    if (intent.kind === 'start-task') pendingStarts.set(intent.payload.taskId, intent.payload.instanceId);
  const runningSince = new Map<string, number>();
  const preparedSince = new Map<string, number>();
  const migratingSince = new Map<string, number>();
  for (const job of jobs) {
    if (job.state === 'running') {
      runningSince.set(job.id, runningSinceOf(store, job));
      const prepared = preparedSinceOf(store, job.id);
      if (prepared !== undefined) preparedSince.set(job.id, prepared);
    } else if (job.state === 'migrating') migratingSince.set(job.id, runningSinceOf(store, job));
  }
  const live = new Set(instances.filter((i) => SCHEDULABLE_INSTANCE_STATES.has(i.state)).map((i) => i.id));
  // The market is in the instance's launch intent (keyed by instance); a launch that fell back to on demand says so
  // in an event, and so does an instance adopted on spot (instance-market.ts). Looked up per instance read, through
  // the stores' indexes: launch intents and the event log grow for as long as the controller runs.
  const spotInstances = new Set<string>();
  for (const { id } of instances) if (launchedOnSpot(store, id)) spotInstances.add(id);
  // Per waiting job, through the stores' index of events by job: where it lost capacity, for a recovery to avoid. A
  // job's events follow its submission, so only jobs submitted before the newest loss of all can have one: the others
  // (every job, on a fleet that lost nothing lately) are not asked about, one query instead of one per waiting job.
  const newestLoss = store.listEvents({ kind: JOB_CAPACITY_LOST_EVENT, newestFirst: true, limit: 1 })[0];
  const interruptedZones = new Map<string, string[]>();
  for (const job of jobs) {
    if (job.state !== 'queued') continue;
    if (newestLoss === undefined || job.submittedAtSeconds > newestLoss.atSeconds + CLOCK_SKEW_GRACE_SECONDS)
      continue;
    const zones = store.listEvents({ jobId: job.id, kind: JOB_CAPACITY_LOST_EVENT }).flatMap((e) => {
      const zone = dataField(e.data, 'zone');
      return typeof zone === 'string' ? [zone] : [];
    });
    if (zones.length > 0) interruptedZones.set(job.id, zones);
  }
  const rebalanceRecommended = new Set<string>();
  for (const id of live)
    if (store.listEvents({ instanceId: id, kind: 'instance.rebalance-recommendation', limit: 1 }).length > 0)
      rebalanceRecommended.add(id);
  // Through the stores' index of events by kind: a notice is recorded once per instance, a capacity loss once per job
  // it hit, so these are few beside the log.
  const reclaimedInstances = new Set<string>();
  for (const e of store.listEvents({
    kinds: [SPOT_INTERRUPTION_EVENT, JOB_CAPACITY_LOST_EVENT],
    newestFirst: true,
    limit: RECLAIM_EVENTS_READ,
  })) {
    if (e.atSeconds < nowSeconds - RECLAIM_LOOKBACK_SECONDS) continue;
    if (e.instanceId !== undefined) reclaimedInstances.add(e.instanceId);
  }
  return {
    jobs,
    tasks,
    instances,
    pendingStarts,
    runningSince,
    preparedSince,
    migratingSince,
    nowSeconds,
    measuredRtts,
    spotInstances,
    rebalanceRecommended,
    reclaimedInstances,
    interruptedZones,
    noCapacity: readNoCapacity(store, nowSeconds),
    heldJobs,
    heldTasks,
    heldFor,
  };
}

/**
 * Every job that has not ended, held ones included: a job left out of the snapshot (pinned off the instances a plan
 * may use) or out of the plan (held back by admission, preempted) has not finished (PlanContext.liveJobIds).
 */
export function liveJobIdsOf(input: SnapshotInputs): string[] {
  return [...input.jobs, ...(input.heldJobs ?? [])].filter((j) => !isFinalJobState(j.state)).map((j) => j.id);
}

/** A field of an event's data, when the data is an object. */
function dataField(data: unknown, field: string): unknown {
  return typeof data === 'object' && data !== null && !Array.isArray(data)
    ? (data as Record<string, unknown>)[field]
    : undefined;
}

/**
 * When the job last entered `running`. Not its first start: a move, a retry or a lost instance (which sends the job
 * back to the queue without a move) starts it again, and the engine dates its progress from the last start.
 */
function runningSinceOf(store: StateStore, job: JobRecord): number {
  const transitions = jobTransitions(store.listEvents({ jobId: job.id, kind: 'job.state' }));
  return lastEnteredRunning(transitions) ?? job.startedAtSeconds ?? job.updatedAtSeconds;
}

/**
 * When every task of the job's current run was first known prepared: its newest JOB_PREPARED_EVENT, if none of its
 * tasks started since (a task's start is its `task.state` event to `running`). Undefined while one is being prepared.
 */
export function preparedSinceOf(store: StateStore, jobId: string): number | undefined {
  const prepared = store.listEvents({ jobId, kind: JOB_PREPARED_EVENT, newestFirst: true, limit: 1 })[0];
  if (prepared === undefined) return undefined;
  // Only the events since it are read: a job that ran for days has many.
  const startedSince = store
    .listEvents({ jobId, kind: 'task.state', afterSeq: prepared.seq })
    .some((e) => dataField(e.data, 'to') === 'running');
  return startedSince ? undefined : prepared.atSeconds;
}

/** The instance a task occupies for planning: its pending start's destination, else where it is placed. */
export function committedInstanceOf(
  task: TaskRecord,
  pendingStarts: ReadonlyMap<string, string>,
): string | undefined {
  const destination = pendingStarts.get(task.id);
  if (destination !== undefined) return destination;
  return PLACED_TASK_STATES.includes(task.state) ? task.instanceId : undefined;
}

export function buildSnapshot(input: SnapshotInputs): ClusterSnapshot {
  const schedulable = new Map(
    input.instances.filter((i) => SCHEDULABLE_INSTANCE_STATES.has(i.state)).map((i) => [i.id, i]),
  );
  const tasksByJob = groupBy(input.tasks, (task) => task.jobId);
  const jobs: SchedJob[] = [];
  const tasks: SchedTask[] = [];
  const onInstance = new Map<string, string[]>();
  for (const job of input.jobs) {
    if (isFinalJobState(job.state)) continue;
    // A task that succeeded has done its part: it needs no room and no place, and showing it unplaced would have the
    // plan start it again and move its siblings to do so (tasks of one job often end seconds apart).
    let jobTasks = (tasksByJob.get(job.id) ?? [])
      .filter((t) => t.state !== 'succeeded')
      .sort((a, b) => a.index - b.index);
    if (jobTasks.length === 0) continue;
    // A running job makes progress from its init delay after its tasks were all prepared; until then it is pinned,
    // as the engine's job is until all its tasks launched.
    const preparedAt = job.state === 'running' ? input.preparedSince.get(job.id) : undefined;
    const reconfigurable = job.state === 'queued' || preparedAt !== undefined;
    let committed = jobTasks.map((t) => committedInstanceOf(t, input.pendingStarts));
    if (!reconfigurable && committed.some((id) => id === undefined || !schedulable.has(id))) {
      // Shown unplaced, a task would be placed by every scheduler, a move of a pinned job the diff refuses: no job
      // would be placed until the job settles. Its tasks committed to instances a plan may use hold their room there
      // until the job goes back to the queue (reconcile/jobs.ts): left out with the job, that room would look free
      // and be planned for another job too.
      const kept = jobTasks.flatMap((t, i) => {
        const id = committed[i];
        return id !== undefined && schedulable.has(id) ? [{ task: t, id }] : [];
      });
      if (kept.length === 0) continue;
      jobTasks = kept.map((k) => k.task);
      committed = kept.map((k) => k.id);
    }
    const templates = templatesByIndex(job);
    jobTasks.forEach((task, i) => {
      const instanceId = committed[i];
      const template = templates.get(task.index);
      if (template === undefined)
        throw new Error(`task ${task.id}: its job's spec has no task ${task.index}`);
      tasks.push({ id: task.id, jobId: job.id, key: task.workloadKey, demand: template.demand, instanceId });
      if (instanceId !== undefined && schedulable.has(instanceId)) {
        const list = onInstance.get(instanceId);
        if (list === undefined) onInstance.set(instanceId, [task.id]);
        else list.push(task.id);
      }
    });
    jobs.push(schedJob(job, jobTasks, reconfigurable, preparedAt, input));
  }
  const instances: SchedInstance[] = [...schedulable.values()].map((i) => {
    const placement = placementOf(i);
    return {
      id: i.id,
      typeName: i.typeName,
      state: i.state === 'running' ? 'running' : 'launching',
      taskIds: onInstance.get(i.id) ?? [],
      ...(placement === undefined ? {} : { placement }),
      ...(input.spotInstances?.has(i.id) === true ? { market: 'spot' as const } : {}),
      ...(input.rebalanceRecommended?.has(i.id) === true ? { rebalanceRecommended: true } : {}),
    };
  });
  // Only pairs between instances a plan may use: the others are history or going away.
  const measuredRtts = (input.measuredRtts ?? []).filter(
    (r) => schedulable.has(r.fromInstanceId) && schedulable.has(r.toInstanceId),
  );
  return {
    nowSeconds: input.nowSeconds,
    jobs,
    tasks,
    instances,
    ...(measuredRtts.length === 0 ? {} : { measuredRtts }),
    ...(input.reclaimedInstances === undefined
      ? {}
      : { reclaimedInstanceIds: [...input.reclaimedInstances].sort() }),
    ...(input.noCapacity === undefined || input.noCapacity.length === 0
      ? {}
      : { noCapacity: input.noCapacity }),
  };
}

/** Where an instance is, as plans take it: its zone and cluster placement group, when it has either. */
export function placementOf(instance: InstanceRecord): InstancePlacement | undefined {
  if (instance.availabilityZone === undefined && instance.placementGroup === undefined) return undefined;
  return {
    ...(instance.availabilityZone === undefined ? {} : { zone: instance.availabilityZone }),
    ...(instance.placementGroup === undefined ? {} : { placementGroup: instance.placementGroup }),
  };
}

function templatesByIndex(job: JobRecord): Map<number, TaskTemplateSpec> {
  return new Map(expandTasks(job.spec).map((t) => [t.index, t.template]));
}

function schedJob(
  job: JobRecord,
  tasks: readonly TaskRecord[],
  reconfigurable: boolean,
  preparedAt: number | undefined,
  input: SnapshotInputs,
): SchedJob {
  const { spec } = job;
  const restoreSeconds = spec.checkpoint.restoreDelaySeconds ?? 0;
  // When the job began making progress, as the simulator's engine has it: its init delay after its last task was
  // prepared. Still ahead while it initializes (core/model.ts); none while a task is being prepared.
  const runningSinceSeconds =
    preparedAt === undefined
      ? undefined
      : progressStartSeconds(preparedAt, spec.checkpoint.initDelaySeconds ?? 0);
  const checkpoints = tasks.map((t) => t.lastCheckpointAtSeconds);
  // Running, the job can resume from the oldest of its tasks' latest checkpoints, or from where this run began
  // (it resumed from a checkpoint, or started afresh): what it did before is not at risk, nor the time it waited.
  // Never after now: initializing, it has nothing at risk yet. Not running (or still being prepared), nothing is at
  // risk until it runs again; never run, undefined (a periodic checkpoint's mean age).
  const oldest = checkpoints.every((c) => c !== undefined)
    ? Math.min(...(checkpoints as number[]))
    : undefined;
  const lastCheckpointSeconds =
    runningSinceSeconds !== undefined
      ? Math.min(input.nowSeconds, Math.max(oldest ?? runningSinceSeconds, runningSinceSeconds))
      : job.startedAtSeconds !== undefined || oldest !== undefined
        ? input.nowSeconds
        : undefined;
  return {
    id: job.id,
    taskIds: tasks.map((t) => t.id),
    reconfigurable,
    arrivalSeconds: job.submittedAtSeconds,
    runningSinceSeconds,
    noMoveSeconds: spec.noMoveSeconds,
    ...(spec.valueOfTimePerJobHour === undefined ? {} : { valueOfTimePerHour: spec.valueOfTimePerJobHour }),
    // Out of service during a move (Eva reference `Job.get_migration_cost`): upload the checkpoint, fetch it on the
    // new instance, then initialize. The upload moves the same bytes as the fetch, so it is estimated alike until
    // measured.
    migrationDelaySeconds: 2 * restoreSeconds + (spec.checkpoint.initDelaySeconds ?? 0),
    lastCheckpointSeconds,
    expectedRemainingSeconds: expectedRemaining(job, input.nowSeconds, runningSinceSeconds),
    ...(spec.network === undefined ? {} : { network: jobNetwork(job, tasks) }),
    ...(spec.spot === undefined ? {} : { spot: spec.spot }),
    ...(spec.spotMaxDelaySeconds === undefined ? {} : { spotMaxDelaySeconds: spec.spotMaxDelaySeconds }),
    ...(spec.checkpoint.everySeconds === undefined
      ? {}
      : { checkpointIntervalSeconds: spec.checkpoint.everySeconds }),
    ...(input.interruptedZones?.has(job.id) === true
      ? { interruptedZones: input.interruptedZones.get(job.id) }
      : {}),
  };
}

/** The spec's network declaration with its root as a task id (the root names an expanded task; default the first). */
function jobNetwork(job: JobRecord, tasks: readonly TaskRecord[]): JobNetwork {
  const network = job.spec.network as NetworkDeclaration;
  const root = network.rootTask;
  const rootIndex = root === undefined ? -1 : expandTasks(job.spec).findIndex((t) => t.name === root);
  return {
    sensitivity: network.sensitivity,
    pattern: network.pattern,
    rootTaskId: (tasks.find((t) => t.index === rootIndex) ?? tasks[0])?.id,
    gibPerHour: network.gibPerHour,
  };
}

/** Declared duration scaled by the progress reported, else minus the time it has been running. */
function expectedRemaining(
  job: JobRecord,
  nowSeconds: number,
  runningSince: number | undefined,
): number | undefined {
  const expected = expectedDurationOf(job.spec);
  if (expected === undefined) return undefined;
  const total = job.totalIterations;
  if (total !== undefined && total > 0 && job.completedIterations > 0)
    return Math.max(0, expected * (1 - Math.min(1, job.completedIterations / total)));
  if (job.startedAtSeconds === undefined) return expected;
  const ranFor = runningSince === undefined ? 0 : Math.max(0, nowSeconds - runningSince);
  return Math.max(0, expected - ranFor);
}
