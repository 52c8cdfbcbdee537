/**
 * Stratus (Chung, Park, Ganger, SoCC '18) as Eva's authors adapted it to a cloud of typed instances
 * (reference `stratus_scheduler.py`; research digest eva-reference-implementation §2 "Baselines" and
 * industry-anchors §5.1). Stratus co-locates tasks that finish at about the same time, so that instances become
 * empty and can be released, using oracle runtimes (the paper gives it job durations: its best case).
 *
 *  - Runtime bins: bin(task) = floor(log2(remaining seconds)), remaining clamped to ≥ 1 s; an instance's bin and
 *    remaining time are the max over its tasks (0 when empty).
 *  - Tasks already on an instance stay; each new task is packed onto an instance of the plan, preferring
 *    1. the same bin (closest remaining time), 2. up-packing into a longer bin (most free capacity, Σ of the
 *    raw vector as the reference sums it), 3. down-packing into a shorter bin (most free capacity).
 *  - Scale-out for the rest: sorted by remaining time, descending, and cut into groups of 1, 2, 3, … tasks (a group
 *    closes early when its next task would fit no type with it). Each group gets the type with the best
 *    cost-efficiency: (group demand on the type's constraining resource ÷ that resource on the smallest type of the
 *    family) ÷ $/h.
 *  - Clearing: an instance using < 50% of every resource is emptied and its tasks re-packed (packing, then
 *    scale-out), unless it hosts a job that may not move or it is a single task on its cheapest type.
 *
 * Deviations from the reference code, all deliberate:
 *  - Cost-efficiency normalizes by the smallest type of the *same* family, as described. The reference's family
 *    filter compares a type with itself, so it normalizes by the globally cheapest type (c7i.large, which has no
 *    GPU: a GPU-constrained group then scores ∞ and the first such type in catalog order wins). The digest does not
 *    say the reference results depend on this, so the described rule is used.
 *  - "< 50% of every resource" is checked over the resources the type has (capacity > 0). In the reference the
 *    GPU test `0 < 0.5 × 0` fails on CPU-only types, so C7i/R7i instances are never cleared.
 *  - A clearing that would rebuild exactly the same instance (same tasks, same type) is undone, so a task is not
 *    migrated for nothing round after round.
 *  - Remaining time comes from `expectedRemainingSeconds` (the oracle); a job without one counts as 1 s (bin 0),
 *    which is where the reference's clamp puts jobs past their duration. Groups sort by remaining, not total,
 *    duration.
 *  - Jobs inside their no-move window are not cleared off their instance (the user asked for it).
 */
import type { Catalog, InstanceType } from '../../core/catalog.js';
import type { ClusterSnapshot } from '../../core/model.js';
import { add, demandOn, fits, type Resources } from '../../core/resources.js';
import { PriceBook } from '../reservation-price.js';
import type { Plan, Scheduler, ThroughputObservation } from '../types.js';
import {
  baselineDecision,
  NO_INTERFERENCE,
  SnapshotView,
  Tally,
  WorkingPlan,
  type WorkingInstance,
} from './common.js';

/** Clearing threshold: an instance below this fraction of every resource is under-used (digest §8). */
export const STRATUS_UNDERUSED_FRACTION = 0.5;

export class StratusScheduler implements Scheduler {
  readonly name = 'stratus';
  private readonly book: PriceBook;
  /** Cheapest type of each family, for the cost-efficiency normalization. */
  private readonly smallestOfFamily: ReadonlyMap<string, InstanceType>;

  constructor(readonly catalog: Catalog) {
    this.book = new PriceBook(catalog);
    const smallest = new Map<string, InstanceType>();
    for (const t of this.book.byCostAscending) if (!smallest.has(t.family)) smallest.set(t.family, t);
    this.smallestOfFamily = smallest;
  }

  /** Stratus learns nothing from throughputs (it is interference-unaware). */
  observe(_snapshot: ClusterSnapshot, _observations: readonly ThroughputObservation[]): void {}

  plan(snapshot: ClusterSnapshot): Plan {
    const view = new SnapshotView(snapshot, this.book);
    const round = new StratusRound(view, this.catalog, this.smallestOfFamily);
    let work = new WorkingPlan(view);
    const tally = new Tally();

    round.placeAll(
      work,
      view.pending.map((t) => t.id),
      tally,
    );

    // Clearing pass over the instances planned so far (reference: the keys of planned_config at this point).
    const cleared: string[] = [];
    for (const id of work.instances.filter((w) => w.taskIds.length > 0).map((w) => w.id)) {
      if (!work.has(id)) continue;
      const inst = work.instance(id);
      if (inst.taskIds.length === 0 || inst.taskIds.some((t) => view.immovable.has(t))) continue;
      if (!isUnderused(inst)) continue;
      if (
        inst.taskIds.length === 1 &&
        this.book.minType(view.task(inst.taskIds[0] as string).demand)?.name === inst.type.name
      )
        continue;
      const before = work.clone();
      const tasks = work.remove(id);
      const trial = new Tally();
      round.placeAll(work, tasks, trial);
      if (rebuiltSame(work, tasks, inst.type)) {
        work = before;
        continue;
      }
      cleared.push(id);
      tally.add('re-placed after clearing', tasks.length);
    }

    const configuration = work.toConfiguration();
    const reason =
      `Stratus: ${view.pending.length} new task(s); ${tally.toString()}` +
      (cleared.length > 0 ? `; cleared under-used instance(s) ${cleared.join(', ')}` : '');
    return {
      configuration,
      decision: baselineDecision(this.name, view, configuration, NO_INTERFERENCE, reason),
    };
  }
}

function isUnderused(inst: WorkingInstance): boolean {
  const cap = inst.type.capacity;
  for (let r = 0; r < 3; r++) {
    const c = cap[r] as number;
    if (c > 0 && !((inst.used[r] as number) < STRATUS_UNDERUSED_FRACTION * c)) return false;
  }
  return true;
}

/** True when the re-placed tasks all ended up together, alone, on one instance of the type they left. */
function rebuiltSame(work: WorkingPlan, tasks: readonly string[], type: InstanceType): boolean {
  const hosts = new Set(tasks.map((t) => work.host(t)));
  if (hosts.size !== 1) return false;
  const host = [...hosts][0];
  if (host === undefined) return false;
  const inst = work.instance(host);
  return inst.type.name === type.name && inst.taskIds.length === tasks.length;
}

/** The packing and scale-out steps of one round. */
class StratusRound {
  constructor(
    private readonly view: SnapshotView,
    private readonly catalog: Catalog,
    private readonly smallestOfFamily: ReadonlyMap<string, InstanceType>,
  ) {}

  /** Oracle remaining seconds of a task's job, clamped to ≥ 1 s (reference `max(1, duration − execution)`). */
  remaining(taskId: string): number {
    const job = this.view.jobs.get(this.view.task(taskId).jobId);
    return Math.max(1, job?.expectedRemainingSeconds ?? 1);
  }

  bin(taskId: string): number {
    return Math.floor(Math.log2(this.remaining(taskId)));
  }

  /** Pack what fits onto instances of the plan, scale out for the rest. */
  placeAll(work: WorkingPlan, taskIds: readonly string[], tally: Tally): void {
    const left = taskIds.filter((t) => !this.pack(work, t, tally));
    this.scaleOut(work, left, tally);
  }

  /** Same bin, then up-pack, then down-pack (reference `_pack`). Returns whether the task was placed. */
  private pack(work: WorkingPlan, taskId: string, tally: Tally): boolean {
    const taskBin = this.bin(taskId);
    const taskRemaining = this.remaining(taskId);
    let same: { inst: WorkingInstance; diff: number } | undefined;
    let up: { inst: WorkingInstance; free: number } | undefined;
    let down: { inst: WorkingInstance; free: number } | undefined;
    for (const inst of work.instances) {
      if (!work.canFit(inst, [taskId])) continue;
      const instBin = Math.max(0, ...inst.taskIds.map((t) => this.bin(t)));
      const free = sum(work.remaining(inst));
      if (instBin === taskBin) {
        const diff = Math.abs(Math.max(0, ...inst.taskIds.map((t) => this.remaining(t))) - taskRemaining);
        if (same === undefined || diff < same.diff) same = { inst, diff };
      } else if (instBin > taskBin) {
        if (up === undefined || free > up.free) up = { inst, free };
      } else if (down === undefined || free > down.free) down = { inst, free };
    }
    const chosen = same ?? up ?? down;
    if (chosen === undefined) return false;
    work.place(taskId, chosen.inst.id);
    tally.add(same !== undefined ? 'same-bin' : up !== undefined ? 'up-packed' : 'down-packed');
    return true;
  }

  /** Groups of 1, 2, 3, … tasks by descending remaining time, each on its most cost-efficient type. */
  private scaleOut(work: WorkingPlan, taskIds: readonly string[], tally: Tally): void {
    const order = taskIds.map((id, i) => ({ id, i, rem: this.remaining(id) }));
    order.sort((a, b) => b.rem - a.rem || a.i - b.i);
    const sorted = order.map((o) => o.id);
    let size = 1;
    for (let i = 0; i < sorted.length;) {
      const group: string[] = [];
      for (let j = i; j < Math.min(i + size, sorted.length); j++) {
        const next = sorted[j] as string;
        if (!this.catalog.types.some((t) => this.groupDemand([...group, next], t) !== undefined)) break;
        group.push(next);
      }
      if (group.length === 0) group.push(sorted[i] as string); // hostable alone by construction (pending tasks)
      const type = this.mostEfficientType(group);
      work.launch(type, group);
      tally.add(`new ${type.name}`);
      i += group.length;
      size += 1;
    }
  }

  /** Σ demand of a group on a type's family if it fits the type, else undefined. */
  private groupDemand(taskIds: readonly string[], type: InstanceType): Resources | undefined {
    let total: Resources = [0, 0, 0];
    for (const id of taskIds) {
      const d = demandOn(this.view.task(id).demand, type.family);
      if (d === undefined) return undefined;
      total = add(total, d);
    }
    return fits(total, type.capacity) ? total : undefined;
  }

  /** Reference `_compute_efficiency_score`, with the smallest type of the same family (see the file comment). */
  private mostEfficientType(group: readonly string[]): InstanceType {
    let best: { type: InstanceType; score: number } | undefined;
    for (const type of this.catalog.types) {
      const demand = this.groupDemand(group, type);
      if (demand === undefined) continue;
      let r = -1;
      let ratio = 0;
      for (let k = 0; k < 3; k++) {
        const c = type.capacity[k] as number;
        if (c <= 0) continue;
        const x = (demand[k] as number) / c;
        if (r < 0 || x > ratio) {
          r = k;
          ratio = x;
        }
      }
      const smallest = this.smallestOfFamily.get(type.family) ?? type;
      const unit =
        (smallest.capacity[r] as number) > 0
          ? (smallest.capacity[r] as number)
          : (type.capacity[r] as number);
      const score = (demand[r] as number) / unit / type.costPerHour;
      if (best === undefined || score > best.score) best = { type, score };
    }
    if (best === undefined) {
      // Only reachable for a group of one task (groups grow only while some type fits): its cheapest type.
      const t = this.view.book.minType(this.view.task(group[0] as string).demand);
      if (t === undefined) throw new Error(`no instance type can host task ${group[0]}`);
      return t;
    }
    return best.type;
  }
}

function sum(r: Resources): number {
  return r[0] + r[1] + r[2];
}
