import jStat from 'jstat';

/**
 * Whether an arm's per-seed differences from the baseline say more than noise. A change to a plan moves a run's cost by
 * about a percent either way, so a mean difference of a few tenths is read against its spread: the 95% confidence
 * interval of the mean (Student's t on the paired differences), the paired t-test's two-sided p-value, and the exact
 * sign test's, which assumes nothing about the differences' distribution (one seed far off moves the mean and the
 * t-test, not the signs).
 */
export interface PairedSignificance {
  /**
   * The 95% confidence interval of the mean difference (t with n − 1 degrees of freedom); null below two seeds or with
   * no spread (every seed the same difference: the seeds did not vary the run, so there is no noise to measure against).
   */
  readonly confidence95: { readonly low: number; readonly high: number } | null;
  /** Two-sided p-value of the paired t-test of a zero mean difference; null below two seeds or with no spread. */
  readonly tTestP: number | null;
  /** Two-sided p-value of the exact sign test (seeds with no difference left out); null when every seed ties. */
  readonly signTestP: number | null;
}

/**
 * The relative size below which two figures are the same: runs that do the same work sum their costs and hours in
 * another order, and differ by ~1e-14 of them, which is no difference of the runs.
 */
export const ROUNDING = 1e-9;

/** Whether `a` and `b` differ by no more than floating-point rounding of their size. */
export function sameWithinRounding(a: number, b: number): boolean {
  return Math.abs(a - b) <= ROUNDING * Math.max(Math.abs(a), Math.abs(b));
}

/** The t-interval and t-test of a mean, given its standard error and the number of values it was taken over. */
function tFigures(
  mean: number,
  standardError: number,
  n: number,
): Pick<PairedSignificance, 'confidence95' | 'tTestP'> {
  // A zero-width interval would read as certainty; identical differences on every seed say the seed changed nothing,
  // also when they differ in their last digits only.
  if (standardError <= ROUNDING * Math.abs(mean)) return { confidence95: null, tTestP: null };
  const dof = n - 1;
  const half = jStat.studentt.inv(0.975, dof) * standardError;
  const confidence95 = { low: mean - half, high: mean + half };
  const t = Math.abs(mean / standardError);
  return { confidence95, tTestP: Math.min(1, 2 * jStat.studentt.cdf(-t, dof)) };
}

/** The exact two-sided sign test: of the seeds that differ, how unlikely so lopsided a split is under a fair coin. */
export function signTestP(lower: number, higher: number): number | null {
  const n = lower + higher;
  if (n === 0) return null;
  return Math.min(1, 2 * jStat.binomial.cdf(Math.min(lower, higher), n, 0.5));
}

/**
 * The figures of `n` paired differences with this mean and standard error, of which `lower` are below 0 and `higher`
 * above.
 */
export function pairedSignificance(
  n: number,
  mean: number | null,
  standardError: number | null,
  lower: number,
  higher: number,
): PairedSignificance {
  const t =
    mean === null || standardError === null
      ? { confidence95: null, tTestP: null }
      : tFigures(mean, standardError, n);
  return { ...t, signTestP: signTestP(lower, higher) };
}
