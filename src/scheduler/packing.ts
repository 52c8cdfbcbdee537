import { compareText } from '../core/compare.js';
import type { InstanceType } from '../core/catalog.js';
import { alignment, demandOn, fits, type FamilyDemand, type Resources } from '../core/resources.js';
import type { ColocationTable } from './colocation-table.js';
import { demandSignature, multiTaskRate } from './reservation-price.js';

/** A task as the packing heuristics see it. */
export interface PackTask {
  readonly id: string;
  readonly jobId: string;
  readonly key: string;
  readonly demand: FamilyDemand;
  /** Reservation price in $/hour (PriceBook.reservationPrice). */
  readonly rp: number;
  readonly jobTaskCount: number;
  readonly currentInstanceId?: string | undefined;
  /** Set for tasks of network-aware multi-task jobs (latency-aware placement): see TaskLatency. */
  readonly latency?: TaskLatency | undefined;
  /**
   * Its job never runs on spot (`spot: never`, or one interruption would delay it past its bound) and the fleet has
   * spot instances: it may not go on one of them (but may stay on the one it is on).
   */
  readonly onDemandOnly?: boolean | undefined;
  /**
   * Value of time: $ per hour of delay to the task's job, divided among the job's tasks (absent: 0). A task at
   * normalized throughput r loses (1 − r) of each hour it runs, so a set is worth Σ RP·r − v·(1 − r): see
   * compositionValue.
   */
  readonly timeValue?: number | undefined;
}

/**
 * How a task's job fares on the network (NoMora, research digest §10.2): its latency factor P_job multiplies the
 * job's throughput, hence every one of its tasks' TNRP. A set holding all the job's tasks puts them on one instance
 * (`together`); otherwise the job spans instances (`spread`, what its placement domain is expected to give).
 */
export interface TaskLatency {
  readonly jobId: string;
  /** The job's root task (placed first; the others follow it, NoMora §5.1). */
  readonly isRoot: boolean;
  readonly together: number;
  readonly spread: number;
}

/** A class identity's latency part: tasks of different aware jobs, or a root and its job's others, never share one. */
export function latencyTag(latency: TaskLatency | undefined): string {
  return latency === undefined
    ? ''
    : `${latency.jobId}\u0000${latency.isRoot ? 'root' : ''}\u0000${latency.together}\u0000${latency.spread}`;
}

/**
 * How set values are computed. Eva uses the throughput-normalized reservation price (TNRP, §4.3) with the
 * multi-task correction inside top-down packing (§4.4); the ablations switch either off.
 */
export interface RateModel {
  readonly table: ColocationTable;
  /** false = eva-rp: plain reservation prices, interference ignored. */
  readonly throughputAware: boolean;
  /** false = eva-single: tasks of multi-task jobs treated as independent. */
  readonly multiTaskAware: boolean;
  /**
   * false: set values leave out the value of the time interference costs (TaskClass.timeValue), i.e. dollars only.
   * Absent or true: included. Eva prices candidates both ways to show both parts of a decision.
   */
  readonly valueOfTime?: boolean;
}

/**
 * Tasks that are interchangeable for packing (same key, demand and job size) form a class. Traces repeat a few
 * dozen demand vectors, so the greedy loops iterate over classes instead of tasks: this is what makes
 * Full Reconfiguration run in milliseconds for thousands of tasks (the paper's O(n²) loop took 22 s for 8,000).
 */
export class TaskClass {
  private readonly unplaced: PackTask[] = [];
  /** Members committed somewhere, by instance id (picked from the reuse instance first). */
  private readonly placed = new Map<string, PackTask[]>();
  private placedOrder: string[] = [];
  count = 0;
  /** Interned identity in the table of the current plan (see compositionValue). */
  private identity: { table: ColocationTable; id: number } | undefined;

  constructor(
    readonly index: number,
    readonly key: string,
    readonly demand: FamilyDemand,
    readonly rp: number,
    readonly jobTaskCount: number,
    readonly latency?: TaskLatency | undefined,
    /** $/h of delay per task (PackTask.timeValue); 0 when time is not weighed. */
    readonly timeValue = 0,
    /** Its tasks may not go on spot instances (PackTask.onDemandOnly). */
    readonly onDemandOnly = false,
  ) {}

  add(t: PackTask): void {
    this.count += 1;
    if (t.currentInstanceId === undefined) {
      this.unplaced.push(t);
      return;
    }
    let list = this.placed.get(t.currentInstanceId);
    if (list === undefined) {
      list = [];
      this.placed.set(t.currentInstanceId, list);
      this.placedOrder.push(t.currentInstanceId);
    }
    list.push(t);
  }

  /** Members committed to `instanceId` still available. */
  countOn(instanceId: string | undefined): number {
    return instanceId === undefined ? 0 : (this.placed.get(instanceId)?.length ?? 0);
  }

  /**
   * Take a member: one on `preferInstanceId` if any (no needless migration), else an unplaced one, else one from
   * the instance with the fewest members of this class left (tasks on instances that keep more of them are
   * likelier to stay put later).
   */
  take(preferInstanceId: string | undefined): PackTask {
    if (this.count === 0) throw new Error(`class ${this.key} is empty`);
    this.count -= 1;
    if (preferInstanceId !== undefined) {
      const list = this.placed.get(preferInstanceId);
      if (list !== undefined && list.length > 0) return list.pop() as PackTask;
    }
    if (this.unplaced.length > 0) return this.unplaced.pop() as PackTask;
    this.placedOrder = this.placedOrder.filter((id) => (this.placed.get(id)?.length ?? 0) > 0);
    let bestId = this.placedOrder[0] as string;
    for (const id of this.placedOrder)
      if ((this.placed.get(id) as PackTask[]).length < (this.placed.get(bestId) as PackTask[]).length)
        bestId = id;
    return (this.placed.get(bestId) as PackTask[]).pop() as PackTask;
  }

  demandOn(family: string): Resources | undefined {
    return demandOn(this.demand, family);
  }

  identityIn(table: ColocationTable): number {
    if (this.identity?.table !== table)
      this.identity = {
        table,
        id: table.identityId(
          `${this.key}\u0000${this.rp}\u0000${this.jobTaskCount}\u0000${latencyTag(this.latency)}\u0000${this.timeValue}`,
        ),
      };
    return this.identity.id;
  }
}

/** Group tasks into classes, in a deterministic order (by descending RP, then key and signature). */
export function classify(tasks: readonly PackTask[]): TaskClass[] {
  const byKey = new Map<string, PackTask[]>();
  for (const t of tasks) {
    // A value of time splits classes only when set (without one, the keys and their order are Eva's).
    const time = (t.timeValue ?? 0) > 0 ? `\u0000${t.timeValue}` : '';
    const market = t.onDemandOnly === true ? '\u0000on-demand' : '';
    const k = `${t.key}\u0000${demandSignature(t.demand)}\u0000${t.jobTaskCount}\u0000${latencyTag(t.latency)}${time}${market}`;
    let list = byKey.get(k);
    if (list === undefined) {
      list = [];
      byKey.set(k, list);
    }
    list.push(t);
  }
  const groups = [...byKey.entries()].sort(
    ([ka, a], [kb, b]) => (b[0] as PackTask).rp - (a[0] as PackTask).rp || (ka < kb ? -1 : ka > kb ? 1 : 0),
  );
  return groups.map(([, members], index) => {
    const first = members[0] as PackTask;
    const cls = new TaskClass(
      index,
      first.key,
      first.demand,
      first.rp,
      first.jobTaskCount,
      first.latency,
      first.timeValue ?? 0,
      first.onDemandOnly === true,
    );
    // Reverse id order so that `pop()` hands out tasks in ascending id order (deterministic, readable plans).
    for (const t of [...members].sort((a, b) => (a.id < b.id ? 1 : a.id > b.id ? -1 : 0))) cls.add(t);
    return cls;
  });
}

/** A multiset of classes on one instance: the composition whose value the greedy loops compare. */
export class Composition {
  readonly classes: TaskClass[] = [];
  readonly counts: number[] = [];
  size = 0;
  /** Members of network-aware jobs (their set value depends on where the rest of their job is). */
  latencyMembers = 0;
  /** Members that may not go on spot instances (TaskClass.onDemandOnly). */
  onDemandMembers = 0;
  /** Canonical signature (sorted class identities with counts) under a table, cached until the next add. */
  private signatureCache: { table: ColocationTable; value: string } | undefined;

  signature(table: ColocationTable): string {
    if (this.signatureCache?.table === table) return this.signatureCache.value;
    const parts = this.classes.map((c, i) => c.identityIn(table) * 4096 + (this.counts[i] as number));
    parts.sort((a, b) => a - b);
    const value = parts.join(',');
    this.signatureCache = { table, value };
    return value;
  }

  countOf(cls: TaskClass): number {
    const i = this.classes.indexOf(cls);
    return i < 0 ? 0 : (this.counts[i] as number);
  }

  add(cls: TaskClass, n = 1): void {
    this.signatureCache = undefined;
    const i = this.classes.indexOf(cls);
    if (i < 0) {
      this.classes.push(cls);
      this.counts.push(n);
    } else this.counts[i] = (this.counts[i] as number) + n;
    this.size += n;
    if (cls.latency !== undefined) this.latencyMembers += n;
    if (cls.onDemandOnly) this.onDemandMembers += n;
  }

  /** Keys of every member (with multiplicity), optionally with one more member of `extra`. */
  keys(extra?: TaskClass): string[] {
    const out: string[] = [];
    this.classes.forEach((c, i) => {
      for (let k = 0; k < (this.counts[i] as number); k++) out.push(c.key);
    });
    if (extra !== undefined) out.push(extra.key);
    return out;
  }
}

/**
 * Throughput-normalized reservation price of a composition (+ optionally one more member of `extra`):
 * Σ_t RP(t)·r(t | others), with r' = 1 − (1 − r)·n for n-task jobs when `multiTaskCorrection` (Eva §4.3–§4.4).
 * With a value of time (TaskClass.timeValue v, unless `model.valueOfTime` is false), each member also loses
 * v·(1 − r): the completion time its slowdown adds, in dollars. A task alone (r = 1) is worth its RP either way, so
 * "a set pays for its instance" (Algorithm 1 line 15) then means it pays for the instance and for the delay it causes.
 */
export function compositionValue(
  comp: Composition,
  model: RateModel,
  multiTaskCorrection: boolean,
  extra?: TaskClass,
): number {
  const n = comp.size + (extra === undefined ? 0 : 1);
  if (n <= 1 || !model.throughputAware) return plainValue(comp, model, multiTaskCorrection, extra);
  // The greedy loops evaluate the same sets again and again (three candidate plans a round, round after round):
  // memoize by the multiset of class identities until a mean the value reads changes (ColocationTable.changed).
  // The key names the multiset uniquely (the base set's canonical signature plus the added class), though the same
  // multiset reached from another base set gets another key: a few more misses, no wrong hits.
  const table = model.table;
  const flags =
    (multiTaskCorrection ? 1 : 0) + (model.multiTaskAware ? 2 : 0) + (model.valueOfTime === false ? 4 : 0);
  const base = comp.signature(table);
  const variant = ((extra === undefined ? 0 : extra.identityIn(table) + 1) << 3) | flags;
  const cached = table.cachedValue(base, variant);
  if (cached !== undefined) return cached;
  const { value, keySignature } = interferenceValue(comp, model, multiTaskCorrection, extra, n);
  const keys = comp.classes.map((c) => c.key);
  if (extra !== undefined) keys.push(extra.key);
  table.storeValue(base, variant, keys, keySignature, value);
  return value;
}

/** Σ RP (with only the multi-task correction, which needs no table): sets of one task, or eva-rp. */
function plainValue(
  comp: Composition,
  model: RateModel,
  multiTaskCorrection: boolean,
  extra?: TaskClass,
): number {
  let total = 0;
  const correct = multiTaskCorrection && model.multiTaskAware;
  const n = comp.size + (extra === undefined ? 0 : 1);
  const rate = (cls: TaskClass) => (correct && n > 1 ? multiTaskRate(1, cls.jobTaskCount) : 1);
  const factor = latencyFactors(comp, extra);
  const timed = model.valueOfTime !== false;
  comp.classes.forEach((c, i) => {
    total += membersValue(c, (comp.counts[i] as number) + (c === extra ? 1 : 0), rate(c), factor(c), timed);
  });
  if (extra !== undefined && !comp.classes.includes(extra))
    total += membersValue(extra, 1, rate(extra), factor(extra), timed);
  return total;
}

/**
 * `count` members of a class at throughput rate × latency factor: RP·r each, less the value of the time each loses,
 * v·(1 − r), when `timed`. Without a value of time, the product is Eva's, in Eva's order (the greedy loops compare
 * set values exactly, so even the rounding must not change).
 */
function membersValue(cls: TaskClass, count: number, rate: number, factor: number, timed: boolean): number {
  if (!timed || cls.timeValue === 0) return count * cls.rp * rate * factor;
  const r = rate * factor;
  return count * (cls.rp * r - cls.timeValue * (1 - r));
}

const NO_LATENCY = (): number => 1;

/**
 * Each class's latency factor in a set (TaskLatency): `together` for a job whose every task is in the set, `spread`
 * for one whose tasks are also elsewhere; 1 for classes of jobs the network does not matter to.
 */
function latencyFactors(comp: Composition, extra: TaskClass | undefined): (cls: TaskClass) => number {
  if (comp.latencyMembers === 0 && extra?.latency === undefined) return NO_LATENCY;
  const inSet = new Map<string, number>();
  const count = (cls: TaskClass, n: number) => {
    if (cls.latency !== undefined) inSet.set(cls.latency.jobId, (inSet.get(cls.latency.jobId) ?? 0) + n);
  };
  comp.classes.forEach((c, i) => count(c, comp.counts[i] as number));
  if (extra !== undefined) count(extra, 1);
  return (cls) => {
    const l = cls.latency;
    if (l === undefined) return 1;
    return inSet.get(l.jobId) === cls.jobTaskCount ? l.together : l.spread;
  };
}

function interferenceValue(
  comp: Composition,
  model: RateModel,
  multiTaskCorrection: boolean,
  extra: TaskClass | undefined,
  n: number,
): { value: number; keySignature: string | undefined } {
  const table = model.table;
  // Summed in an order of the set's own (price, key, job size), so its value depends neither on the order it was
  // built in nor, through the memo, on what was looked up before: a forked table computes the same bits.
  const members: { cls: TaskClass; count: number }[] = comp.classes.map((c, i) => ({
    cls: c,
    count: (comp.counts[i] as number) + (c === extra ? 1 : 0),
  }));
  if (extra !== undefined && !comp.classes.includes(extra)) members.push({ cls: extra, count: 1 });
  members.sort((x, y) => compareIdentity(x.cls, y.cls));
  // Classes of one identity (other demands) add up as one member.
  for (let i = members.length - 1; i > 0; i--) {
    const here = members[i] as (typeof members)[number];
    const prev = members[i - 1] as (typeof members)[number];
    if (compareIdentity(here.cls, prev.cls) !== 0) continue;
    prev.count += here.count;
    members.splice(i, 1);
  }
  let allKeys: string[] | undefined;
  let signature: string | undefined;
  let total = 0;
  const factor = latencyFactors(comp, extra);
  for (const { cls, count } of members) {
    let rate: number;
    if (!table.hasEntriesFor(cls.key)) rate = table.defaultRate ** (n - 1);
    else {
      if (allKeys === undefined) {
        allKeys = comp.keys(extra).sort();
        signature = allKeys.join('\u0001');
      }
      const keys = allKeys;
      rate = table.rateInSet(cls.key, signature as string, () => {
        const others = keys.slice();
        others.splice(others.indexOf(cls.key), 1);
        return others;
      });
    }
    if (multiTaskCorrection && model.multiTaskAware) rate = multiTaskRate(rate, cls.jobTaskCount);
    total += membersValue(cls, count, rate, factor(cls), model.valueOfTime !== false);
  }
  // The sorted member keys, built only when some member has learned entries (see ColocationTable.storeValue).
  return { value: total, keySignature: signature };
}

function compareIdentity(a: TaskClass, b: TaskClass): number {
  return (
    a.rp - b.rp ||
    compareText(a.key, b.key) ||
    a.jobTaskCount - b.jobTaskCount ||
    compareText(latencyTag(a.latency), latencyTag(b.latency)) ||
    a.timeValue - b.timeValue
  );
}

/** Lexicographic greedy score of Eva's reference: (set value after adding, already on this instance, alignment). */
interface Score {
  readonly value: number;
  readonly onInstance: number;
  readonly alignment: number;
}

/**
 * Set values closer than this ($/hour) are a tie, decided by the next criteria: values summed from the same rates in
 * another order differ in the last bits, and such noise must not pick the placement.
 */
const VALUE_TIE = 1e-9;

function better(a: Score, b: Score | undefined): boolean {
  if (b === undefined) return true;
  if (Math.abs(a.value - b.value) > VALUE_TIE) return a.value > b.value;
  if (a.onInstance !== b.onInstance) return a.onInstance > b.onInstance;
  return a.alignment > b.alignment;
}

export interface GrowResult {
  readonly composition: Composition;
  readonly value: number;
  /** Classes that won a greedy step (including the step that stopped growth), for exact pattern replication. */
  readonly argmaxClasses: ReadonlySet<TaskClass>;
  /** The class whose addition would have lowered the set's value (Algorithm 1 lines 10–12), if growth stopped so. */
  readonly stoppedBy: TaskClass | undefined;
}

/**
 * Grow one instance's task set greedily (Algorithm 1 lines 8–14): add the fitting class with the best score while
 * that does not lower the set's value. `reuseInstanceId` favours tasks already on that instance.
 */
export function growSet(
  type: InstanceType,
  candidates: readonly TaskClass[],
  model: RateModel,
  reuseInstanceId: string | undefined,
  start?: { composition: Composition; used: Resources },
): GrowResult {
  const comp = start?.composition ?? new Composition();
  let used: Resources = start?.used ?? [0, 0, 0];
  let value = comp.size === 0 ? 0 : compositionValue(comp, model, true);
  const argmax = new Set<TaskClass>();
  const capacity = type.capacity;
  // Rates are at most 1, so value(S + c) ≤ Σ_S RP + RP(c): a class whose bound is below the best value found this
  // step cannot win it, and its (costly) set value is not computed. Exact: ties are still evaluated.
  let rpSum = 0;
  comp.classes.forEach((c, i) => (rpSum += c.rp * (comp.counts[i] as number)));
  for (;;) {
    let best: Score | undefined;
    let bestCls: TaskClass | undefined;
    for (const cls of candidates) {
      if (cls.count - comp.countOf(cls) <= 0) continue;
      if (best !== undefined && rpSum + cls.rp < best.value - VALUE_TIE) continue;
      const d = cls.demandOn(type.family);
      if (d === undefined) continue;
      const after: Resources = [used[0] + d[0], used[1] + d[1], used[2] + d[2]];
      if (!fits(after, capacity)) continue;
      const score: Score = {
        value: compositionValue(comp, model, true, cls),
        onInstance: cls.countOn(reuseInstanceId) - comp.countOf(cls) > 0 ? 1 : 0,
        alignment: alignment(
          d,
          [capacity[0] - used[0], capacity[1] - used[1], capacity[2] - used[2]],
          capacity,
        ),
      };
      if (better(score, best)) {
        best = score;
        bestCls = cls;
      }
    }
    if (best === undefined || bestCls === undefined)
      return { composition: comp, value, argmaxClasses: argmax, stoppedBy: undefined };
    argmax.add(bestCls);
    if (best.value < value) return { composition: comp, value, argmaxClasses: argmax, stoppedBy: bestCls };
    const d = bestCls.demandOn(type.family) as Resources;
    used = [used[0] + d[0], used[1] + d[1], used[2] + d[2]];
    comp.add(bestCls);
    rpSum += bestCls.rp;
    value = best.value;
  }
}

/**
 * How many times the same greedy build would repeat exactly given the classes' counts: a build only depends on
 * which classes are available, and removing a class that never won a step cannot change any argmax. Build j sees
 * counts reduced by (j−1)·used, so every class that won a step must keep enough members, and the class that
 * stopped growth must still be available after the build's own picks.
 */
export function repeatCount(result: GrowResult): number {
  let k = Number.POSITIVE_INFINITY;
  result.composition.classes.forEach((cls, i) => {
    const used = result.composition.counts[i] as number;
    k = Math.min(k, Math.floor(cls.count / used));
  });
  const z = result.stoppedBy;
  if (z !== undefined) {
    const used = result.composition.countOf(z);
    if (used > 0) k = Math.min(k, Math.ceil(z.count / used) - 1);
  }
  return Number.isFinite(k) ? Math.max(1, k) : 1;
}

/** Σ of the members' demands on a family (undefined if one cannot run there). */
export function compositionDemandOn(comp: Composition, family: string): Resources | undefined {
  let g = 0;
  let c = 0;
  let m = 0;
  for (let i = 0; i < comp.classes.length; i++) {
    const d = (comp.classes[i] as TaskClass).demandOn(family);
    if (d === undefined) return undefined;
    const n = comp.counts[i] as number;
    g += d[0] * n;
    c += d[1] * n;
    m += d[2] * n;
  }
  return [g, c, m];
}
