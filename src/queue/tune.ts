import { z } from 'zod';
import { Rng } from '../core/random.js';
import { parseWith } from '../core/validation.js';
import {
  DEFAULT_PREEMPTION,
  DEFAULT_SIZE_SPLIT,
  weightsFromDecay,
  type WfqClassSpec,
  type WfqConfig,
} from './wfq.js';

/**
 * The search space and the Pareto machinery of `fleetwise tune`, after PCS's preference solver (paper §3.3;
 * digest shared/research/pcs-wfq-predictions.md §6). Pure: the caller simulates each candidate and hands back the
 * objectives.
 *
 * Parameterisation (digest §6.1), adapted to the autoscaler's rigid gang jobs:
 * - number of classes K (1–3 by default, PCS's optimiser almost always picks 2–4, digest §7);
 * - K − 1 size thresholds at percentiles of the trace's job sizes (size = task-seconds at the minimum allocation, as
 *   `SimAdmission`), the workload-sample-derived thresholds PCS uses instead of arbitrary values. PCS derives K and
 *   the thresholds from a C² bound T; percentiles are the same idea with a direct handle on each class's population;
 * - weights from the PCS weight decay 𝒲: w_i ∝ e^{−i·𝒲} (class 0 = smallest jobs), 𝒲 ∈ [−3, 3];
 * - fifo inside every class as PCS (predictable: later arrivals never overtake), optionally srpt;
 * - in a third of the random samples, a `maxShare` ceiling on the largest class (beyond PCS).
 * ζ_min and δ (PCS's elastic demand cap) have no counterpart: autoscaler jobs are rigid gangs admitted whole.
 *
 * The search itself is sampling, not SPEA2: the space is 2–4-dimensional, and the digest (§6.2) notes that random
 * sampling plus a non-dominated filter does the job at this size.
 */
export const TUNE_ORDERINGS = ['fifo', 'srpt'] as const;
export type TuneOrdering = (typeof TUNE_ORDERINGS)[number];

/** More classes than this leave some nearly empty on realistic traces (PCS's ablation searched K ∈ 1..5). */
export const MAX_TUNE_CLASSES = 5;
export const DEFAULT_TUNE_CLASS_COUNTS: readonly number[] = [1, 2, 3];

/** PCS's search range for 𝒲 (digest §6.1): 𝒲 > 0 favours small jobs, 0 is equal weights, < 0 favours large jobs. */
export const DECAY_RANGE = { min: -3, max: 3 } as const;

/**
 * 𝒲 grid: equal weights, mild and strong skews towards small jobs, one inverted point. Over two classes,
 * ln(17/3) gives .85/.15, the simulator's `--queue wfq` default (`DEFAULT_SIZE_SPLIT`), and ln 19 gives .95/.05,
 * the skew of most published PCS configs (digest §7).
 */
export const DECAY_GRID: readonly number[] = [-1, 0, 1, DEFAULT_SIZE_SPLIT.decay, 2, Math.log(19)];

/** First-threshold percentiles of the grid; the other thresholds split the rest evenly (see `gridPercentiles`). */
const GRID_FIRST_PERCENTILES = [50, 75, 85, 90] as const;

/** Random samples draw threshold percentiles from this range, so no class is a sliver at either end. */
const RANDOM_PERCENTILE_RANGE = { min: 5, max: 99 } as const;

/**
 * A random sample with two classes or more holds its largest class to a `maxShare` ceiling this often, drawn from this
 * range: a ceiling trades the large class's JCT for reliable ETAs (it cannot borrow capacity later arrivals take back).
 */
const CEILING_PROBABILITY = 1 / 3;
export const CEILING_RANGE = { min: 0.3, max: 0.95 } as const;

/** Weights are rounded to this many decimals (PCS code: 3), every weight at least one unit of the last decimal. */
const WEIGHT_DECIMALS = 3;
const WEIGHT_UNIT = 10 ** -WEIGHT_DECIMALS;

export const tuneSearchSchema = z.object({
  /** How many distinct candidates to return (fewer when the trace's sizes cannot make that many). */
  samples: z.number().int('must be an integer').min(1, 'must be ≥ 1').max(10_000, 'must be ≤ 10000'),
  seed: z
    .number()
    .int('must be an integer')
    .min(0, 'must be ≥ 0')
    .max(2 ** 32 - 1),
  classCounts: z
    .array(
      z
        .number()
        .int('must be an integer')
        .min(1, 'must be ≥ 1')
        .max(MAX_TUNE_CLASSES, `must be ≤ ${MAX_TUNE_CLASSES}`),
    )
    .min(1, 'give at least one class count'),
  orderings: z.array(z.enum(TUNE_ORDERINGS)).min(1, 'give at least one ordering'),
});
export type TuneSearchOptions = z.input<typeof tuneSearchSchema>;

export type CandidateSource = 'anchor' | 'grid' | 'random';

export interface TuneCandidate {
  /** `c0`, `c1`, … in generation order. */
  readonly id: string;
  /** anchor: FIFO or the simulator's default WFQ; grid: percentile × 𝒲 grid; random: seeded sample. */
  readonly source: CandidateSource;
  /** Percentile of the trace's job sizes behind each threshold (the thresholds actually kept). */
  readonly thresholdPercentiles: readonly number[];
  /** 𝒲; 0 for a single class. */
  readonly decay: number;
  readonly ordering: TuneOrdering;
  readonly config: WfqConfig;
}

/** Nearest-rank percentile of ascending `sorted` (as src/sim/metrics.ts, kept local: src/queue has no sim deps). */
function nearestRank(sorted: readonly number[], p: number): number {
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)));
  return sorted[rank - 1] as number;
}

/**
 * PCS weights rounded for a config file (digest §6.1, code): 3 decimals, each ≥ 0.001, the last class absorbing the
 * rounding remainder so Σ = 1; should the last end below 0.001, the heaviest class gives up the difference.
 */
export function roundedWeights(classCount: number, decay: number): number[] {
  const round = (x: number): number => Number(x.toFixed(WEIGHT_DECIMALS));
  const raw = weightsFromDecay(classCount, decay);
  const head = raw.slice(0, -1).map((w) => Math.max(WEIGHT_UNIT, round(w)));
  const last = round(1 - head.reduce((a, b) => a + b, 0));
  if (last >= WEIGHT_UNIT) return [...head, last];
  const heaviest = head.indexOf(Math.max(...head));
  head[heaviest] = round((head[heaviest] as number) - (WEIGHT_UNIT - last));
  return [...head, WEIGHT_UNIT];
}

function classIds(count: number): string[] {
  if (count === 1) return ['all'];
  if (count === 2) return ['small', 'large'];
  if (count === 3) return ['small', 'medium', 'large'];
  return Array.from({ length: count }, (_, i) => `size-${i}`);
}

interface Draft {
  readonly source: CandidateSource;
  readonly percentiles: readonly number[];
  readonly decay: number;
  readonly ordering: TuneOrdering;
  /** `maxShare` of the largest class (random samples only). */
  readonly ceiling?: number | undefined;
}

/**
 * A draft's config on these sizes. A threshold that repeats the previous one or reaches the largest size would leave
 * its upper class empty, which behaves like one class fewer (an idle class's share flows to the others), so it is
 * dropped and the candidate has fewer classes. Thresholds are whole seconds, rounded up so the percentile's own job
 * stays in the lower class.
 */
function materialise(
  draft: Draft,
  sorted: readonly number[],
): Omit<TuneCandidate, 'id' | 'source'> & { readonly key: string } {
  const largest = sorted[sorted.length - 1] as number;
  const kept: { p: number; t: number }[] = [];
  for (const p of draft.percentiles) {
    const t = Math.max(1, Math.ceil(nearestRank(sorted, p)));
    const prev = kept[kept.length - 1];
    if (t >= largest || (prev !== undefined && t <= prev.t)) continue;
    kept.push({ p, t });
  }
  const count = kept.length + 1;
  const decay = count === 1 ? 0 : draft.decay;
  const weights = count === 1 ? [1] : roundedWeights(count, decay);
  const ids = classIds(count);
  // A ceiling on the only class would just shrink the capped capacity: kept for two classes or more.
  const ceiling = count > 1 ? draft.ceiling : undefined;
  const classes: WfqClassSpec[] = ids.map((id, i) => ({
    id,
    weight: weights[i] as number,
    ...(i < kept.length ? { maxSizeSeconds: (kept[i] as { t: number }).t } : {}),
    ordering: draft.ordering,
    ...(i === count - 1 && ceiling !== undefined ? { maxShare: ceiling } : {}),
  }));
  return {
    thresholdPercentiles: kept.map((k) => k.p),
    decay,
    ordering: draft.ordering,
    config: { classifyBy: 'size', classes, preemption: DEFAULT_PREEMPTION },
    // Two drafts with the same thresholds, weights, ordering and ceiling run identically.
    key: JSON.stringify([kept.map((k) => k.t), weights, draft.ordering, ceiling ?? null]),
  };
}

/** Grid percentile sets for K classes: the first threshold at 50/75/85/90 %, the rest evenly up to 100 %; plus even. */
export function gridPercentiles(classCount: number): number[][] {
  if (classCount <= 1) return [[]];
  const n = classCount - 1;
  const round = (x: number): number => Number(x.toFixed(1));
  const sets = GRID_FIRST_PERCENTILES.map((first) =>
    Array.from({ length: n }, (_, i) => round(first + ((100 - first) * i) / n)),
  );
  sets.unshift(Array.from({ length: n }, (_, i) => round((100 * (i + 1)) / classCount)));
  return sets.filter((s, i) => sets.findIndex((t) => t.join() === s.join()) === i);
}

function gridDrafts(classCounts: readonly number[], orderings: readonly TuneOrdering[]): Draft[] {
  const drafts: Draft[] = [];
  for (const ordering of orderings)
    for (const k of classCounts)
      for (const percentiles of gridPercentiles(k))
        for (const decay of k === 1 ? [0] : DECAY_GRID)
          drafts.push({ source: 'grid', percentiles, decay, ordering });
  return drafts;
}

function randomDraft(rng: Rng, classCounts: readonly number[], orderings: readonly TuneOrdering[]): Draft {
  const k = rng.pick(classCounts);
  const percentiles = Array.from({ length: k - 1 }, () =>
    Number(rng.uniform(RANDOM_PERCENTILE_RANGE.min, RANDOM_PERCENTILE_RANGE.max).toFixed(1)),
  ).sort((a, b) => a - b);
  const decay = Number(rng.uniform(DECAY_RANGE.min, DECAY_RANGE.max).toFixed(3));
  const ordering = rng.pick(orderings);
  const ceiling =
    k > 1 && rng.uniform(0, 1) < CEILING_PROBABILITY
      ? Number(rng.uniform(CEILING_RANGE.min, CEILING_RANGE.max).toFixed(2))
      : undefined;
  return { source: 'random', percentiles, decay, ordering, ceiling };
}

function shuffle<T>(rng: Rng, items: readonly T[]): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = rng.int(i + 1);
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
}

/**
 * Up to `samples` distinct candidate configs, deterministic given the sizes and the options:
 * 1. anchors: one FIFO class (PCS's no-config default) and `DEFAULT_SIZE_SPLIT` (`fleetwise simulate --queue wfq`),
 *    when their class counts are allowed, so the front is compared with both;
 * 2. the percentile × 𝒲 grid in a seeded random order (a small budget samples the grid evenly);
 * 3. seeded random samples of (K, percentiles, 𝒲, ordering) until `samples` distinct configs exist (or a bounded
 *    number of draws found no new one: a trace with few distinct sizes supports few configs).
 */
export function generateCandidates(
  jobSizesSeconds: readonly number[],
  options: TuneSearchOptions,
): TuneCandidate[] {
  const o = parseWith(tuneSearchSchema, options, 'tune search');
  const sizes = parseWith(
    z.array(z.number().finite().nonnegative()).min(1, 'the trace has no jobs'),
    jobSizesSeconds,
    'job sizes',
  );
  const sorted = [...sizes].sort((a, b) => a - b);
  const classCounts = [...new Set(o.classCounts)].sort((a, b) => a - b);
  const orderings = [...new Set(o.orderings)];
  const rng = new Rng(o.seed);

  const anchors: Draft[] = [];
  if (classCounts.includes(1))
    anchors.push({ source: 'anchor', percentiles: [], decay: 0, ordering: orderings[0] as TuneOrdering });
  if (classCounts.includes(2))
    anchors.push({
      source: 'anchor',
      percentiles: [DEFAULT_SIZE_SPLIT.percentile],
      decay: DEFAULT_SIZE_SPLIT.decay,
      ordering: 'fifo',
    });

  const out: TuneCandidate[] = [];
  const seen = new Set<string>();
  const offer = (draft: Draft): void => {
    if (out.length >= o.samples) return;
    const { key, ...candidate } = materialise(draft, sorted);
    if (seen.has(key)) return;
    seen.add(key);
    out.push({ id: `c${out.length}`, source: draft.source, ...candidate });
  };
  anchors.forEach(offer);
  shuffle(rng, gridDrafts(classCounts, orderings)).forEach(offer);
  for (let misses = 0; out.length < o.samples && misses < 50 * o.samples;) {
    const before = out.length;
    offer(randomDraft(rng, classCounts, orderings));
    if (out.length === before) misses++;
  }
  return out;
}

// ------------------------------------------------------------------------------------------------------------
// Pareto front

/** Minimised objectives (PCS `<JCT,avg>`, `<Pred_err,p99>`, `<unfairness,avg>`; digest §5). */
export const OBJECTIVES = ['meanJctHours', 'predErrP99', 'unfairness'] as const;
export type ObjectiveName = (typeof OBJECTIVES)[number];
export type Objectives = Readonly<Record<ObjectiveName, number | null>>;

/** A missing value (null, NaN) is worse than any number: PCS gives configs it cannot evaluate +∞ (digest §6.2). */
function cost(value: number | null): number {
  return value === null || Number.isNaN(value) ? Infinity : value;
}

/**
 * Objectives closer than this, relative to their size (and absolutely below 1), are equal. Two candidates that run
 * the same schedule sum the same job times in another order and can differ in the last digit; compared exactly, that
 * digit would put both on the front and, once min–max normalisation stretches it to a whole unit, pick the
 * recommendation. A billionth is far below any difference the simulation measures.
 */
export const OBJECTIVE_TOLERANCE = 1e-9;

/** x and y equal within `OBJECTIVE_TOLERANCE`; a missing value (∞) equals only another missing one. */
function sameObjective(x: number, y: number): boolean {
  if (x === y) return true;
  if (!Number.isFinite(x) || !Number.isFinite(y)) return false;
  return Math.abs(x - y) <= OBJECTIVE_TOLERANCE * Math.max(Math.abs(x), Math.abs(y), 1);
}

/** a ≤ b on every objective and < on at least one, equal within `OBJECTIVE_TOLERANCE`; two missing values are equal. */
export function dominates(a: Objectives, b: Objectives): boolean {
  let strictly = false;
  for (const k of OBJECTIVES) {
    const x = cost(a[k]);
    const y = cost(b[k]);
    if (sameObjective(x, y)) continue;
    if (x > y) return false;
    strictly = true;
  }
  return strictly;
}

/**
 * The non-dominated points, in input order. Points with equal objectives (within `OBJECTIVE_TOLERANCE`) do not
 * dominate each other, so ties are all kept (the operator may prefer either config).
 */
export function paretoFront<P extends { readonly objectives: Objectives }>(points: readonly P[]): P[] {
  return points.filter((p) => !points.some((q) => q !== p && dominates(q.objectives, p.objectives)));
}

/**
 * How to pick one point of the front (PCS reports three, digest §5): `jct` = PCS-JCT (lowest mean JCT), `pred` =
 * PCS-pred (lowest p99 prediction error), `fair` = lowest unfairness, each tie-broken by the other objectives in
 * the order mean JCT, p99 prediction error, unfairness; `balanced` = PCS-bal, see `recommend`.
 */
export const PREFERENCES = ['balanced', 'jct', 'pred', 'fair'] as const;
export type Preference = (typeof PREFERENCES)[number];

const PRIORITY: Readonly<Record<Exclude<Preference, 'balanced'>, readonly ObjectiveName[]>> = {
  jct: ['meanJctHours', 'predErrP99', 'unfairness'],
  pred: ['predErrP99', 'meanJctHours', 'unfairness'],
  fair: ['unfairness', 'meanJctHours', 'predErrP99'],
};

function lexicographic(order: readonly ObjectiveName[]): (a: Objectives, b: Objectives) => number {
  return (a, b) => {
    for (const k of order) {
      const x = cost(a[k]);
      const y = cost(b[k]);
      if (!sameObjective(x, y)) return x < y ? -1 : 1;
    }
    return 0;
  };
}

/**
 * Each point's distance to the ideal point once every objective is min–max normalised over `points` to [0, 1]
 * (a missing value counts 1, an objective without spread or without any value counts 0 for everyone). A spread
 * within `OBJECTIVE_TOLERANCE` is no spread: normalised, rounding noise would weigh as much as a real difference.
 */
export function idealDistances(points: readonly { readonly objectives: Objectives }[]): number[] {
  const scaled = OBJECTIVES.map((k) => {
    const values = points.map((p) => cost(p.objectives[k]));
    const finite = values.filter(Number.isFinite);
    const lo = Math.min(...finite);
    const hi = Math.max(...finite);
    const spread = finite.length > 0 && !sameObjective(lo, hi);
    return values.map((v) =>
      !Number.isFinite(v) ? (finite.length === 0 ? 0 : 1) : spread ? (v - lo) / (hi - lo) : 0,
    );
  });
  return points.map((_, i) => Math.hypot(...scaled.map((s) => s[i] as number)));
}

/**
 * The recommended point of a front. `balanced` (the default, PCS-bal): the point closest to the ideal point
 * (every objective at its best over the front) after min–max normalisation, i.e. the knee of compromise
 * programming: no objective is given up much for the others, and the rule needs no weights from the operator.
 * Ties go to the lower mean JCT, then the earlier point. Undefined for an empty front.
 */
export function recommend<P extends { readonly objectives: Objectives }>(
  front: readonly P[],
  preference: Preference = 'balanced',
): P | undefined {
  if (front.length === 0) return undefined;
  const indexed = front.map((p, i) => ({ p, i }));
  if (preference !== 'balanced') {
    const cmp = lexicographic(PRIORITY[preference]);
    return indexed.reduce((best, x) => (cmp(x.p.objectives, best.p.objectives) < 0 ? x : best)).p;
  }
  const distance = idealDistances(front);
  const tie = lexicographic(PRIORITY.jct);
  return indexed.reduce((best, x) => {
    const d = (distance[x.i] as number) - (distance[best.i] as number);
    if (d < -1e-12) return x;
    if (d > 1e-12) return best;
    return tie(x.p.objectives, best.p.objectives) < 0 ? x : best;
  }).p;
}
