import { COST_PARTS, type CostPart } from '../../world/cost-ledger.js';
import type {
  NetworkRunMetrics,
  QueueRunMetrics,
  StartRunMetrics,
  RunResult,
  RunSummary,
  SpotRunMetrics,
} from '../../world/run-result.js';

/** The baseline that costs are normalized to (Eva §6: costs relative to No-Packing). */
export const BASELINE_SCHEDULER = 'no-packing';

/**
 * Set each run's normalizedCost = totalCost / the no-packing run's totalCost, or null when no-packing is not
 * among the runs (or cost nothing, so the ratio is undefined).
 */
export function withNormalizedCosts(results: readonly RunResult[]): RunResult[] {
  const baseline = results.find((r) => r.summary.scheduler === BASELINE_SCHEDULER);
  const baseCost = baseline?.summary.totalCost;
  return results.map((r) => ({
    ...r,
    summary: {
      ...r.summary,
      normalizedCost: baseCost !== undefined && baseCost > 0 ? r.summary.totalCost / baseCost : null,
    },
  }));
}

/** RunSummary's fields in the order `simulate --json`, runs.csv and the tables show them. */
export const SUMMARY_FIELDS = [
  'scheduler',
  'jobs',
  'totalCost',
  'normalizedCost',
  'meanJctHours',
  'medianJctHours',
  'p95JctHours',
  'peakCostPerHour',
  'migrationsPerJob',
  'instancesLaunched',
  'fullReconfigFraction',
  'wallSeconds',
] as const satisfies readonly (keyof RunSummary)[];

/** A copy with exactly SUMMARY_FIELDS, in order (a simulator adding fields does not change the output). */
export function orderedSummary(s: RunSummary): RunSummary {
  return {
    scheduler: s.scheduler,
    jobs: s.jobs,
    totalCost: s.totalCost,
    normalizedCost: s.normalizedCost,
    meanJctHours: s.meanJctHours,
    medianJctHours: s.medianJctHours,
    p95JctHours: s.p95JctHours,
    peakCostPerHour: s.peakCostPerHour,
    migrationsPerJob: s.migrationsPerJob,
    instancesLaunched: s.instancesLaunched,
    fullReconfigFraction: s.fullReconfigFraction,
    wallSeconds: s.wallSeconds,
  };
}

/** The queue layer's metrics, appended to a run's record when the run had a queue, in this order. */
export const QUEUE_FIELDS = [
  'p99JctHours',
  'unfairness',
  'predErrAvg',
  'predErrP99',
  'successfulSojournMeanHours',
  'preemptions',
] as const satisfies readonly (keyof QueueRunMetrics)[];

/** The network metrics, appended when the run's jobs declare a network (or it had one configured), in this order. */
export const NETWORK_FIELDS = [
  'appPerformanceMean',
  'crossZoneCost',
  'latencySensitiveJobs',
  'latencySensitiveMeanJctHours',
  'latencySensitiveMigrationsPerJob',
  'latencyMovesPerJob',
] as const satisfies readonly (keyof NetworkRunMetrics)[];

/** How multi-task jobs started, appended when the run reports it, in this order. */
export const START_FIELDS = [
  'startSkewSecondsMean',
  'barrierIdleCost',
  'waitToPlaceSecondsMean',
  'placedBetweenRounds',
] as const satisfies readonly (keyof StartRunMetrics)[];

/** The spot metrics, appended when the run simulated spot interruptions (`--spot on`), in this order. */
export const SPOT_FIELDS = [
  'interruptions',
  'lostWorkHours',
  'spotShare',
  'rebalanceRecommendations',
] as const satisfies readonly (keyof SpotRunMetrics)[];

/** Where the instance dollars went (cost-ledger.ts), appended when the run reports it, in COST_PARTS' order. */
export const COST_FIELDS = COST_PARTS.map(costField);

/**
 * Traffic across zones as a part of the cost, after COST_FIELDS, in runs that report the network (the others keep
 * exactly their fields): with it the cost parts add up to totalCost.
 */
export const CROSS_ZONE_COST_FIELD = 'costCrossZone' as const;

/** `working` → `costWorking`. */
export function costField(part: CostPart): `cost${Capitalize<CostPart>}` {
  return `cost${part.charAt(0).toUpperCase()}${part.slice(1)}` as `cost${Capitalize<CostPart>}`;
}

/**
 * One run as `simulate --json`, report.json and runs.csv show it: SUMMARY_FIELDS, then QUEUE_FIELDS if queued, then
 * NETWORK_FIELDS if the run reports the network, then START_FIELDS if it reports starts, then SPOT_FIELDS with spot
 * on, then COST_FIELDS and, when the run reports the network too, CROSS_ZONE_COST_FIELD.
 */
export type RunRecord = RunSummary &
  Partial<QueueRunMetrics> &
  Partial<NetworkRunMetrics> &
  Partial<StartRunMetrics> &
  Partial<SpotRunMetrics> &
  Partial<Record<`cost${Capitalize<CostPart>}` | typeof CROSS_ZONE_COST_FIELD, number>>;

export function runRecord(r: RunResult): RunRecord {
  const summary = orderedSummary(r.summary);
  const q = r.queue;
  const n = r.network;
  const s = r.starts;
  const breakdown = r.costBreakdown;
  return {
    ...summary,
    ...(q === undefined
      ? {}
      : {
          p99JctHours: q.p99JctHours,
          unfairness: q.unfairness,
          predErrAvg: q.predErrAvg,
          predErrP99: q.predErrP99,
          successfulSojournMeanHours: q.successfulSojournMeanHours,
          preemptions: q.preemptions,
        }),
    ...(n === undefined
      ? {}
      : {
          appPerformanceMean: n.appPerformanceMean,
          crossZoneCost: n.crossZoneCost,
          latencySensitiveJobs: n.latencySensitiveJobs,
          latencySensitiveMeanJctHours: n.latencySensitiveMeanJctHours,
          latencySensitiveMigrationsPerJob: n.latencySensitiveMigrationsPerJob,
          latencyMovesPerJob: n.latencyMovesPerJob,
        }),
    ...(s === undefined
      ? {}
      : {
          startSkewSecondsMean: s.startSkewSecondsMean,
          barrierIdleCost: s.barrierIdleCost,
          waitToPlaceSecondsMean: s.waitToPlaceSecondsMean,
          placedBetweenRounds: s.placedBetweenRounds,
        }),
    ...(r.spot === undefined
      ? {}
      : {
          interruptions: r.spot.interruptions,
          lostWorkHours: r.spot.lostWorkHours,
          spotShare: r.spot.spotShare,
          rebalanceRecommendations: r.spot.rebalanceRecommendations,
        }),
    ...(breakdown === undefined
      ? {}
      : Object.fromEntries(COST_PARTS.map((part) => [costField(part), breakdown[part]]))),
    ...(breakdown === undefined || n === undefined ? {} : { [CROSS_ZONE_COST_FIELD]: n.crossZoneCost }),
    // Last, and only in a value-of-time sweep or when one was set: which value the run had.
    ...(r.summary.valueOfTimePerJobHour === undefined
      ? {}
      : { valueOfTimePerJobHour: r.summary.valueOfTimePerJobHour }),
  };
}
