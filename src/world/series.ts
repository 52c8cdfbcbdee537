import type { RunSeries } from './run-result.js';

/** One sample of the cluster's state (the RunSeries columns). */
export interface SeriesPoint {
  readonly timeSeconds: number;
  readonly cumulativeCost: number;
  readonly costPerHour: number;
  readonly runningInstances: number;
  readonly allocatedGpus: number;
  readonly allocatedVcpus: number;
  readonly allocatedMemoryGiB: number;
  readonly capacityGpus: number;
  readonly capacityVcpus: number;
  readonly capacityMemoryGiB: number;
  readonly migrations: number;
}

const COLUMNS = [
  'timeSeconds',
  'cumulativeCost',
  'costPerHour',
  'runningInstances',
  'allocatedGpus',
  'allocatedVcpus',
  'allocatedMemoryGiB',
  'capacityGpus',
  'capacityVcpus',
  'capacityMemoryGiB',
  'migrations',
] as const satisfies readonly (keyof SeriesPoint & keyof RunSeries)[];

/** Columns whose change makes a new sample (time and the cumulative cost always change, so they do not count). */
const STATE_COLUMNS = COLUMNS.slice(2);

export function emptySeries(): RunSeries {
  return {
    timeSeconds: [],
    cumulativeCost: [],
    costPerHour: [],
    runningInstances: [],
    allocatedGpus: [],
    allocatedVcpus: [],
    allocatedMemoryGiB: [],
    capacityGpus: [],
    capacityVcpus: [],
    capacityMemoryGiB: [],
    migrations: [],
  };
}

/**
 * Records the series at every change of the cluster's state (event-driven sampling). Between two samples the
 * state is constant, so the cumulative cost grows linearly and nothing is lost by not sampling.
 */
export class SeriesRecorder {
  private readonly series = emptySeries();
  private last: SeriesPoint | undefined;

  record(p: SeriesPoint, force = false): void {
    const last = this.last;
    if (last !== undefined && !force && STATE_COLUMNS.every((c) => last[c] === p[c])) return;
    if (last !== undefined && last.timeSeconds === p.timeSeconds) this.dropLast();
    for (const c of COLUMNS) this.series[c].push(p[c]);
    this.last = p;
  }

  private dropLast(): void {
    for (const c of COLUMNS) this.series[c].pop();
  }

  result(maxPoints: number): RunSeries {
    return downsampleSeries(this.series, maxPoints);
  }
}

/**
 * Keep at most `maxPoints` samples for the report: the run is cut into maxPoints/4 equal time buckets and each
 * keeps its first and last sample and the samples with the highest $/h and the most instances, so the peaks
 * the summary reports stay visible. Short series are returned unchanged.
 */
export function downsampleSeries(series: RunSeries, maxPoints: number): RunSeries {
  const n = series.timeSeconds.length;
  if (n <= maxPoints) return series;
  const buckets = Math.max(1, Math.floor(maxPoints / 4));
  const t0 = series.timeSeconds[0] as number;
  const span = (series.timeSeconds[n - 1] as number) - t0;
  const bucketOf = (i: number): number =>
    span > 0
      ? Math.min(buckets - 1, Math.floor((((series.timeSeconds[i] as number) - t0) / span) * buckets))
      : 0;
  const keep: number[] = [];
  let start = 0;
  while (start < n) {
    const b = bucketOf(start);
    let end = start;
    while (end + 1 < n && bucketOf(end + 1) === b) end++;
    let maxCost = start;
    let maxInstances = start;
    for (let i = start; i <= end; i++) {
      if ((series.costPerHour[i] as number) > (series.costPerHour[maxCost] as number)) maxCost = i;
      if ((series.runningInstances[i] as number) > (series.runningInstances[maxInstances] as number))
        maxInstances = i;
    }
    keep.push(...[...new Set([start, maxCost, maxInstances, end])].sort((a, b2) => a - b2));
    start = end + 1;
  }
  const out = emptySeries();
  for (const c of COLUMNS) for (const i of keep) out[c].push(series[c][i] as number);
  return out;
}
