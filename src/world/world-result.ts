import { waitsToPlace } from './job-dependencies.js';
import { jobOutcome, mean, networkMetrics, summarize } from './metrics.js';
import type { RoundTally } from './round-tally.js';
import type { JobOutcome, RunResult } from './run-result.js';
import type { PredictedTimes } from './simulation-types.js';
import type { WorldState } from './world-state.js';

/** What the engine counted over a run beside the world's own bookkeeping, and what the run reports. */
export interface RunCounts {
  readonly schedulerName: string;
  /** The plans made, full reconfigurations and moves for the network's sake among them. */
  readonly tally: RoundTally;
  /** Report network metrics (a network was configured or some job declares one). */
  readonly reportsNetwork: boolean;
  /** Report start skew, barrier-idle cost and wait to be placed (the run was given start options). */
  readonly reportsStarts: boolean;
  readonly placedBetweenRounds: number;
  /** Bound on the series' length. */
  readonly maxSeriesPoints: number;
  /** A job's submission-time prediction (undefined: none was made). */
  readonly predictionOf: (jobId: string) => PredictedTimes | undefined;
}

/** A run's result, read off its world at the end: summary, series, cost breakdown, jobs and the optional metrics. */
export function worldResult(state: WorldState, counts: RunCounts, wallSeconds: number): RunResult {
  const jobs: JobOutcome[] = state.jobs.map((j) => jobOutcome(j, counts.predictionOf(j.spec.id)));
  const network = counts.reportsNetwork
    ? networkMetrics(state.jobs, jobs, counts.tally.latencyMoves)
    : undefined;
  const summary = summarize(
    {
      scheduler: counts.schedulerName,
      // Traffic across zones is money too (zero without jobs that declare traffic).
      totalCost: state.meter.totalCost + (network?.crossZoneCost ?? 0),
      peakCostPerHour: state.meter.peakCostPerHour,
      instancesLaunched: state.instanceCounter,
      plannedRounds: counts.tally.rounds,
      fullRounds: counts.tally.fullRounds,
      wallSeconds,
    },
    jobs,
  );
  const waits = waitsToPlace(state.jobs);
  const spot = state.spot;
  return {
    summary,
    // The cumulative cost ends at totalCost: the traffic across zones is part of it too (FleetMeter).
    series: state.meter.series(counts.maxSeriesPoints),
    utilization: state.meter.utilization(),
    costBreakdown: state.ledger?.breakdown(),
    jobs,
    ...(network === undefined ? {} : { network }),
    ...(counts.reportsStarts
      ? {
          starts: {
            startSkewSecondsMean: mean(state.starts.skews),
            barrierIdleCost: state.starts.barrierIdleCost,
            waitToPlaceSecondsMean: mean(waits),
            placedBetweenRounds: counts.placedBetweenRounds,
          },
        }
      : {}),
    ...(spot === undefined
      ? {}
      : {
          spot: {
            interruptions: spot.interruptions,
            lostWorkHours: state.jobs.reduce((s, j) => s + j.lostWorkSeconds, 0) / 3600,
            spotShare: state.meter.spotShare,
            rebalanceRecommendations: spot.rebalanceRecommendations,
          },
        }),
  };
}
