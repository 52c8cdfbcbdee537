import { secondsToHours } from '../core/units.js';
import type { SimJob } from './entities.js';
import { isLatencySensitive } from '../core/latency-curves.js';
import type { JobOutcome, NetworkRunMetrics, RunSummary } from './run-result.js';

/** The run-level numbers behind a RunSummary (research digest §6 "Metric definitions"). */
export interface RunTotals {
  readonly scheduler: string;
  readonly totalCost: number;
  readonly peakCostPerHour: number;
  readonly instancesLaunched: number;
  readonly plannedRounds: number;
  readonly fullRounds: number;
  readonly wallSeconds: number;
}

export function mean(xs: readonly number[]): number {
  return xs.length === 0 ? 0 : xs.reduce((a, b) => a + b, 0) / xs.length;
}

/** Median (mean of the two middle values for an even count); 0 for no values. */
export function median(xs: readonly number[]): number {
  if (xs.length === 0) return 0;
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
}

/** Nearest-rank percentile (the smallest value with at least p% of the values at or below it); 0 for none. */
export function percentile(xs: readonly number[], p: number): number {
  if (xs.length === 0) return 0;
  const s = [...xs].sort((a, b) => a - b);
  const rank = Math.min(s.length, Math.max(1, Math.ceil((p / 100) * s.length)));
  return s[rank - 1] as number;
}

/**
 * JCT = end − arrival over finished jobs; migrations per job = moves after the first launch, averaged over
 * every job of the trace; full-reconfiguration fraction = share of planned rounds that chose Full.
 * normalizedCost stays null: the caller sets it once it has No-Packing's cost.
 */
export function summarize(totals: RunTotals, jobs: readonly JobOutcome[]): RunSummary {
  const jctHours = jobs.flatMap((j) => (j.jctSeconds === null ? [] : [secondsToHours(j.jctSeconds)]));
  const migrations = jobs.reduce((a, j) => a + j.migrations, 0);
  return {
    scheduler: totals.scheduler,
    jobs: jobs.length,
    totalCost: totals.totalCost,
    normalizedCost: null,
    meanJctHours: mean(jctHours),
    medianJctHours: median(jctHours),
    p95JctHours: percentile(jctHours, 95),
    peakCostPerHour: totals.peakCostPerHour,
    migrationsPerJob: jobs.length === 0 ? 0 : migrations / jobs.length,
    instancesLaunched: totals.instancesLaunched,
    fullReconfigFraction: totals.plannedRounds === 0 ? 0 : totals.fullRounds / totals.plannedRounds,
    wallSeconds: totals.wallSeconds,
  };
}

/** A finished (or unfinished) job of a run as the results report it, with its submission-time prediction if any. */
export function jobOutcome(
  job: SimJob,
  predicted: { readonly startSeconds: number | null; readonly endSeconds: number | null } | undefined,
): JobOutcome {
  return {
    id: job.spec.id,
    name: job.spec.name,
    arrivalSeconds: job.spec.arrivalSeconds,
    startSeconds: job.startSeconds,
    endSeconds: job.endSeconds,
    jctSeconds: job.endSeconds === null ? null : job.endSeconds - job.spec.arrivalSeconds,
    migrations: job.migrations,
    successful: job.spec.successful ?? true,
    predictedStartSeconds: predicted?.startSeconds ?? null,
    predictedEndSeconds: predicted?.endSeconds ?? null,
    ...(job.spec.network === undefined
      ? {}
      : {
          appPerformance:
            isLatencySensitive(job.spec.network.sensitivity) && job.tasks.length > 1 && job.activeSeconds > 0
              ? job.performanceSeconds / job.activeSeconds
              : null,
          crossZoneCost: job.crossZoneCost,
        }),
  };
}

/**
 * The run's network metrics from its jobs: NoMora's mean application performance (the mean over latency-sensitive
 * multi-task jobs of their time-average P_job, which is the "area" of the paper's CDF, digest §6.2), the traffic cost
 * across zones, and the latency-sensitive jobs' JCT and migrations.
 */
export function networkMetrics(
  jobs: readonly SimJob[],
  outcomes: readonly JobOutcome[],
  latencyMoves = 0,
): NetworkRunMetrics {
  const sensitive = jobs.filter(
    (j) =>
      j.spec.network !== undefined && isLatencySensitive(j.spec.network.sensitivity) && j.tasks.length > 1,
  );
  const ids = new Set(sensitive.map((j) => j.spec.id));
  const perf = sensitive
    .filter((j) => j.activeSeconds > 0)
    .map((j) => j.performanceSeconds / j.activeSeconds);
  const jct = outcomes.flatMap((o) =>
    ids.has(o.id) && o.jctSeconds !== null ? [secondsToHours(o.jctSeconds)] : [],
  );
  return {
    appPerformanceMean: perf.length === 0 ? null : mean(perf),
    crossZoneCost: jobs.reduce((s, j) => s + j.crossZoneCost, 0),
    latencySensitiveJobs: sensitive.length,
    latencySensitiveMeanJctHours: jct.length === 0 ? null : mean(jct),
    latencySensitiveMigrationsPerJob:
      sensitive.length === 0 ? null : sensitive.reduce((s, j) => s + j.migrations, 0) / sensitive.length,
    latencyMovesPerJob: jobs.length === 0 ? 0 : latencyMoves / jobs.length,
  };
}
