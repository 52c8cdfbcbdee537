import type { JobOutcome, RunResult, RunSeries } from '../../world/run-result.js';
import { thinAligned } from './downsample.js';
import { runRecord, type RunRecord } from './normalize.js';

/** The settings a report was produced with (trace, seed, round length, …), shown in report.json and HTML. */
export type ReportSettings = Readonly<Record<string, string | number | boolean | null>>;

/**
 * Whether the runs were held to a cost or instance cap or to quotas, as `simulate` states them in its settings (the
 * cap's number, the quotas' list; "none …" when there were none): their jobs then waited for room.
 */
export function heldToCaps(settings: ReportSettings): boolean {
  const given = (value: ReportSettings[string] | undefined): boolean =>
    typeof value === 'number' || (typeof value === 'string' && value !== '' && !value.startsWith('none'));
  return given(settings.capDollarsPerHour) || given(settings.capInstances) || given(settings.quotas);
}

/**
 * What `fleetwise simulate --json` prints: exactly this object, one record per run in request order (the summary
 * fields, then the queue layer's metrics when the run had a queue).
 */
export interface RunsJson {
  readonly runs: RunRecord[];
}

export function runsJson(results: readonly RunResult[]): RunsJson {
  return { runs: results.map(runRecord) };
}

export interface ReportJson extends RunsJson {
  readonly settings: ReportSettings;
  /**
   * Lower bounds on any scheduler's cost for the trace in $ (`fleetwise bench bound`), when computed; with
   * `atSpotPrices`, on what its instances cost before AWS's first-hour refunds (`SPOT_REFUNDS`), not on its bill.
   */
  readonly bounds?: {
    readonly workBound: number;
    readonly timedBound: number;
    readonly atSpotPrices?: boolean;
  };
  /** Per scheduler: its time series (thinned to bound the file size, peaks kept) and every job's outcome. */
  readonly details: Record<string, { readonly series: RunSeries; readonly jobs: readonly JobOutcome[] }>;
}

/**
 * Series are thinned to `maxSeriesBuckets` time buckets: on the full Alibaba trace a run has ~10^5 change
 * points × 11 arrays × every scheduler, which would make report.json hundreds of MB. Cumulative cost and
 * migrations are exact at every kept time; each bucket keeps the extremes of cost rate and instance count.
 */
export function thinSeries(series: RunSeries, maxSeriesBuckets: number): RunSeries {
  const keep = thinAligned(
    series.timeSeconds,
    [series.costPerHour, series.runningInstances, series.allocatedGpus, series.migrations],
    maxSeriesBuckets,
  );
  if (keep.length === series.timeSeconds.length) return series;
  const pick = (a: readonly number[]): number[] => keep.map((i) => a[i] as number);
  return {
    timeSeconds: pick(series.timeSeconds),
    cumulativeCost: pick(series.cumulativeCost),
    costPerHour: pick(series.costPerHour),
    runningInstances: pick(series.runningInstances),
    allocatedGpus: pick(series.allocatedGpus),
    allocatedVcpus: pick(series.allocatedVcpus),
    allocatedMemoryGiB: pick(series.allocatedMemoryGiB),
    capacityGpus: pick(series.capacityGpus),
    capacityVcpus: pick(series.capacityVcpus),
    capacityMemoryGiB: pick(series.capacityMemoryGiB),
    migrations: pick(series.migrations),
  };
}

/**
 * Lower bounds on any scheduler's cost for the trace (src/bench/cost-bound.ts), when the report carries them: the
 * summary states them and the cumulative-cost chart draws the timed bound dashed. At spot prices they bound what the
 * instances cost before AWS's refunds (`SPOT_REFUNDS`), so a run with such reclaims may be billed less.
 */
export interface ReportBounds {
  readonly workBound: number;
  readonly timedBound: number;
  /** The runs could buy spot (`--spot on`): the bounds price each type at its cheapest spot pool where jobs allow. */
  readonly atSpotPrices?: boolean | undefined;
  readonly timedSeries: {
    readonly timeSeconds: readonly number[];
    readonly cumulativeCost: readonly number[];
  };
}

/**
 * Why a spot run's bill may go below the bounds at spot prices: they price the instance time every schedule needs,
 * and AWS charges nothing for some of it (core/spot.ts `FREE_INTERRUPTED_SPOT_SECONDS`).
 */
export const SPOT_REFUNDS = 'AWS charges nothing for a spot instance EC2 reclaims in its first hour';

export function reportJson(
  results: readonly RunResult[],
  settings: ReportSettings,
  options: { readonly maxSeriesBuckets?: number; readonly bounds?: ReportBounds | undefined } = {},
): ReportJson {
  const details: ReportJson['details'] = {};
  for (const r of results)
    details[r.summary.scheduler] = {
      series: thinSeries(r.series, options.maxSeriesBuckets ?? 2000),
      jobs: r.jobs,
    };
  const b = options.bounds;
  return {
    ...runsJson(results),
    settings,
    ...(b === undefined
      ? {}
      : {
          bounds: {
            workBound: b.workBound,
            timedBound: b.timedBound,
            ...(b.atSpotPrices === true ? { atSpotPrices: true } : {}),
          },
        }),
    details,
  };
}
