import { compareText } from '../core/compare.js';

/** Co-location rate assumed per co-located task before anything is learned (Eva §4.3). */
export const DEFAULT_COLOCATION_RATE = 0.95;

/**
 * Co-location throughput table (Eva §4.3–§4.4), learned online from observed throughputs.
 *
 * Lookup of a task with key `target` co-located with the multiset `others`:
 *  1. the exact (target, others) entry if it was observed (mean of its observations);
 *  2. else, with one co-located task, that pair's rate;
 *  3. else the product over the co-located tasks of the pairwise rates.
 * A pair's rate is its entry when the two were observed alone together, else its factor learned from the larger sets
 * it was observed in (beyond Eva, which keeps the default there; see `record`), else the default. A task alone runs
 * at 1. The default (0.95 per co-located task in Eva) is tunable: lower packs more carefully.
 */
export interface ObservationSummary {
  readonly target: string;
  readonly others: readonly string[];
  readonly mean: number;
  readonly count: number;
}

interface Entry {
  sum: number;
  count: number;
}

/** An entry and what it is saved under; the entry is the table's own, so its numbers are always the current ones. */
interface SavedEntry {
  readonly target: string;
  readonly others: readonly string[];
  readonly entry: Readonly<Entry>;
}

/**
 * A pair's factor: its log rate and how many observations moved it. `savedRate` is the rate it was restored from,
 * saved again as it was until the factor moves: exp(log(r)) is not always r, and a table saved, restored and saved
 * again must say the same.
 */
interface PairFactor {
  log: number;
  count: number;
  savedRate?: number | undefined;
}

interface SavedFactor {
  readonly target: string;
  readonly other: string;
  readonly factor: Readonly<PairFactor>;
}

/** A pair's factor estimated from observations with two or more co-located tasks (see `ColocationTable.record`). */
export interface PairFactorSummary {
  readonly target: string;
  readonly other: string;
  readonly rate: number;
  readonly count: number;
}

export interface SerializedColocationTable {
  readonly defaultRate: number;
  readonly entries: readonly ObservationSummary[];
  /** Absent in tables saved before pair factors were learned. */
  readonly factors?: readonly PairFactorSummary[];
}

/**
 * Pair factors stop moving after this many updates: by then a pair has been met in many sets, and every update drops
 * the memoized values of its target (the packing loops' hot path).
 */
const FACTOR_MAX_COUNT = 32;
/** Residuals (in log rate) below this leave the factors as they are. */
const FACTOR_MIN_RESIDUAL = 1e-3;

function othersKey(others: readonly string[], sorted = false): string {
  if (others.length <= 1) return others[0] ?? '';
  return (sorted ? others : [...others].sort()).join('\u0001');
}

export class ColocationTable {
  /** target → others-signature → entry. Pairs are the signatures of one key. */
  private readonly entries = new Map<string, Map<string, Entry>>();
  /**
   * target → other → the pair's factor as estimated from sets of two or more co-located tasks, for pairs never seen
   * alone together: log rate and how many observations moved it.
   */
  private readonly factors = new Map<string, Map<string, PairFactor>>();
  /** target → sizes of `others` that have exact entries (to skip building signatures on the hot path). */
  private readonly exactSizes = new Map<string, Set<number>>();
  /** Lookups by target, then whole co-located set; dropped with the set values that read a changed mean (`changed`). */
  private readonly setCache = new Map<string, Map<string, number>>();
  /**
   * Values of whole task sets (see packing.ts compositionValue), valid while no mean they read changes: by the base
   * set's signature, then by a small integer naming the variant (added class, flags), so a lookup builds no string.
   */
  private readonly valueCache = new Map<string, Map<number, MemoizedValue>>();
  private valueCount = 0;
  private readonly identities = new Map<string, number>();
  /** key → memoized set values with a member of that key. */
  private readonly valuesByKey = new Map<string, Set<MemoizedValue>>();
  /** Key signature (sorted member keys) → memoized set values with exactly those members. */
  private readonly valuesBySet = new Map<string, Set<MemoizedValue>>();
  /** Incremented whenever a recorded mean changes (re-recording the same value leaves it unchanged). */
  version = 0;
  /**
   * The entries and the factors in saved order, sorted when first saved and again only after one is added (neither is
   * ever removed; their numbers change in place): the table is saved after every round, and sorting it each time was
   * most of the save.
   */
  private entriesInOrder: readonly SavedEntry[] | undefined;
  private factorsInOrder: readonly SavedFactor[] | undefined;

  /** The rate of a pair nothing was learned about (`defaultRate`): see `refreshPrior`. */
  private prior: number;

  constructor(readonly initialRate = DEFAULT_COLOCATION_RATE) {
    if (!(initialRate > 0 && initialRate <= 1))
      throw new Error(`default co-location rate must be in (0, 1], got ${initialRate}`);
    this.prior = initialRate;
  }

  /** The rate of a pair nothing was learned about, per co-located task. */
  get defaultRate(): number {
    return this.prior;
  }

  /**
   * Learn the prior for unseen pairs from the pairs observed alone together: their mean rate, the configured rate
   * (`initialRate`) counted as one more observation. Eva's 0.95 was chosen on its own workloads; the pairs seen on
   * pai_200 and the Alibaba conversions settle at 0.93–0.94, and a prior above them prices every pair not yet seen as
   * interfering less than the pairs already seen do. Called once per round (the scheduler's observe); everything
   * memoized goes when the prior moves.
   */
  refreshPrior(): void {
    let sum = this.initialRate;
    let count = 1;
    for (const byOthers of this.entries.values())
      for (const [sig, e] of byOthers)
        if (!sig.includes('\u0001')) {
          sum += this.meanOf(e) as number;
          count += 1;
        }
    const prior = Math.round((sum / count) * 1e12) / 1e12;
    if (prior === this.prior) return;
    this.prior = prior;
    this.changed();
  }

  /** Normalized throughput of `target` when co-located with `others` (a multiset of keys). */
  rate(target: string, others: readonly string[], othersSorted = false): number {
    if (others.length === 0) return 1;
    const byOthers = this.entries.get(target);
    const factors = this.factors.get(target);
    if (byOthers === undefined && factors === undefined) return this.defaultRate ** others.length;
    if (others.length === 1) return this.pairRate(byOthers, factors, others[0] as string);
    if (byOthers !== undefined && this.exactSizes.get(target)?.has(others.length) === true) {
      const exact = this.meanOf(byOthers.get(othersKey(others, othersSorted)));
      if (exact !== undefined) return exact;
    }
    let r = 1;
    for (const o of others) r *= this.pairRate(byOthers, factors, o);
    return r;
  }

  /** The target's pair factors, created empty on first use. */
  private factorsOf(target: string): Map<string, PairFactor> {
    let byOther = this.factors.get(target);
    if (byOther === undefined) {
      byOther = new Map();
      this.factors.set(target, byOther);
    }
    return byOther;
  }

  /** A pair's rate: observed alone together, else its factor learned from larger sets, else the default. */
  private pairRate(
    byOthers: Map<string, Entry> | undefined,
    factors: Map<string, PairFactor> | undefined,
    other: string,
  ): number {
    const seen = this.meanOf(byOthers?.get(other));
    if (seen !== undefined) return seen;
    const f = factors?.get(other);
    return f === undefined ? this.defaultRate : Math.round(Math.exp(f.log) * 1e12) / 1e12;
  }

  /**
   * rate(target, set − one target), `others` sorted, memoized by the signature of the whole set (its keys sorted and joined with
   * \u0001), which the packing loops compute once per candidate set instead of once per member.
   */
  rateInSet(target: string, setSignature: string, others: () => readonly string[]): number {
    let byTarget = this.setCache.get(target);
    if (byTarget === undefined) {
      byTarget = new Map();
      this.setCache.set(target, byTarget);
    }
    let r = byTarget.get(setSignature);
    if (r === undefined) {
      r = this.rate(target, others(), true);
      byTarget.set(setSignature, r);
    }
    return r;
  }

  /** Whether anything was learned about `target` (if not, every lookup is the default's power). */
  hasEntriesFor(target: string): boolean {
    return this.entries.has(target) || this.factors.has(target);
  }

  /** Mean recorded value of the exact (target, others) entry, if observed. */
  recorded(target: string, others: readonly string[]): number | undefined {
    return this.meanOf(this.entries.get(target)?.get(othersKey(others)));
  }

  /**
   * Record one observation of a single-task job's normalized throughput (clamped to (0, 1]): the exact set's mean,
   * and, with two or more co-located tasks, the factors of the pairs in it that were never seen alone together.
   * Why the factors: a set's rate is the product of its pairs' (Eva §4.3), but Eva learns a pair only from the two
   * running alone together, so a pair met only in larger sets keeps the default (0.95) however slow it is, and every
   * new set holding it is priced as if it barely interfered. In log space, the observation less the product the set's
   * pairs predict (the residual) is shared among its unseen pairs in proportion to 1 / (1 + updates so far), so the
   * set's product meets the observation and the least-observed pairs move most; a factor stays at or below 1 and
   * stops moving after FACTOR_MAX_COUNT updates.
   */
  record(target: string, others: readonly string[], normalizedThroughput: number): void {
    this.observe(target, others, normalizedThroughput, true);
  }

  /** `record`, with the factors learned or not (a restored table has its saved factors already). */
  private observe(
    target: string,
    others: readonly string[],
    normalizedThroughput: number,
    learnFactors: boolean,
  ): void {
    if (others.length === 0 || !(normalizedThroughput > 0)) return;
    const value = Math.min(1, normalizedThroughput);
    if (learnFactors && others.length >= 2) this.learnFactors(target, others, value);
    let byOthers = this.entries.get(target);
    if (byOthers === undefined) {
      byOthers = new Map();
      this.entries.set(target, byOthers);
    }
    const sig = othersKey(others);
    const entry = byOthers.get(sig);
    if (entry === undefined) {
      byOthers.set(sig, { sum: value, count: 1 });
      this.entriesInOrder = undefined;
      this.changed(target, byOthers.size === 1 ? undefined : others);
    } else {
      const before = this.meanOf(entry);
      entry.sum += value;
      entry.count += 1;
      if (this.meanOf(entry) !== before) this.changed(target, others);
    }
    addTo(this.exactSizes, target, others.length);
  }

  private learnFactors(target: string, others: readonly string[], value: number): void {
    const byOthers = this.entries.get(target);
    const learned = this.factors.get(target);
    let known = 0;
    const unseen: string[] = [];
    for (const o of others) {
      const seen = this.meanOf(byOthers?.get(o));
      if (seen !== undefined) known += Math.log(seen);
      else unseen.push(o);
    }
    if (unseen.length === 0) return;
    let predicted = known;
    let weights = 0;
    for (const o of unseen) {
      const f = learned?.get(o);
      predicted += f === undefined ? Math.log(this.defaultRate) : f.log;
      weights += 1 / (1 + (f?.count ?? 0));
    }
    const residual = Math.log(value) - predicted;
    if (Math.abs(residual) < FACTOR_MIN_RESIDUAL) return;
    const factors = this.factorsOf(target);
    let moved = false;
    for (const o of unseen) {
      let f = factors.get(o);
      if (f === undefined) {
        f = { log: Math.log(this.defaultRate), count: 0 };
        this.factorsInOrder = undefined;
      }
      if (f.count >= FACTOR_MAX_COUNT) continue;
      // Never above 1: interference only slows a task; a set faster than predicted raises its factors up to 1.
      f.log = Math.min(0, f.log + (residual * (1 / (1 + f.count))) / weights);
      f.count += 1;
      f.savedRate = undefined;
      factors.set(o, f);
      moved = true;
    }
    if (moved) this.changed(target);
  }

  /**
   * Record a multi-task job's observed throughput (the min over its tasks) against exactly one of its tasks,
   * chosen by Eva's attribution rules (§4.4) so that recorded values stay lower bounds:
   *  - none of the job's (task, co-located) entries recorded → the task co-located with the most tasks;
   *  - all recorded → the one with the lowest recorded rate;
   *  - some recorded, all above the observation → the unrecorded one co-located with the most tasks;
   *  - otherwise → the recorded one with the lowest rate.
   * Tasks running alone cannot be the straggler's cause and are not candidates.
   * Returns the index of the task the observation was attributed to, or undefined if none could be.
   */
  recordJob(
    tasks: readonly { readonly key: string; readonly others: readonly string[] }[],
    observedJobThroughput: number,
  ): number | undefined {
    const target = attributeJobObservation(this, tasks, observedJobThroughput);
    if (target === undefined) return undefined;
    const t = tasks[target] as { key: string; others: readonly string[] };
    this.record(t.key, t.others, observedJobThroughput);
    return target;
  }

  /** Every recorded entry (for persistence and for showing users what was learned). */
  summaries(): ObservationSummary[] {
    this.entriesInOrder ??= this.sortEntries();
    return this.entriesInOrder.map(({ target, others, entry }) => ({
      target,
      others,
      mean: entry.sum / entry.count,
      count: entry.count,
    }));
  }

  /** The pair factors learned from larger sets (for persistence). */
  factorSummaries(): PairFactorSummary[] {
    this.factorsInOrder ??= this.sortFactors();
    return this.factorsInOrder.map(({ target, other, factor }) => ({
      target,
      other,
      rate: factor.savedRate ?? Math.exp(factor.log),
      count: factor.count,
    }));
  }

  private sortEntries(): SavedEntry[] {
    const keyed: { key: string; saved: SavedEntry }[] = [];
    for (const [target, byOthers] of this.entries)
      for (const [sig, entry] of byOthers) {
        const others = sig === '' ? [] : sig.split('\u0001');
        keyed.push({ key: target + others.join(), saved: { target, others, entry } });
      }
    return keyed.sort((a, b) => compareText(a.key, b.key)).map((k) => k.saved);
  }

  private sortFactors(): SavedFactor[] {
    const keyed: { key: string; saved: SavedFactor }[] = [];
    for (const [target, byOther] of this.factors)
      for (const [other, factor] of byOther)
        keyed.push({ key: target + other, saved: { target, other, factor } });
    return keyed.sort((a, b) => compareText(a.key, b.key)).map((k) => k.saved);
  }

  toJSON(): SerializedColocationTable {
    return { defaultRate: this.initialRate, entries: this.summaries(), factors: this.factorSummaries() };
  }

  static fromJSON(data: SerializedColocationTable): ColocationTable {
    const table = new ColocationTable(data.defaultRate);
    for (const f of data.factors ?? []) {
      // Saved by this class, but read back from a state store: a factor that cannot be a rate is refused whole.
      if (!(f.rate > 0 && f.rate <= 1) || !Number.isInteger(f.count) || f.count < 0)
        throw new Error(
          `co-location factor of ${f.target} next to ${f.other}: rate must be in (0, 1] and count a whole number ≥ 0, ` +
            `got ${f.rate} and ${f.count}`,
        );
      table.factorsOf(f.target).set(f.other, { log: Math.log(f.rate), count: f.count, savedRate: f.rate });
    }
    for (const e of data.entries) {
      // The factors were saved too: not learned again from these.
      table.observe(e.target, e.others, e.mean, false);
      const entry = table.entries.get(e.target)?.get(othersKey(e.others));
      if (entry !== undefined) {
        entry.sum = e.mean * e.count;
        entry.count = e.count;
      }
      table.changed();
    }
    table.refreshPrior();
    return table;
  }

  /** A small integer naming a packing class identity (key, price, job size) for set-value signatures. */
  identityId(identity: string): number {
    let id = this.identities.get(identity);
    if (id === undefined) {
      id = this.identities.size;
      this.identities.set(identity, id);
    }
    return id;
  }

  /** Memoized value of a task set (see `storeValue`), or undefined when not known under the current means. */
  cachedValue(base: string, variant: number): number | undefined {
    return this.valueCache.get(base)?.get(variant)?.value;
  }

  /**
   * Memoize the value of a task set, named by a base signature and a variant number, whose members have the keys
   * `memberKeys` (repeats or not) and, when some member has learned entries, the multiset signature `keySignature`
   * (its keys sorted and joined with \u0001, as `rateInSet`). The entry lives until a mean it may depend on changes
   * (see `changed`); it depends on nothing else.
   */
  storeValue(
    base: string,
    variant: number,
    memberKeys: readonly string[],
    keySignature: string | undefined,
    value: number,
  ): void {
    if (this.valueCount >= 500_000) this.dropAllValues();
    let byVariant = this.valueCache.get(base);
    if (byVariant === undefined) {
      byVariant = new Map();
      this.valueCache.set(base, byVariant);
    }
    const entry: MemoizedValue = { value, base, variant, keys: memberKeys, keySignature };
    byVariant.set(variant, entry);
    this.valueCount += 1;
    for (const k of memberKeys) addTo(this.valuesByKey, k, entry);
    if (keySignature !== undefined) addTo(this.valuesBySet, keySignature, entry);
  }

  /**
   * A mean changed: drop what may depend on it. Without a target, everything. A pair entry (or a target's first
   * entry, which ends the default's power) can enter the rate of any set holding `target`: all of those go. An
   * exact entry (two or more co-located tasks) is read only by the set made of exactly `target` and `others`
   * (lookup order above), so only that set's memoized values and rate go: most of what is learned is exact sets.
   * A set memoized without a key signature had no member with entries; a change to one of its members is a first
   * entry and drops it.
   */
  private changed(target?: string, others?: readonly string[]): void {
    this.version += 1;
    if (target === undefined) {
      this.setCache.clear();
      this.dropAllValues();
      return;
    }
    if (others !== undefined && others.length >= 2) {
      const keySignature = [target, ...others].sort().join('\u0001');
      this.setCache.get(target)?.delete(keySignature);
      for (const entry of this.valuesBySet.get(keySignature) ?? []) this.dropValue(entry);
      return;
    }
    this.setCache.delete(target);
    for (const entry of this.valuesByKey.get(target) ?? []) this.dropValue(entry);
  }

  private dropValue(entry: MemoizedValue): void {
    const byVariant = this.valueCache.get(entry.base);
    if (byVariant?.get(entry.variant) !== entry) return;
    byVariant.delete(entry.variant);
    if (byVariant.size === 0) this.valueCache.delete(entry.base);
    this.valueCount -= 1;
    for (const k of entry.keys) removeFrom(this.valuesByKey, k, entry);
    if (entry.keySignature !== undefined) removeFrom(this.valuesBySet, entry.keySignature, entry);
  }

  private dropAllValues(): void {
    this.valueCache.clear();
    this.valueCount = 0;
    this.valuesByKey.clear();
    this.valuesBySet.clear();
  }

  /**
   * Means are rounded to 1e-12 so that re-recording the same value (floating-point drift of the running sum) neither
   * changes a lookup nor counts as a change: plans stay identical when nothing was really learned.
   */
  private meanOf(e: Entry | undefined): number | undefined {
    return e === undefined ? undefined : Math.round((e.sum / e.count) * 1e12) / 1e12;
  }
}

interface MemoizedValue {
  readonly value: number;
  readonly base: string;
  readonly variant: number;
  readonly keys: readonly string[];
  readonly keySignature: string | undefined;
}

function addTo<T>(index: Map<string, Set<T>>, key: string, value: T): void {
  let set = index.get(key);
  if (set === undefined) {
    set = new Set();
    index.set(key, set);
  }
  set.add(value);
}

/** Empty sets go too: a long-running controller sees ever new sets, and the index must not keep one per set seen. */
function removeFrom<T>(index: Map<string, Set<T>>, key: string, value: T): void {
  const set = index.get(key);
  if (set === undefined) return;
  set.delete(value);
  if (set.size === 0) index.delete(key);
}

/** Eva §4.4's attribution rules (see ColocationTable.recordJob); exported for tests. */
export function attributeJobObservation(
  table: ColocationTable,
  tasks: readonly { readonly key: string; readonly others: readonly string[] }[],
  observed: number,
): number | undefined {
  const candidates = tasks
    .map((t, index) => ({ index, size: t.others.length, recorded: table.recorded(t.key, t.others) }))
    .filter((c) => c.size > 0);
  if (candidates.length === 0) return undefined;
  const mostColocated = (cs: typeof candidates) =>
    cs.reduce((best, c) => (c.size > best.size ? c : best), cs[0] as (typeof cs)[number]).index;
  const recorded = candidates.filter((c) => c.recorded !== undefined);
  const unrecorded = candidates.filter((c) => c.recorded === undefined);
  if (recorded.length === 0) return mostColocated(candidates);
  const lowestRecorded = recorded.reduce(
    (best, c) => ((c.recorded as number) < (best.recorded as number) ? c : best),
    recorded[0] as (typeof recorded)[number],
  ).index;
  if (unrecorded.length === 0) return lowestRecorded;
  if (recorded.every((c) => (c.recorded as number) > observed)) return mostColocated(unrecorded);
  return lowestRecorded;
}
