/**
 * Shared machinery of the baseline schedulers (Stratus, Synergy, Owl, Karpenter-like): reading a snapshot into
 * "what must stay, what may move, what waits for a place", a mutable working plan with per-instance usage, the
 * throughput-normalized reservation price (TNRP, Eva §4.3), and the decision record every baseline reports.
 */
import { setupSeconds, type InstanceType } from '../../core/catalog.js';
import { inNoMoveWindow, type ClusterSnapshot, type SchedJob, type SchedTask } from '../../core/model.js';
import { add, demandOn, fits, sub, type Resources } from '../../core/resources.js';
import { perHourToPerSecond, roundCents } from '../../core/units.js';
import type { ColocationTable } from '../colocation-table.js';
import type { PriceBook } from '../reservation-price.js';
import type {
  CandidateSummary,
  Configuration,
  DecisionRecord,
  PlannedInstance,
  ThroughputObservation,
} from '../types.js';

/** Normalized throughput of `task` when co-located with `others` on one instance (1 = no interference). */
export type RateFn = (task: SchedTask, others: readonly SchedTask[]) => number;

/** Interference-unaware schedulers value every co-location at full speed. */
export const NO_INTERFERENCE: RateFn = () => 1;

/** Why a committed task may not be moved this round. */
export interface Immovable {
  readonly jobId: string;
  readonly why: string;
}

/** A snapshot read once per round: lookups plus the split of tasks the baselines all start from. */
export class SnapshotView {
  readonly jobs: ReadonlyMap<string, SchedJob>;
  readonly tasks: ReadonlyMap<string, SchedTask>;
  /** Instance id → its type, for every instance of the snapshot. */
  readonly instanceTypes: ReadonlyMap<string, InstanceType>;
  /** Instance id → the tasks committed to it (a task's `instanceId` is authoritative), in snapshot order. */
  readonly committedOn: ReadonlyMap<string, readonly string[]>;
  /** Tasks with no (known) instance that some type can host, in snapshot order. */
  readonly pending: readonly SchedTask[];
  /** Tasks no instance type of the catalog can host: left out of the plan and reported as waiting. */
  readonly unhostable: readonly SchedTask[];
  /** Committed tasks that must stay where they are, with why (job launching/migrating, or its no-move window). */
  readonly immovable: ReadonlyMap<string, Immovable>;

  constructor(
    readonly snapshot: ClusterSnapshot,
    readonly book: PriceBook,
  ) {
    this.jobs = new Map(snapshot.jobs.map((j) => [j.id, j]));
    this.tasks = new Map(snapshot.tasks.map((t) => [t.id, t]));
    const types = new Map<string, InstanceType>();
    for (const inst of snapshot.instances) types.set(inst.id, book.type(inst.typeName));
    this.instanceTypes = types;

    const committed = new Map<string, string[]>(snapshot.instances.map((i) => [i.id, []]));
    // Keep each instance's own task order, then any task that names the instance without being listed on it.
    for (const inst of snapshot.instances)
      for (const id of inst.taskIds)
        if (this.tasks.get(id)?.instanceId === inst.id) committed.get(inst.id)?.push(id);
    const pending: SchedTask[] = [];
    const unhostable: SchedTask[] = [];
    for (const t of snapshot.tasks) {
      const list = t.instanceId === undefined ? undefined : committed.get(t.instanceId);
      if (list !== undefined) {
        if (!list.includes(t.id)) list.push(t.id);
      } else if (book.minType(t.demand) === undefined) unhostable.push(t);
      else pending.push(t);
    }
    this.committedOn = committed;
    this.pending = pending;
    this.unhostable = unhostable;

    const immovable = new Map<string, Immovable>();
    const now = snapshot.nowSeconds;
    for (const list of committed.values())
      for (const id of list) {
        const task = this.tasks.get(id) as SchedTask;
        const why = stayReason(this.jobs.get(task.jobId), now);
        if (why !== undefined) immovable.set(id, { jobId: task.jobId, why });
      }
    this.immovable = immovable;
  }

  task(id: string): SchedTask {
    const t = this.tasks.get(id);
    if (t === undefined) throw new Error(`task ${id} is not in the snapshot`);
    return t;
  }

  /** Reservation price of a task in $/hour: its cheapest hosting type (Eva §4.2). */
  reservationPrice(task: SchedTask): number {
    return this.book.minType(task.demand)?.costPerHour ?? 0;
  }

  /** TNRP of a set of tasks on one instance (Eva §4.3): Σ_t RP(t) × rate(t | the others). */
  tnrp(taskIds: readonly string[], rate: RateFn): number {
    const tasks = taskIds.map((id) => this.task(id));
    let total = 0;
    tasks.forEach((t, i) => {
      total +=
        this.reservationPrice(t) *
        rate(
          t,
          tasks.filter((_, j) => j !== i),
        );
    });
    return total;
  }

  /** Jobs kept in place by their no-move window (the `pinned` list of a decision: they could otherwise move). */
  noMoveJobs(): { jobId: string; why: string }[] {
    const out = new Map<string, string>();
    for (const { jobId, why } of this.immovable.values())
      if (this.jobs.get(jobId)?.reconfigurable !== false) out.set(jobId, why);
    return [...out].map(([jobId, why]) => ({ jobId, why }));
  }
}

/**
 * Why a committed task of `job` must stay: the job is being launched or migrated (Eva reference
 * `_create_initial_config` pins those), or it asked not to be moved for a while after starting
 * (like Karpenter's duration-form `do-not-disrupt`). Undefined = it may move.
 */
export function stayReason(job: SchedJob | undefined, nowSeconds: number): string | undefined {
  if (job === undefined) return undefined;
  if (!job.reconfigurable) return 'being launched or migrated';
  if (inNoMoveWindow(job, nowSeconds))
    return `asked not to be moved until ${job.noMoveSeconds} s after its init`;
  return undefined;
}

/** An instance while a plan is being built. */
export interface WorkingInstance {
  readonly id: string;
  readonly type: InstanceType;
  readonly isNew: boolean;
  /** Launch state of an existing instance; new instances are 'new'. */
  readonly state: 'running' | 'launching' | 'new';
  readonly taskIds: string[];
  used: Resources;
  /** An existing instance bought on spot (a job with `spot: never` does not go on it). */
  readonly spot?: boolean | undefined;
}

/**
 * A mutable configuration: every snapshot instance (with its committed tasks, empty ones included, since some
 * baselines pack onto them) plus instances to launch. Empty instances are dropped when the plan is emitted,
 * which tells the runtime to terminate them.
 */
export class WorkingPlan {
  private list: WorkingInstance[] = [];
  private byId = new Map<string, WorkingInstance>();
  private hostOf = new Map<string, string>();
  private nextNew = 1;

  /** `empty` builds a plan with no instances (used by `clone`). */
  constructor(
    readonly view: SnapshotView,
    empty = false,
  ) {
    if (empty) return;
    for (const inst of view.snapshot.instances) {
      const w: WorkingInstance = {
        id: inst.id,
        type: view.instanceTypes.get(inst.id) as InstanceType,
        isNew: false,
        state: inst.state,
        taskIds: [],
        used: [0, 0, 0],
        ...(inst.market === 'spot' ? { spot: true } : {}),
      };
      this.list.push(w);
      this.byId.set(w.id, w);
      for (const id of view.committedOn.get(inst.id) ?? []) this.place(id, w.id);
    }
  }

  /** Instances in order: the snapshot's, then new ones in launch order. */
  get instances(): readonly WorkingInstance[] {
    return this.list;
  }

  instance(id: string): WorkingInstance {
    const w = this.byId.get(id);
    if (w === undefined) throw new Error(`instance ${id} is not in the plan`);
    return w;
  }

  has(id: string): boolean {
    return this.byId.has(id);
  }

  host(taskId: string): string | undefined {
    return this.hostOf.get(taskId);
  }

  /** A task's demand on an instance's family, or undefined if it cannot run there. */
  demandOn(taskId: string, inst: WorkingInstance): Resources | undefined {
    return demandOn(this.view.task(taskId).demand, inst.type.family);
  }

  remaining(inst: WorkingInstance): Resources {
    return sub(inst.type.capacity, inst.used);
  }

  /** Whether the tasks can join the instance on top of what it already hosts. */
  canFit(inst: WorkingInstance, taskIds: readonly string[]): boolean {
    let total = inst.used;
    for (const id of taskIds) {
      const d = this.demandOn(id, inst);
      if (d === undefined) return false;
      total = add(total, d);
    }
    return fits(total, inst.type.capacity);
  }

  place(taskId: string, instanceId: string): void {
    if (this.hostOf.has(taskId)) throw new Error(`task ${taskId} is already placed`);
    const inst = this.instance(instanceId);
    // A committed task whose demand is unknown on its family is counted as filling the instance (conservative).
    const d = this.demandOn(taskId, inst) ?? inst.type.capacity;
    inst.taskIds.push(taskId);
    inst.used = add(inst.used, d);
    this.hostOf.set(taskId, instanceId);
  }

  unplace(taskId: string): void {
    const id = this.hostOf.get(taskId);
    if (id === undefined) return;
    const inst = this.instance(id);
    inst.taskIds.splice(inst.taskIds.indexOf(taskId), 1);
    inst.used = inst.taskIds.reduce<Resources>(
      (u, t) => add(u, this.demandOn(t, inst) ?? inst.type.capacity),
      [0, 0, 0],
    );
    this.hostOf.delete(taskId);
  }

  /** Take an instance out of the plan (it will be terminated); returns its tasks, now unplaced. */
  remove(instanceId: string): string[] {
    const inst = this.instance(instanceId);
    const tasks = [...inst.taskIds];
    for (const t of tasks) this.hostOf.delete(t);
    this.list = this.list.filter((w) => w !== inst);
    this.byId.delete(instanceId);
    return tasks;
  }

  /** A new instance to launch, id `new-<n>` (skipping any id the snapshot already uses). */
  launch(type: InstanceType, taskIds: readonly string[] = []): WorkingInstance {
    let id = `new-${this.nextNew++}`;
    while (this.view.instanceTypes.has(id)) id = `new-${this.nextNew++}`;
    const w: WorkingInstance = { id, type, isNew: true, state: 'new', taskIds: [], used: [0, 0, 0] };
    this.list.push(w);
    this.byId.set(id, w);
    for (const t of taskIds) this.place(t, id);
    return w;
  }

  clone(): WorkingPlan {
    const copy = new WorkingPlan(this.view, true);
    copy.list = this.list.map((w) => ({ ...w, taskIds: [...w.taskIds] }));
    copy.byId = new Map(copy.list.map((w) => [w.id, w]));
    copy.hostOf = new Map(this.hostOf);
    copy.nextNew = this.nextNew;
    return copy;
  }

  /** The plan: non-empty instances only (an instance left out is terminated by the runtime). */
  toConfiguration(): Configuration {
    const instances: PlannedInstance[] = this.list
      .filter((w) => w.taskIds.length > 0)
      .map((w) => ({ id: w.id, typeName: w.type.name, isNew: w.isNew, taskIds: [...w.taskIds] }));
    return { instances };
  }
}

/** Pending tasks first-fit-decreasing key: CPU, then memory, then GPU of a task's demand on its cheapest type. */
export function demandForSorting(view: SnapshotView, task: SchedTask): Resources {
  const t = view.book.minType(task.demand);
  return (t === undefined ? undefined : demandOn(task.demand, t.family)) ?? [0, 0, 0];
}

/**
 * The numbers behind a baseline's plan, defined as for Eva's candidates so rounds can be compared across
 * schedulers: saving rate = (Σ TNRP under the scheduler's own rate model − Σ $/h rounded to cents)/3600; migration
 * cost = each new instance's price over its setup time + each moved job's out-of-service time and work lost since
 * its last checkpoint, at the job's reservation price.
 */
export function summarizePlan(
  view: SnapshotView,
  configuration: Configuration,
  rate: RateFn,
): CandidateSummary {
  let costPerHour = 0;
  let tnrp = 0;
  let newInstances = 0;
  let migrationCost = 0;
  const moved = new Set<string>();
  for (const inst of configuration.instances) {
    const type = view.book.type(inst.typeName);
    costPerHour += type.costPerHour;
    tnrp += view.tnrp(inst.taskIds, rate);
    if (inst.isNew) {
      newInstances += 1;
      migrationCost += perHourToPerSecond(type.costPerHour) * setupSeconds(type);
    }
    for (const id of inst.taskIds) {
      const t = view.task(id);
      if (t.instanceId !== undefined && view.instanceTypes.has(t.instanceId) && t.instanceId !== inst.id)
        moved.add(t.jobId);
    }
  }
  const now = view.snapshot.nowSeconds;
  for (const jobId of moved) {
    const job = view.jobs.get(jobId);
    if (job === undefined) continue;
    const rpPerHour = job.taskIds.reduce(
      (s, id) => s + (view.tasks.has(id) ? view.reservationPrice(view.task(id)) : 0),
      0,
    );
    const lost = job.lastCheckpointSeconds === undefined ? 0 : Math.max(0, now - job.lastCheckpointSeconds);
    migrationCost += (job.migrationDelaySeconds + lost) * perHourToPerSecond(rpPerHour);
  }
  return {
    // Baselines build one incremental change of the current configuration; they report it as the 'partial' candidate.
    name: 'partial',
    costPerHour,
    instances: configuration.instances.length,
    newInstances,
    savingPerSecond: perHourToPerSecond(tnrp - roundCents(costPerHour)),
    migrationCost,
    movedJobs: [...moved].sort(),
  };
}

/** The decision record of a baseline round (`chosen: 'baseline'`, one summary, the scheduler's own reason). */
export function baselineDecision(
  scheduler: string,
  view: SnapshotView,
  configuration: Configuration,
  rate: RateFn,
  reason: string,
  options: { readonly reportNoMove?: boolean } = {},
): DecisionRecord {
  const waitingJobs = [...new Set(view.unhostable.map((t) => t.jobId))];
  return {
    scheduler,
    nowSeconds: view.snapshot.nowSeconds,
    candidates: [summarizePlan(view, configuration, rate)],
    chosen: 'baseline',
    reason,
    waiting: waitingJobs.map((jobId) => ({
      jobId,
      cap: 'no instance type of the catalog can host it',
      capName: 'no instance type',
    })),
    pinned: options.reportNoMove === false ? [] : view.noMoveJobs(),
  };
}

/**
 * Learn a co-location table from observed normalized throughputs, as Eva does (§4.3–§4.4; reference
 * `_update_contention_map`): a task's co-located set is the other observed tasks on its instance; a single-task
 * job records its value directly; a multi-task job, once all its tasks are observed, records its slowest value
 * against the task Eva's attribution rules pick.
 */
export function learnColocation(
  table: ColocationTable,
  snapshot: ClusterSnapshot,
  observations: readonly ThroughputObservation[],
): void {
  const value = new Map(observations.map((o) => [o.taskId, o.normalizedThroughput]));
  const tasks = new Map(snapshot.tasks.map((t) => [t.id, t]));
  const observedOn = new Map<string, { id: string; key: string }[]>();
  for (const inst of snapshot.instances)
    observedOn.set(
      inst.id,
      inst.taskIds.flatMap((id) => {
        const t = tasks.get(id);
        return t !== undefined && value.has(id) && t.instanceId === inst.id ? [{ id, key: t.key }] : [];
      }),
    );
  const othersOf = (taskId: string): string[] | undefined => {
    const inst = tasks.get(taskId)?.instanceId;
    const here = inst === undefined ? undefined : observedOn.get(inst);
    return here?.filter((x) => x.id !== taskId).map((x) => x.key);
  };
  for (const job of snapshot.jobs) {
    const observed = job.taskIds.map((id) => value.get(id));
    if (observed.length === 0 || observed.some((v) => v === undefined || !(v > 0))) continue;
    const members: { key: string; others: string[] }[] = [];
    for (const id of job.taskIds) {
      const key = tasks.get(id)?.key;
      const others = othersOf(id);
      if (key === undefined || others === undefined) break;
      members.push({ key, others });
    }
    if (members.length !== job.taskIds.length) continue;
    const values = observed as number[];
    if (members.length === 1) {
      const only = members[0] as { key: string; others: string[] };
      table.record(only.key, only.others, values[0] as number);
    } else table.recordJob(members, Math.min(...values));
  }
}

/** Count how many placements each rule made, for a reason line such as "2 same-bin, 1 new instance". */
export class Tally {
  private readonly counts = new Map<string, number>();

  add(label: string, n = 1): void {
    this.counts.set(label, (this.counts.get(label) ?? 0) + n);
  }

  toString(): string {
    const parts = [...this.counts].filter(([, n]) => n > 0).map(([label, n]) => `${n} ${label}`);
    return parts.length === 0 ? 'no change' : parts.join(', ');
  }
}
