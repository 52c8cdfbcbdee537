import { money } from '../sim/report/format.js';
import { catalogName } from './arm-catalogs.js';
import {
  oneSidedMetrics,
  type ArmFigures,
  type ComparedMetric,
  type PairedDifference,
} from './paired-arms.js';

/** An arm: its name and its simulate flags. */
export interface Arm {
  readonly name: string;
  readonly args: readonly string[];
}

/** A run that failed: its label (`seed 6 b`, `seed 6 uncapped`) and its error, that label not repeated. */
export interface FailedRun {
  readonly run: string;
  readonly error: string;
}

/** A seed asked for but left out of the comparison: its runs that failed (its others were not made, or not kept). */
export interface LeftOutSeed {
  readonly seed: number;
  readonly failed: readonly FailedRun[];
}

/** What `bench arms --json` prints. */
export interface ArmsReport {
  /** The seeds compared: every arm ran on each. Every per-seed figure below is in their order. */
  readonly seeds: readonly number[];
  /**
   * The seeds of --seeds left out because a run of theirs failed (an arm's, or the uncapped reference its caps come
   * from), in the order given. Absent in reports written before.
   */
  readonly leftOut?: readonly LeftOutSeed[];
  readonly common: readonly string[];
  readonly arms: readonly Arm[];
  /** Arms run with another build (`--build`): arm name → that build's directory. */
  readonly builds: Readonly<Record<string, string>>;
  /** The first arm: every other is compared with it. */
  readonly baseline: string;
  /** The catalog file each arm's runs take (absolute); null for another build's arm whose flags this build cannot read. */
  readonly catalogs: Readonly<Record<string, string | null>>;
  /**
   * With --cap-share: the share, and per seed the uncapped peak $/h of the --common flags alone and the cap it gave,
   * measured on `referenceCatalog` (the catalog those flags run); an arm on another catalog, or at other prices, is
   * capped at the share of the peak on its catalog at its prices (`uncappedPeakByCatalog`, `capBySeedByArm`).
   */
  readonly capShare: number | null;
  /** With --peaks-from: the earlier report the uncapped peaks were taken from (no reference runs were made). */
  readonly peaksFrom: string | null;
  /** With --cap-share: the catalog the --common flags alone run (absolute). */
  readonly referenceCatalog: string | null;
  readonly uncappedPeakBySeed: readonly (number | null)[];
  /**
   * Per seed, the $/h cap: with --cap-share, the share of `uncappedPeakBySeed`; without it, the one every arm's own
   * flags set (a --cap-dollars-per-hour in --common), null when they set none or not all the same one.
   */
  readonly capBySeed: readonly (number | null)[];
  /**
   * With --cap-share: per catalog the arms or the reference run, per seed, the --common flags' uncapped peak on it.
   * An arm whose runs take other prices than the --common flags' (its own --price-overrides, or a config's) has its
   * catalog's key followed by ` with price overrides {…}`: those flags' peak on its catalog at its prices.
   */
  readonly uncappedPeakByCatalog: Readonly<Record<string, readonly (number | null)[]>>;
  /**
   * Per arm, per seed: the $/h cap it ran under, with --cap-share the share of its reference's peak, else the one its
   * flags set; null when uncapped, or when this build cannot read another build's arm's flags.
   */
  readonly capBySeedByArm: Readonly<Record<string, readonly (number | null)[]>>;
  /**
   * With --cap-share: per arm, the key of `uncappedPeakByCatalog` its caps are the share of; empty without it. Absent
   * in reports written before.
   */
  readonly referenceByArm?: Readonly<Record<string, string>>;
  /** Per arm, per seed in `seeds` order: the run's `simulate --json` record. */
  readonly runs: Readonly<Record<string, readonly ArmFigures[]>>;
  /** Per arm other than the baseline: its paired differences. */
  readonly comparisons: Readonly<Record<string, readonly PairedDifference[]>>;
}

/** The arm's flags as the reports show them, with the build it ran with when not this one. */
export function armFlagsText(report: ArmsReport, arm: Arm): string {
  const build = report.builds[arm.name];
  return `${arm.args.join(' ')}${build === undefined ? '' : ` (build ${build})`}`;
}

export const METRIC_LABELS: Record<ComparedMetric, string> = {
  totalCost: 'cost',
  meanJctHours: 'mean JCT',
  medianJctHours: 'median JCT',
  p95JctHours: 'p95 JCT',
  p99JctHours: 'p99 JCT',
  barrierIdleCost: 'barrier-idle $',
  migrationsPerJob: 'moves/job',
  peakCostPerHour: 'peak $/h',
  lostWorkHours: 'lost work',
  spotShare: 'spot share',
  costSlowdown: 'slowdown $',
  costIdle: 'idle $',
};

/** `v` to `digits` decimals with its sign; one that rounds to 0 has none (`0.00`, never `-0.00` or `+0.00`). */
function signed(v: number, digits: number): string {
  const text = v.toFixed(digits);
  if (Number(text) === 0) return (0).toFixed(digits);
  return `${v > 0 ? '+' : ''}${text}`;
}

export function signedPercent(p: number | null, digits = 2): string {
  if (p === null) return '-';
  return `${signed(p, digits)}%`;
}

/** Whether the difference's figures are in the metric's own units rather than percent (a baseline of 0). */
export function isAbsolute(d: PairedDifference): boolean {
  return d.basis === 'absolute';
}

/** The per-seed differences the figures are taken over: percents, or the metric's units for an absolute one. */
export function seedDifferences(d: PairedDifference): readonly (number | null)[] {
  return isAbsolute(d) ? (d.differenceBySeed ?? []) : d.percentBySeed;
}

/** A difference of `d` as the reports print it: `+1.20%`, or `+2.60 abs` in the metric's units; `-` when absent. */
export function differenceText(d: PairedDifference, v: number | null | undefined): string {
  if (v === null || v === undefined) return '-';
  return isAbsolute(d) ? `${signed(v, 2)} abs` : signedPercent(v);
}

/**
 * Why an absolute difference is one: `a is 0` when the baseline was 0 on every seed that measured the metric, else the
 * seeds it was 0 on (`a is 0 on seeds 4, 6`), where a percent could not be taken and the arm was not 0.
 */
export function absoluteReason(report: ArmsReport, d: PairedDifference): string {
  const differences = d.differenceBySeed ?? [];
  const zero = report.seeds.filter(
    (_, i) => differences[i] !== null && differences[i] !== undefined && d.percentBySeed[i] === null,
  );
  const measured = differences.filter((v) => v !== null && v !== undefined).length;
  if (zero.length === 0 || zero.length === measured) return `${report.baseline} is 0`;
  return `${report.baseline} is 0 on seed${zero.length === 1 ? '' : 's'} ${zero.join(', ')}`;
}

/**
 * How a side that did not measure a metric can: naming any start setting reports the starts (barrier-idle $), naming
 * a queue turns on the queue layer, which reports p99 JCT.
 */
const MEASURED_WITH: Partial<Record<ComparedMetric, string>> = {
  barrierIdleCost: '--co-start off',
  p99JctHours: '--queue fifo',
};

/**
 * The metrics one of the arm and the baseline measured and the other did not, which no comparison can hold:
 * `barrier-idle $: measured by co only, not compared; give the baseline (base) --co-start off`.
 */
export function oneSidedNotes(report: ArmsReport, arm: Arm): string[] {
  return oneSidedMetrics(report.runs[report.baseline] ?? [], report.runs[arm.name] ?? []).map(
    ({ metric, measuredBy }) => {
      const [by, other] =
        measuredBy === 'baseline'
          ? [report.baseline, `${arm.name}`]
          : [arm.name, `the baseline (${report.baseline})`];
      const how = MEASURED_WITH[metric];
      return (
        `${METRIC_LABELS[metric]}: measured by ${by} only, not compared` +
        (how === undefined ? '' : `; give ${other} ${how}`)
      );
    },
  );
}

/** A metric's label, marked when its differences are absolute (its baseline was 0, so no percent could be taken). */
export function metricLabel(d: PairedDifference): string {
  return `${METRIC_LABELS[d.metric]}${isAbsolute(d) ? ' (abs)' : ''}`;
}

/** A p-value as the tables print it: two decimals, three below 0.01, `<0.001` below that; `-` when absent. */
export function pValueText(p: number | null): string {
  if (p === null) return '-';
  if (p < 0.001) return '<0.001';
  return p < 0.01 ? p.toFixed(3) : p.toFixed(2);
}

/** The 95% confidence interval of a mean difference, as differenceText: `-0.68% to +0.26%`; `-` without one. */
export function confidenceText(d: PairedDifference): string {
  return d.confidence95 === null
    ? '-'
    : `${differenceText(d, d.confidence95.low)} to ${differenceText(d, d.confidence95.high)}`;
}

/**
 * Whether the mean difference is told apart from none at the 5% level: its 95% interval leaves out 0. Null below two
 * seeds and without spread (a report written before such intervals were left out may still hold a zero-width one).
 */
export function significant(d: PairedDifference): boolean | null {
  if (d.confidence95 === null || d.standardError === 0) return null;
  return d.confidence95.low > 0 || d.confidence95.high < 0;
}

/** A dollar figure of the tables (cost, cap) as the summary tables print money; `-` when absent. */
export function dollarsOrDash(v: number | null | undefined): string {
  return v === null || v === undefined ? '-' : `$${money(v)}`;
}

/** The caps an arm ran under, per seed. */
export function armCaps(report: ArmsReport, arm: string): readonly (number | null)[] {
  return report.capBySeedByArm[arm] ?? report.capBySeed;
}

/** Whether the arm or the baseline ran under a $/h cap (--cap-share's, or their flags'): the tables show the caps. */
export function capsShown(report: ArmsReport, arm: string): boolean {
  return [report.baseline, arm].some((name) => armCaps(report, name).some((cap) => cap !== null));
}

/** Whether arm and baseline ran under the same cap on every seed (the same catalog's peak, or no caps). */
export function sameCaps(report: ArmsReport, arm: string): boolean {
  const base = armCaps(report, report.baseline);
  return armCaps(report, arm).every((cap, i) => cap === base[i]);
}

/** Whether the arms do not all run one catalog: then every comparison names both of its catalogs. */
export function catalogsDiffer(report: ArmsReport): boolean {
  return new Set(report.arms.map((a) => report.catalogs[a.name] ?? null)).size > 1;
}

/**
 * The catalogs an arm and the baseline ran, when the arms do not all run one (null when they do):
 * `catalogs: b runs /x/doubled.json, a the bundled catalog: the differences hold the catalogs' prices too`.
 */
export function armCatalogsText(report: ArmsReport, arm: Arm): string | null {
  if (!catalogsDiffer(report)) return null;
  const own = report.catalogs[arm.name] ?? null;
  const base = report.catalogs[report.baseline] ?? null;
  if (own !== null && own === base)
    return `catalog: ${arm.name} and ${report.baseline} both run ${catalogName(own)}`;
  const capped =
    report.capShare === null
      ? ''
      : `; each is capped at ${report.capShare} × its own catalog’s uncapped peak`;
  return (
    `catalogs: ${arm.name} runs ${catalogName(own)}, ${report.baseline} ${catalogName(base)}: ` +
    `the differences hold the catalogs' prices too${capped}`
  );
}

/** The arm's peak $/h as a share of each seed's cap: the lowest and highest, or null without caps. */
export function peakShareRange(report: ArmsReport, arm: string): { min: number; max: number } | null {
  const caps = armCaps(report, arm);
  const shares = (report.runs[arm] ?? [])
    .map((r, i) => {
      const cap = caps[i];
      const peak = r.peakCostPerHour;
      return cap === null || cap === undefined || peak === null || peak === undefined ? null : peak / cap;
    })
    .filter((x): x is number => x !== null);
  return shares.length === 0 ? null : { min: Math.min(...shares), max: Math.max(...shares) };
}

/** `seed 6` or `seeds 4, 6`. */
export function seedsText(seeds: readonly number[]): string {
  return `seed${seeds.length === 1 ? '' : 's'} ${seeds.join(', ')}`;
}

/** A failed run as the reports name it: `seed 6 b: exited with 1: …`. */
export function failedRunText(failed: FailedRun): string {
  return `${failed.run}: ${failed.error}`;
}

/**
 * What the reports say of the seeds left out, when some were: a sentence (`seed 6 left out: a run failed; the arms
 * are compared on seeds 4, 5`), then each failed run; null when none was.
 */
export function leftOutText(report: ArmsReport): { readonly lead: string; readonly failed: string[] } | null {
  const leftOut = report.leftOut ?? [];
  if (leftOut.length === 0) return null;
  const runs = leftOut.flatMap((l) => l.failed);
  return {
    lead:
      `${seedsText(leftOut.map((l) => l.seed))} left out: ${runs.length === 1 ? 'a run' : `${runs.length} runs`} ` +
      `failed; the arms are compared on ${report.seeds.length === 0 ? 'no seed' : seedsText(report.seeds)}`,
    failed: runs.map(failedRunText),
  };
}
