import { pairedSignificance, ROUNDING, sameWithinRounding, type PairedSignificance } from './paired-tests.js';

/**
 * Paired comparison of simulation arms over seeds (`fleetwise bench arms`). A change to a plan moves a run's cost by
 * about a percent either way (the plans after it all shift), so one seed decides nothing: each seed runs every arm on
 * the same trace, and an arm is judged by its per-seed differences from the baseline arm, their mean and standard
 * error, on how many seeds it came out lower, and whether that is more than noise (`paired-tests.ts`).
 */

/** The figures compared, as `simulate --json` names them. Absent ones (no queue, no starts, no spot) are left out. */
export const COMPARED_METRICS = [
  'totalCost',
  'meanJctHours',
  'medianJctHours',
  // Every run's tail; p99 only with the queue layer (--queue).
  'p95JctHours',
  'p99JctHours',
  'barrierIdleCost',
  'migrationsPerJob',
  'peakCostPerHour',
  'lostWorkHours',
  'spotShare',
  // Where the money went (cost-ledger.ts): the two parts a packing change trades against each other.
  'costSlowdown',
  'costIdle',
] as const;
export type ComparedMetric = (typeof COMPARED_METRICS)[number];

/**
 * One run's figures (a `simulate --json` record, its `scheduler` the run's label); a metric the run did not measure is
 * absent or null.
 */
export type ArmFigures = Readonly<Partial<Record<ComparedMetric, number | null>>> & {
  readonly scheduler?: string;
};

/**
 * An arm's differences from the baseline on one metric, in percent of the baseline's value; where the baseline was 0 on
 * a seed on which the arm was not (no moves, no slowdown cost: a percent of 0 cannot be taken), in the metric's own
 * units on every seed.
 */
export interface PairedDifference extends PairedSignificance {
  readonly metric: ComparedMetric;
  /** Per seed, in the seeds' order: 100 × (arm − baseline) / baseline; null where the baseline is 0 or a value is absent. */
  readonly percentBySeed: readonly (number | null)[];
  /** Per seed: arm − baseline in the metric's units; null where a value is absent. Absent in reports written before. */
  readonly differenceBySeed?: readonly (number | null)[];
  /**
   * What the figures below (mean, standard error, extremes, interval) are in: `percent` of the baseline, or `absolute`
   * (the metric's units, from `differenceBySeed`) when on some seed the baseline was 0 and the arm was not. Absent:
   * percent.
   */
  readonly basis?: 'percent' | 'absolute';
  /** Over the seeds with a difference, in `basis` units: mean, standard error (null below two seeds), extremes, signs. */
  readonly meanPercent: number | null;
  readonly standardError: number | null;
  readonly minPercent: number | null;
  readonly maxPercent: number | null;
  readonly lowerOn: number;
  readonly higherOn: number;
  readonly seeds: number;
}

/**
 * The sample mean, and the standard error of the mean (sample standard deviation / √n; null for n < 2). Values that
 * differ by rounding alone have none: 0.
 */
export function meanAndStandardError(values: readonly number[]): {
  readonly mean: number | null;
  readonly standardError: number | null;
} {
  const n = values.length;
  if (n === 0) return { mean: null, standardError: null };
  const mean = values.reduce((s, v) => s + v, 0) / n;
  if (n < 2) return { mean, standardError: null };
  const variance = values.reduce((s, v) => s + (v - mean) ** 2, 0) / (n - 1);
  const deviation = Math.sqrt(variance);
  if (deviation <= ROUNDING * Math.max(...values.map(Math.abs))) return { mean, standardError: 0 };
  return { mean, standardError: deviation / Math.sqrt(n) };
}

/**
 * arm − baseline; 0 where they differ by rounding alone, so that such a seed counts as neither lower nor higher and
 * adds no spread.
 */
function absoluteDifference(
  baseline: number | null | undefined,
  arm: number | null | undefined,
): number | null {
  if (baseline === null || baseline === undefined || arm === null || arm === undefined) return null;
  return sameWithinRounding(arm, baseline) ? 0 : arm - baseline;
}

function percentDifference(
  baseline: number | null | undefined,
  arm: number | null | undefined,
): number | null {
  if (baseline === null || baseline === undefined || arm === null || arm === undefined || baseline === 0)
    return null;
  return sameWithinRounding(arm, baseline) ? 0 : (100 * (arm - baseline)) / baseline;
}

/**
 * The arm's paired differences from the baseline, per metric both measured on at least one seed. `baseline[i]` and
 * `arm[i]` are the same seed's runs.
 */
export function pairedDifferences(
  baseline: readonly ArmFigures[],
  arm: readonly ArmFigures[],
): PairedDifference[] {
  if (baseline.length !== arm.length)
    throw new Error(`paired runs differ in number: ${baseline.length} baseline, ${arm.length} arm`);
  const differences: PairedDifference[] = [];
  for (const metric of COMPARED_METRICS) {
    const percentBySeed = baseline.map((b, i) => percentDifference(b[metric], arm[i]?.[metric]));
    const differenceBySeed = baseline.map((b, i) => absoluteDifference(b[metric], arm[i]?.[metric]));
    const percents = percentBySeed.filter((p): p is number => p !== null);
    const absolutes = differenceBySeed.filter((p): p is number => p !== null);
    // A baseline of 0 (No-Packing moves nothing) against an arm that is not still leaves the arm's figure worth
    // comparing, and leaving such a seed out of a percent would hide the very seeds where the arm differs most: then
    // every seed is taken in the metric's units. Both 0 everywhere says nothing.
    const zeroAgainstSome = baseline.some((b, i) => b[metric] === 0 && (differenceBySeed[i] ?? 0) !== 0);
    const basis = percents.length > 0 && !zeroAgainstSome ? 'percent' : 'absolute';
    const present = basis === 'percent' ? percents : absolutes;
    if (present.length === 0 || (basis === 'absolute' && present.every((p) => p === 0))) continue;
    const { mean, standardError } = meanAndStandardError(present);
    const lowerOn = present.filter((p) => p < 0).length;
    const higherOn = present.filter((p) => p > 0).length;
    differences.push({
      metric,
      percentBySeed,
      differenceBySeed,
      basis,
      meanPercent: mean,
      standardError,
      minPercent: Math.min(...present),
      maxPercent: Math.max(...present),
      lowerOn,
      higherOn,
      seeds: present.length,
      ...pairedSignificance(present.length, mean, standardError, lowerOn, higherOn),
    });
  }
  return differences;
}

/** A metric one side of a comparison measured on some seed and the other on none: it cannot be compared. */
export interface OneSidedMetric {
  readonly metric: ComparedMetric;
  readonly measuredBy: 'baseline' | 'arm';
}

/**
 * The metrics that `pairedDifferences` leaves out because only one side measured them (barrier-idle $ is reported only
 * by runs that name a start setting, lost work only by spot runs): the reports say so rather than drop them unseen.
 */
export function oneSidedMetrics(
  baseline: readonly ArmFigures[],
  arm: readonly ArmFigures[],
): OneSidedMetric[] {
  const measured = (runs: readonly ArmFigures[], metric: ComparedMetric): boolean =>
    runs.some((r) => r[metric] !== null && r[metric] !== undefined);
  const out: OneSidedMetric[] = [];
  for (const metric of COMPARED_METRICS) {
    const byBaseline = measured(baseline, metric);
    if (byBaseline !== measured(arm, metric))
      out.push({ metric, measuredBy: byBaseline ? 'baseline' : 'arm' });
  }
  return out;
}
