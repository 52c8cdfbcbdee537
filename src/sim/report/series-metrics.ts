import type { JobOutcome } from '../../world/run-result.js';

export const SECONDS_PER_HOUR = 3600;

/**
 * Time-weighted utilization of a step series: Σ allocated·Δt / Σ capacity·Δt, each value holding until the
 * next sample. Null when nothing was ever provisioned (or for a GPU-free cluster's GPU dimension).
 */
export function timeWeightedUtilization(
  timeSeconds: readonly number[],
  allocated: readonly number[],
  capacity: readonly number[],
): number | null {
  let used = 0;
  let provisioned = 0;
  for (let i = 0; i + 1 < timeSeconds.length; i++) {
    const dt = (timeSeconds[i + 1] as number) - (timeSeconds[i] as number);
    used += (allocated[i] ?? 0) * dt;
    provisioned += (capacity[i] ?? 0) * dt;
  }
  return provisioned > 0 ? used / provisioned : null;
}

/** Allocated ÷ provisioned per sample, in percent; NaN (a gap in the chart) while nothing is provisioned. */
export function utilizationPercent(allocated: readonly number[], capacity: readonly number[]): number[] {
  return allocated.map((a, i) => {
    const c = capacity[i] ?? 0;
    return c > 0 ? (100 * a) / c : Number.NaN;
  });
}

/** Empirical CDF of completed jobs' JCTs: x = JCT in hours (ascending), y = percent of completed jobs ≤ x. */
export function jctCdf(jobs: readonly JobOutcome[]): { hours: number[]; percent: number[] } {
  const hours = jobs
    .map((j) => j.jctSeconds)
    .filter((s): s is number => s !== null && Number.isFinite(s))
    .map((s) => s / SECONDS_PER_HOUR)
    .sort((a, b) => a - b);
  return { hours, percent: hours.map((_, i) => (100 * (i + 1)) / hours.length) };
}
