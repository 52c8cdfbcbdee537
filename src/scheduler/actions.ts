import { typesByName, type Catalog, type InstanceType } from '../core/catalog.js';
import type { ClusterSnapshot, SchedInstance, SchedJob, SchedTask } from '../core/model.js';
import { demandOn, fits, formatResources, type Resources } from '../core/resources.js';
import type { InstancePlacement } from '../core/network.js';
import type { Market } from '../core/market.js';
import type { Configuration, PlannedInstance } from './types.js';

/**
 * Turning a plan into work: a pure diff of the current configuration (the snapshot's committed placements)
 * against a planned one, as Eva's master does when it reconfigures (reference `Master._reconfigure` /
 * `_simulate_reconfigure`, research digest §1 and §7). Runtime-agnostic: the simulator and the controller both carry the actions out,
 * each honouring the gates written on them.
 *
 * Rules (from the reference):
 * - A job moves as a whole (gang semantics, Eva §4.4): if any of its tasks is planned elsewhere, every task
 *   is checkpointed and stopped, then every task starts at its planned instance once all have stopped.
 * - A job with no placement that the plan places is started (a first launch, or a restart from the queue).
 * - A placed job that the plan leaves out is checkpointed and returned to the queue (e.g. a cap evicted it).
 * - Jobs being launched or migrated (not reconfigurable) stay where they are committed; a plan may repeat
 *   them or leave them out, but moving them is an error (a task of theirs committed nowhere is left where it is).
 * - An existing instance the plan leaves out is terminated once no task occupies it (reference
 *   `TerminateInstanceCommand`, gated on the instance being empty).
 */

export interface LaunchInstanceAction {
  readonly kind: 'launch-instance';
  /** The plan's id for the new instance (`new-<n>`); the runtime maps it to the real id it creates. */
  readonly instanceId: string;
  readonly typeName: string;
  /** Where to launch it (zone, cluster placement group), when the plan asks for a place. */
  readonly placement?: InstancePlacement | undefined;
  /** Spot or on demand; absent: on demand. */
  readonly market?: Market | undefined;
}

export interface CheckpointStopAction {
  readonly kind: 'checkpoint-stop';
  readonly jobId: string;
  readonly taskId: string;
  readonly instanceId: string;
  /** `move`: the job restarts elsewhere once all its tasks stopped; `queue`: it goes back to the queue. */
  readonly then: 'move' | 'queue';
}

export interface StartTaskAction {
  readonly kind: 'start-task';
  readonly jobId: string;
  readonly taskId: string;
  readonly instanceId: string;
  /** The target is launched by this plan: the start waits until it is ready (registered). */
  readonly instanceIsNew: boolean;
  /** Gang gate: these tasks (the job's own, being checkpointed) must all have stopped before the start. */
  readonly afterStopOf: readonly string[];
  /**
   * Tasks leaving the target instance in this plan. The start may need their capacity: the runtime starts the
   * task as soon as the instance has room for it, which is at the latest when these have stopped.
   */
  readonly capacityFrom: readonly string[];
}

export interface TerminateInstanceAction {
  readonly kind: 'terminate-instance';
  readonly instanceId: string;
  /** Tasks still occupying the instance now; termination waits until they have stopped or finished. */
  readonly afterEmptyOf: readonly string[];
}

export type Action = LaunchInstanceAction | CheckpointStopAction | StartTaskAction | TerminateInstanceAction;

export interface ConfigurationDiff {
  /** In execution order: checkpoint-stops, instance launches, task starts, terminations. */
  readonly actions: readonly Action[];
  /** Jobs checkpointed to restart elsewhere (each counts as one migration). */
  readonly movedJobIds: readonly string[];
  /** Jobs started from the queue (first launch or restart after an eviction). */
  readonly startedJobIds: readonly string[];
  /** Jobs checkpointed and returned to the queue. */
  readonly queuedJobIds: readonly string[];
}

/** A plan that cannot be carried out (a scheduler bug), with every problem found. */
export class InvalidPlanError extends Error {
  constructor(
    readonly scheduler: string,
    readonly problems: readonly string[],
  ) {
    super(`invalid plan from ${scheduler}:\n  ${problems.join('\n  ')}`);
    this.name = 'InvalidPlanError';
  }
}

export interface DiffOptions {
  /** Names the scheduler in errors. */
  readonly scheduler?: string;
}

/** What the diff knows about the current and the planned configuration. */
interface DiffContext {
  readonly snapshot: ClusterSnapshot;
  readonly planned: Configuration;
  readonly typesByName: ReadonlyMap<string, InstanceType>;
  readonly tasksById: ReadonlyMap<string, SchedTask>;
  readonly currentInstances: ReadonlyMap<string, SchedInstance>;
  readonly plannedInstances: Map<string, PlannedInstance>;
  /** task → planned instance. */
  readonly plannedOf: Map<string, string>;
  /** task → committed instance, for pinned tasks the plan left implicit. */
  readonly keptPinned: Map<string, string>;
  readonly problems: string[];
}

/**
 * Diff `snapshot` (tasks' committed instances) against `planned`. Validates the plan first: every planned task
 * exists and appears once, existing instances keep their type, new instances are marked new, each instance's
 * tasks fit its capacity (with any pinned tasks the plan left implicit), and pinned jobs do not move.
 */
export function diffConfiguration(
  snapshot: ClusterSnapshot,
  planned: Configuration,
  catalog: Catalog,
  options: DiffOptions = {},
): ConfigurationDiff {
  const ctx: DiffContext = {
    snapshot,
    planned,
    typesByName: typesByName(catalog),
    tasksById: new Map(snapshot.tasks.map((t) => [t.id, t])),
    currentInstances: new Map(snapshot.instances.map((i) => [i.id, i])),
    plannedInstances: new Map(),
    plannedOf: new Map(),
    keptPinned: new Map(),
    problems: [],
  };
  readPlannedInstances(ctx);
  keepPinnedJobs(ctx);
  checkCapacity(ctx);
  const jobs = jobChanges(ctx);
  if (ctx.problems.length > 0) throw new InvalidPlanError(options.scheduler ?? 'scheduler', ctx.problems);

  const launches: LaunchInstanceAction[] = planned.instances
    .filter((i) => i.isNew)
    .map((i) => ({
      kind: 'launch-instance',
      instanceId: i.id,
      typeName: i.typeName,
      ...(i.placement === undefined ? {} : { placement: i.placement }),
      ...(i.market === undefined || i.market === 'on-demand' ? {} : { market: i.market }),
    }));
  // Instances the plan drops, unless pinned tasks it left implicit still hold them.
  const heldByPinned = new Set(ctx.keptPinned.values());
  const terminations: TerminateInstanceAction[] = snapshot.instances
    .filter((i) => !ctx.plannedInstances.has(i.id) && !heldByPinned.has(i.id))
    .map((i) => ({ kind: 'terminate-instance', instanceId: i.id, afterEmptyOf: [...i.taskIds] }));
  return {
    actions: [...jobs.stops, ...launches, ...jobs.starts, ...terminations],
    movedJobIds: jobs.movedJobIds,
    startedJobIds: jobs.startedJobIds,
    queuedJobIds: jobs.queuedJobIds,
  };
}

function readPlannedInstances(ctx: DiffContext): void {
  const { plannedInstances, currentInstances, plannedOf, problems } = ctx;
  for (const inst of ctx.planned.instances) {
    if (plannedInstances.has(inst.id)) problems.push(`instance ${inst.id}: appears twice in the plan`);
    plannedInstances.set(inst.id, inst);
    const current = currentInstances.get(inst.id);
    if (inst.isNew && current !== undefined) problems.push(`instance ${inst.id}: marked new but it exists`);
    if (!inst.isNew && current === undefined)
      problems.push(`instance ${inst.id}: not an existing instance and not marked new`);
    if (current !== undefined && current.typeName !== inst.typeName)
      problems.push(`instance ${inst.id}: planned as ${inst.typeName} but it is a ${current.typeName}`);
    if (!ctx.typesByName.has(inst.typeName))
      problems.push(`instance ${inst.id}: unknown instance type ${inst.typeName}`);
    for (const taskId of inst.taskIds) {
      const previous = plannedOf.get(taskId);
      if (!ctx.tasksById.has(taskId)) problems.push(`instance ${inst.id}: unknown task ${taskId}`);
      else if (previous !== undefined)
        problems.push(`task ${taskId}: planned on both ${previous} and ${inst.id}`);
      else plannedOf.set(taskId, inst.id);
    }
  }
}

/**
 * Pinned jobs stay where they are committed; the plan may only repeat that. A pinned task committed nowhere (a gang
 * job's task stopped while a sibling still checkpoints back to the queue) has no place to keep, and a pinned job is
 * never started: its placement is set aside (no start, no room counted) rather than refusing the whole round, which
 * would place no job anywhere until the job settles. The plan's instances are launched as planned: one planned for
 * such a task alone stays empty until the next plan drops it, priced with the plan by the round's cap check.
 */
function keepPinnedJobs(ctx: DiffContext): void {
  for (const job of ctx.snapshot.jobs) {
    if (job.reconfigurable) continue;
    for (const taskId of job.taskIds) {
      const current = ctx.tasksById.get(taskId)?.instanceId;
      const target = ctx.plannedOf.get(taskId);
      if (target === undefined) {
        if (current !== undefined) ctx.keptPinned.set(taskId, current);
      } else if (current === undefined) ctx.plannedOf.delete(taskId);
      else if (target !== current)
        ctx.problems.push(
          `task ${taskId}: job ${job.id} is being launched or migrated and cannot move (to ${target})`,
        );
    }
  }
}

/** Every planned instance (and every existing one keeping implicit pinned tasks) must hold its tasks. */
function checkCapacity(ctx: DiffContext): void {
  const load = new Map<string, string[]>();
  const addLoad = (instId: string, taskId: string): void => {
    const list = load.get(instId);
    if (list === undefined) load.set(instId, [taskId]);
    else list.push(taskId);
  };
  ctx.plannedOf.forEach(addLoad); // (value = instance, key = task)
  ctx.keptPinned.forEach(addLoad);
  for (const [instId, taskIds] of load) {
    const typeName = ctx.plannedInstances.get(instId)?.typeName ?? ctx.currentInstances.get(instId)?.typeName;
    const type = typeName === undefined ? undefined : ctx.typesByName.get(typeName);
    if (type === undefined) continue; // reported already
    let g = 0;
    let c = 0;
    let m = 0;
    for (const taskId of taskIds) {
      const d = demandOn((ctx.tasksById.get(taskId) as SchedTask).demand, type.family);
      if (d === undefined) {
        ctx.problems.push(`task ${taskId}: cannot run on family ${type.family} (instance ${instId})`);
        continue;
      }
      g += d[0];
      c += d[1];
      m += d[2];
    }
    const total: Resources = [g, c, m];
    if (!fits(total, type.capacity))
      ctx.problems.push(
        `instance ${instId} (${type.name}): tasks need ${formatResources(total)}, capacity is ${formatResources(type.capacity)}`,
      );
  }
}

interface JobChanges {
  readonly stops: CheckpointStopAction[];
  readonly starts: StartTaskAction[];
  readonly movedJobIds: string[];
  readonly startedJobIds: string[];
  readonly queuedJobIds: string[];
}

/** Jobs: move, start, return to the queue, or stay; a job is placed all-or-nothing. */
function jobChanges(ctx: DiffContext): JobChanges {
  const { tasksById, plannedOf } = ctx;
  const out: JobChanges = { stops: [], starts: [], movedJobIds: [], startedJobIds: [], queuedJobIds: [] };
  const leaving = new Map<string, string[]>(); // instance → tasks checkpointed off it
  const toStart: { job: SchedJob; afterStopOf: readonly string[] }[] = [];
  for (const job of ctx.snapshot.jobs) {
    if (!job.reconfigurable) continue;
    let placedLater = 0;
    let changed = false;
    const placedNow: string[] = [];
    for (const taskId of job.taskIds) {
      const now = tasksById.get(taskId)?.instanceId;
      const later = plannedOf.get(taskId);
      if (now !== undefined) placedNow.push(taskId);
      if (later !== undefined) placedLater += 1;
      if (now !== later) changed = true;
    }
    if (placedLater > 0 && placedLater < job.taskIds.length) {
      ctx.problems.push(`job ${job.id}: the plan places ${placedLater} of its ${job.taskIds.length} tasks`);
      continue;
    }
    if (!changed) continue;
    if (placedNow.length === 0) {
      out.startedJobIds.push(job.id);
      toStart.push({ job, afterStopOf: [] });
      continue;
    }
    const then = placedLater === 0 ? 'queue' : 'move';
    for (const taskId of placedNow) {
      const from = tasksById.get(taskId)?.instanceId as string;
      out.stops.push({ kind: 'checkpoint-stop', jobId: job.id, taskId, instanceId: from, then });
      const list = leaving.get(from);
      if (list === undefined) leaving.set(from, [taskId]);
      else list.push(taskId);
    }
    if (then === 'queue') out.queuedJobIds.push(job.id);
    else {
      out.movedJobIds.push(job.id);
      toStart.push({ job, afterStopOf: placedNow });
    }
  }
  for (const { job, afterStopOf } of toStart)
    for (const taskId of job.taskIds) {
      const instanceId = plannedOf.get(taskId) as string;
      out.starts.push({
        kind: 'start-task',
        jobId: job.id,
        taskId,
        instanceId,
        instanceIsNew: ctx.plannedInstances.get(instanceId)?.isNew === true,
        afterStopOf,
        capacityFrom: (leaving.get(instanceId) ?? []).filter((t) => tasksById.get(t)?.jobId !== job.id),
      });
    }
  return out;
}
