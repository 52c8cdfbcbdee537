/**
 * A Karpenter-like baseline (kubernetes-sigs/karpenter; research digest industry-anchors §1.2–§1.3 and §(c) 14):
 * the industrial reference point. Interference-unaware, gang-unaware, and it never asks whether a move pays back.
 *
 * Provisioning (`provisioning/scheduling`): pending tasks sorted first-fit-decreasing (CPU, then memory, on each
 * task's cheapest type; ties by arrival then id) are tried on existing instances (running before launching), then
 * on the new instances opened in this round (fewest tasks first), else they open a new one. A new instance keeps
 * every type that still fits what it holds and launches the cheapest (EC2 Fleet `lowest-price`); GPU types are
 * dropped for tasks that request no GPU unless nothing else fits (the AWS provider's "exotic" filter).
 *
 * Consolidation (`disruption/`), then, pass after pass until no command is found (Karpenter polls every 10 s,
 * so a 300 s round holds many passes):
 *  - Emptiness: existing instances without tasks are deleted.
 *  - Candidates: running existing instances with tasks, none of which may not move (a job being launched or
 *    migrated, or inside its no-move window: `do-not-disrupt`), and which received no task this round (tasks move
 *    at most once per round). Sorted by price / disruption cost, descending, where disruption cost = 1 per
 *    instance + 1 per task (`RescheduleDisruptionCost` with default pod costs).
 *  - Multi-node: the longest prefix (2 … 100 candidates, binary search) whose tasks fit on the other instances plus
 *    at most one new instance; then single-node: the first candidate that does.
 *  - Simulating a removal schedules its tasks like provisioning does onto every other planned instance, and the
 *    rest onto one new instance. All placed elsewhere: delete. Otherwise: replace, but only with a type strictly
 *    cheaper than the removed instances together, never one of the removed types, cheapest first.
 *  - Balanced (optional, `designs/balanced-consolidation.md`, k = 2): a move passes when
 *    (savings / fleet $/h) / (disruption / fleet disruption) ≥ 1/k, savings = removed − created $/h, disruption =
 *    1 per removed instance + 1 per evicted task; zero or negative savings never pass.
 *  - WhenEmpty (optional): Emptiness only, no consolidation of instances with tasks. This is also what every
 *    long batch job annotated `karpenter.sh/do-not-disrupt` gets, as Karpenter's docs advise for jobs that "would
 *    need to start over if interrupted" (digest §1.3.2): without checkpointing, an evicted task restarts from scratch.
 *
 * The two consolidating policies move tasks with fleetwise's checkpoint/restore, so they stand for Karpenter running
 * jobs that checkpoint on SIGTERM and resume where they stopped: the most favourable case for Karpenter.
 */
import { compareText } from '../../core/compare.js';
import type { Catalog, InstanceType } from '../../core/catalog.js';
import type { ClusterSnapshot } from '../../core/model.js';
import { add, demandOn, fits, ZERO, type Resources } from '../../core/resources.js';
import { PriceBook } from '../reservation-price.js';
import type { Plan, Scheduler, ThroughputObservation } from '../types.js';
import {
  baselineDecision,
  demandForSorting,
  NO_INTERFERENCE,
  SnapshotView,
  Tally,
  WorkingPlan,
  type WorkingInstance,
} from './common.js';

/** Karpenter's `spec.disruption.consolidationPolicy` (digest §1.3.2). */
export type ConsolidationPolicy = 'WhenEmptyOrUnderutilized' | 'Balanced' | 'WhenEmpty';

const NAME_OF_POLICY: Readonly<Record<ConsolidationPolicy, string>> = {
  WhenEmptyOrUnderutilized: 'karpenter',
  Balanced: 'karpenter-balanced',
  WhenEmpty: 'karpenter-when-empty',
};

export interface KarpenterOptions {
  /** Default WhenEmptyOrUnderutilized, Karpenter's default. */
  readonly policy?: ConsolidationPolicy;
  /** Balanced's k (`consolidationThreshold`): a move passes when its score ≥ 1/k. Default 2. */
  readonly consolidationThreshold?: number;
  /**
   * The fleet is spot (karpenter-spot). Karpenter consolidates a spot node only by deleting it: replacing it with a
   * cheaper spot node takes the SpotToSpotConsolidation feature gate, off by default (digest §1.3 "Spot-to-spot";
   * with the gate, a single-node replace also needs ≥ 15 cheaper spot types, against a race down the
   * price-capacity-optimized ladder). Default false.
   */
  readonly spotNodes?: boolean;
}

/** Karpenter's cap on multi-node consolidation candidates (`multinodeconsolidation.go`). */
export const MAX_MULTI_NODE_CANDIDATES = 100;
export const DEFAULT_CONSOLIDATION_THRESHOLD = 2;

/** A consolidation command: remove `removed`, place their tasks as `moves`, maybe launch one replacement. */
interface Command {
  readonly removed: readonly WorkingInstance[];
  readonly moves: readonly { readonly taskId: string; readonly to: string }[];
  readonly replacement?: { readonly type: InstanceType; readonly taskIds: readonly string[] } | undefined;
  readonly savingsPerHour: number;
  readonly score?: number | undefined;
}

export class KarpenterScheduler implements Scheduler {
  readonly name: string;
  private readonly book: PriceBook;
  private readonly policy: ConsolidationPolicy;
  private readonly k: number;
  /** Consolidation may launch a replacement (not for spot nodes: KarpenterOptions.spotNodes). */
  private readonly replaces: boolean;

  constructor(
    readonly catalog: Catalog,
    options: KarpenterOptions = {},
  ) {
    this.book = new PriceBook(catalog);
    this.policy = options.policy ?? 'WhenEmptyOrUnderutilized';
    this.k = options.consolidationThreshold ?? DEFAULT_CONSOLIDATION_THRESHOLD;
    if (!(this.k > 0)) throw new Error(`consolidationThreshold must be > 0, got ${this.k}`);
    this.name = NAME_OF_POLICY[this.policy];
    this.replaces = options.spotNodes !== true;
  }

  /** Karpenter does not model interference. */
  observe(_snapshot: ClusterSnapshot, _observations: readonly ThroughputObservation[]): void {}

  plan(snapshot: ClusterSnapshot): Plan {
    const view = new SnapshotView(snapshot, this.book);
    const work = new WorkingPlan(view);
    const sim = new SchedulingSimulation(view, this.book);
    const tally = new Tally();
    const touched = new Set<string>();

    // Provisioning.
    const existing = [...work.instances].sort((a, b) => stateRank(a) - stateRank(b));
    const claims = sim.schedule(sim.ffd(view.pending.map((t) => t.id)), existing);
    if (claims === undefined) throw new Error('unreachable: provisioning may open any number of instances');
    for (const m of claims.moves) {
      work.place(m.taskId, m.to);
      touched.add(m.to);
    }
    tally.add('pending task(s) onto existing capacity', claims.moves.length);
    for (const c of claims.newInstances) {
      work.launch(c.type, c.taskIds);
      tally.add(`new ${c.type.name}`);
    }

    // Emptiness.
    for (const inst of [...work.instances])
      if (!inst.isNew && inst.taskIds.length === 0) work.remove(inst.id);

    // Consolidation passes: each command removes at least one candidate, and nothing it creates or fills is a
    // candidate again this round, so the loop ends.
    const commands: string[] = [];
    const balanced = this.policy === 'Balanced';
    for (;;) {
      if (this.policy === 'WhenEmpty') break;
      const candidates = this.candidates(work, view, touched);
      if (candidates.length === 0) break;
      const totals = balanced ? fleetTotals(work) : undefined;
      const cmd =
        this.multiNode(work, sim, candidates, totals) ?? this.singleNode(work, sim, candidates, totals);
      if (cmd === undefined) break;
      for (const r of cmd.removed) work.remove(r.id);
      for (const m of cmd.moves) {
        work.place(m.taskId, m.to);
        touched.add(m.to);
      }
      let what = 'delete';
      if (cmd.replacement !== undefined) {
        const w = work.launch(cmd.replacement.type, cmd.replacement.taskIds);
        touched.add(w.id);
        what = `replace with ${cmd.replacement.type.name}`;
      }
      const score =
        cmd.score === undefined ? '' : `, score ${cmd.score.toFixed(2)} ≥ ${(1 / this.k).toFixed(2)}`;
      commands.push(
        `${what} ${cmd.removed.map((r) => `${r.id} (${r.type.name})`).join(' + ')} saving $${cmd.savingsPerHour.toFixed(4)}/h${score}`,
      );
    }

    const configuration = work.toConfiguration();
    const reason =
      `Karpenter (${this.policy}${balanced ? `, k=${this.k}` : ''}): ${tally.toString()}; ` +
      (commands.length === 0 ? 'no consolidation' : `consolidation: ${commands.join('; ')}`);
    return {
      configuration,
      decision: baselineDecision(this.name, view, configuration, NO_INTERFERENCE, reason),
    };
  }

  private candidates(work: WorkingPlan, view: SnapshotView, touched: ReadonlySet<string>): WorkingInstance[] {
    const list = work.instances.filter(
      (w) =>
        !w.isNew &&
        w.state === 'running' &&
        w.taskIds.length > 0 &&
        !touched.has(w.id) &&
        !w.taskIds.some((t) => view.immovable.has(t)),
    );
    // SavingsRatio = price / RescheduleDisruptionCost, descending; ties by id for determinism.
    const ratio = (w: WorkingInstance) => w.type.costPerHour / (1 + w.taskIds.length);
    return list.sort((a, b) => ratio(b) - ratio(a) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }

  /** Binary search on the prefix length (Karpenter `firstNConsolidationOption`); the last valid command wins. */
  private multiNode(
    work: WorkingPlan,
    sim: SchedulingSimulation,
    candidates: readonly WorkingInstance[],
    totals: FleetTotals | undefined,
  ): Command | undefined {
    const n = Math.min(candidates.length, MAX_MULTI_NODE_CANDIDATES);
    let lo = 2;
    let hi = n;
    let best: Command | undefined;
    while (lo <= hi) {
      const mid = Math.floor((lo + hi) / 2);
      const cmd = this.evaluate(work, sim, candidates.slice(0, mid), totals);
      if (cmd !== undefined) {
        best = cmd;
        lo = mid + 1;
      } else hi = mid - 1;
    }
    return best;
  }

  private singleNode(
    work: WorkingPlan,
    sim: SchedulingSimulation,
    candidates: readonly WorkingInstance[],
    totals: FleetTotals | undefined,
  ): Command | undefined {
    for (const c of candidates) {
      const cmd = this.evaluate(work, sim, [c], totals);
      if (cmd !== undefined) return cmd;
    }
    return undefined;
  }

  /** Simulate removing `removed`: a valid delete or strictly-cheaper single replace, approved by the policy. */
  private evaluate(
    work: WorkingPlan,
    sim: SchedulingSimulation,
    removed: readonly WorkingInstance[],
    totals: FleetTotals | undefined,
  ): Command | undefined {
    const removedPrice = removed.reduce((s, r) => s + r.type.costPerHour, 0);
    // Balanced's pre-filter: when even the best case, deleting outright, cannot pass, skip the simulation.
    if (totals !== undefined && !(balancedScore(totals, removed, removedPrice) >= 1 / this.k))
      return undefined;
    const removedIds = new Set(removed.map((r) => r.id));
    const destinations = work.instances
      .filter((w) => !removedIds.has(w.id))
      .sort((a, b) => stateRank(a) - stateRank(b));
    const tasks = sim.ffd(removed.flatMap((r) => r.taskIds));
    const removedTypes = new Set(removed.map((r) => r.type.name));
    const result = sim.schedule(tasks, destinations, {
      maxNewInstances: this.replaces ? 1 : 0,
      allowType: (t) => t.costPerHour < removedPrice && !removedTypes.has(t.name),
    });
    if (result === undefined) return undefined;
    const replacement = result.newInstances[0];
    const savingsPerHour = removedPrice - (replacement?.type.costPerHour ?? 0);
    if (!(savingsPerHour > 0)) return undefined;
    let score: number | undefined;
    if (totals !== undefined) {
      score = balancedScore(totals, removed, savingsPerHour);
      if (!(score >= 1 / this.k)) return undefined;
    }
    return { removed, moves: result.moves, replacement, savingsPerHour, score };
  }
}

/** The fleet's $/h and disruption cost, Balanced's denominators (snapshotted once per consolidation pass). */
interface FleetTotals {
  readonly cost: number;
  readonly disruption: number;
}

function fleetTotals(work: WorkingPlan): FleetTotals {
  let cost = 0;
  let disruption = 0;
  for (const w of work.instances) {
    if (w.taskIds.length === 0 && w.isNew) continue;
    cost += w.type.costPerHour;
    disruption += 1 + w.taskIds.length;
  }
  return { cost, disruption };
}

/** Balanced consolidation score (`balanced.go` ScoreMove): (savings / fleet $/h) / (disruption / fleet disruption). */
function balancedScore(
  totals: FleetTotals,
  removed: readonly WorkingInstance[],
  savingsPerHour: number,
): number {
  const disruption = removed.reduce((s, r) => s + 1 + r.taskIds.length, 0);
  if (!(totals.cost > 0) || !(savingsPerHour > 0)) return 0;
  return savingsPerHour / totals.cost / (disruption / totals.disruption);
}

/** fits(used + extra + d, capacity) without building the sums (the hot loop of every scheduling simulation). */
function fitsWith(used: Resources, extra: Resources, d: Resources, capacity: Resources): boolean {
  const eps = 1e-9;
  return (
    used[0] + extra[0] + d[0] <= capacity[0] + eps &&
    used[1] + extra[1] + d[1] <= capacity[1] + eps &&
    used[2] + extra[2] + d[2] <= capacity[2] + eps
  );
}

/** Initialized instances are tried before in-flight ones, then instances opened this round. */
function stateRank(w: WorkingInstance): number {
  return w.state === 'running' ? 0 : w.state === 'launching' ? 1 : 2;
}

interface Scheduled {
  readonly moves: { taskId: string; to: string }[];
  readonly newInstances: { type: InstanceType; taskIds: string[] }[];
}

/** A new instance being filled: the tasks it holds; the types still open to it are those that fit them all. */
interface Claim {
  readonly taskIds: string[];
}

/** Karpenter's scheduling simulation, shared by provisioning and consolidation. */
class SchedulingSimulation {
  constructor(
    private readonly view: SnapshotView,
    private readonly book: PriceBook,
  ) {}

  /** Every task's place in first-fit-decreasing order (a total order), ranked once per plan. */
  private ffdRank: ReadonlyMap<string, number> | undefined;

  /** First-fit-decreasing order: CPU, then memory, then GPU descending; ties by job arrival, then task id. */
  ffd(taskIds: readonly string[]): string[] {
    this.ffdRank ??= this.rankAll();
    const rank = this.ffdRank;
    // The order is total, so sorting a subset by the global rank gives the subset's own FFD order.
    return [...taskIds].sort((a, b) => (rank.get(a) as number) - (rank.get(b) as number));
  }

  private rankAll(): Map<string, number> {
    const taskIds = [...this.view.tasks.keys()];
    const key = new Map(taskIds.map((id) => [id, demandForSorting(this.view, this.view.task(id))]));
    const arrival = (id: string) => this.view.jobs.get(this.view.task(id).jobId)?.arrivalSeconds ?? 0;
    const sorted = [...taskIds].sort((a, b) => {
      const da = key.get(a) as Resources;
      const db = key.get(b) as Resources;
      return db[1] - da[1] || db[2] - da[2] || db[0] - da[0] || arrival(a) - arrival(b) || compareText(a, b);
    });
    return new Map(sorted.map((id, i) => [id, i]));
  }

  /**
   * Place tasks onto `destinations` (first fit, in order) and otherwise onto new instances (fewest tasks first, a
   * new one when none fits). Returns undefined when more than `maxNewInstances` would be needed or a new
   * instance would have no allowed type. Modifies nothing.
   */
  schedule(
    taskIds: readonly string[],
    destinations: readonly WorkingInstance[],
    options: {
      readonly maxNewInstances?: number;
      readonly allowType?: (t: InstanceType) => boolean;
    } = {},
  ): Scheduled | undefined {
    const maxNew = options.maxNewInstances ?? Number.POSITIVE_INFINITY;
    const allow = options.allowType ?? (() => true);
    const extra = new Map<string, Resources>(); // usage added to destinations in this simulation
    const moves: { taskId: string; to: string }[] = [];
    const claims: Claim[] = [];
    for (const id of taskIds) {
      const task = this.view.task(id);
      const demand = task.demand;
      // A pod requiring on-demand capacity (karpenter.sh/capacity-type) schedules on no spot node.
      const onDemandOnly = this.view.jobs.get(task.jobId)?.spot === 'never';
      const dest = destinations.find((w) => {
        if (onDemandOnly && w.spot === true) return false;
        const d = demandOn(demand, w.type.family);
        return d !== undefined && fitsWith(w.used, extra.get(w.id) ?? ZERO, d, w.type.capacity);
      });
      if (dest !== undefined) {
        const d = demandOn(demand, dest.type.family) as Resources;
        extra.set(dest.id, add(extra.get(dest.id) ?? [0, 0, 0], d));
        moves.push({ taskId: id, to: dest.id });
        continue;
      }
      const open = claims
        .map((c, i) => ({ c, i }))
        .sort((a, b) => a.c.taskIds.length - b.c.taskIds.length || a.i - b.i)
        .find(({ c }) => this.launchType([...c.taskIds, id], allow) !== undefined);
      if (open !== undefined) {
        open.c.taskIds.push(id);
        continue;
      }
      if (claims.length >= maxNew || this.launchType([id], allow) === undefined) return undefined;
      claims.push({ taskIds: [id] });
    }
    const newInstances = claims.map((c) => ({
      type: this.launchType(c.taskIds, allow) as InstanceType,
      taskIds: c.taskIds,
    }));
    return { moves, newInstances };
  }

  /**
   * The type a new instance holding `taskIds` launches as: the cheapest allowed type that fits them all, without
   * GPU types when no task requests a GPU unless only GPU types fit (the AWS provider's exotic-type filter).
   */
  launchType(taskIds: readonly string[], allow: (t: InstanceType) => boolean): InstanceType | undefined {
    const tasks = taskIds.map((id) => this.view.task(id));
    const wantsGpu = tasks.some((t) => Object.values(t.demand).some((d) => d[0] > 0));
    let fallback: InstanceType | undefined;
    for (const type of this.book.byCostAscending) {
      if (!allow(type)) continue;
      let total: Resources = [0, 0, 0];
      let ok = true;
      for (const t of tasks) {
        const d = demandOn(t.demand, type.family);
        if (d === undefined) {
          ok = false;
          break;
        }
        total = add(total, d);
      }
      if (!ok || !fits(total, type.capacity)) continue;
      if (!wantsGpu && type.capacity[0] > 0) {
        fallback ??= type;
        continue;
      }
      return type;
    }
    return fallback;
  }
}
