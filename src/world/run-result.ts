import type { CostBreakdown } from './cost-ledger.js';
import type { ValueOfTimeSetting } from '../core/model.js';
import type { SerializedColocationTable } from '../scheduler/colocation-table.js';

/** What one simulated run produces; the report (JSON, CSV, HTML) and `simulate --json` are built from it. */
export interface RunSummary {
  readonly scheduler: string;
  readonly jobs: number;
  /** Instances billed per second, plus traffic across zones (NetworkRunMetrics.crossZoneCost). */
  readonly totalCost: number;
  /** totalCost / no-packing's totalCost when no-packing is among the runs, else null. */
  readonly normalizedCost: number | null;
  readonly meanJctHours: number;
  readonly medianJctHours: number;
  readonly p95JctHours: number;
  readonly peakCostPerHour: number;
  readonly migrationsPerJob: number;
  readonly instancesLaunched: number;
  /** Share of scheduling rounds where Full Reconfiguration was chosen (0 for schedulers without it). */
  readonly fullReconfigFraction: number;
  readonly wallSeconds: number;
  /** Eva's value of an hour of a job's completion time in this run ($ or 'auto'), when one was set (value-of-time sweeps). */
  readonly valueOfTimePerJobHour?: ValueOfTimeSetting | undefined;
}

/** Time series sampled at every change (event-driven), for the report's charts. */
export interface RunSeries {
  readonly timeSeconds: number[];
  readonly cumulativeCost: number[];
  readonly costPerHour: number[];
  readonly runningInstances: number[];
  /** Allocated resources (Σ demands of placed tasks) and provisioned capacity, per dimension. */
  readonly allocatedGpus: number[];
  readonly allocatedVcpus: number[];
  readonly allocatedMemoryGiB: number[];
  readonly capacityGpus: number[];
  readonly capacityVcpus: number[];
  readonly capacityMemoryGiB: number[];
  /** Cumulative count of job migrations. */
  readonly migrations: number[];
}

export interface JobOutcome {
  readonly id: string;
  readonly name: string;
  readonly arrivalSeconds: number;
  readonly startSeconds: number | null;
  readonly endSeconds: number | null;
  readonly jctSeconds: number | null;
  readonly migrations: number;
  /** False for a job that ended unsuccessfully at a stage (success workload); true otherwise. */
  readonly successful: boolean;
  /** Start (first progress) predicted when the job was first seen by a round; null without predictions. */
  readonly predictedStartSeconds: number | null;
  /** Completion time predicted when the job was first seen by a round (PCS §4); null without predictions. */
  readonly predictedEndSeconds: number | null;
  /** Latency-sensitive jobs: the time-average of P_job while it made progress (NoMora §6.1); null otherwise. */
  readonly appPerformance?: number | null | undefined;
  /** $ its traffic across zones cost (jobs that declare traffic). */
  readonly crossZoneCost?: number | undefined;
}

/** Metrics of a run whose jobs declare a network (latency-aware placement), or with a configured network. */
export interface NetworkRunMetrics {
  /** NoMora's metric (§6.1): mean over latency-sensitive jobs of the time-average of P_job; null when none ran. */
  readonly appPerformanceMean: number | null;
  /** $ of traffic across zones (already part of totalCost). */
  readonly crossZoneCost: number;
  readonly latencySensitiveJobs: number;
  /** Mean JCT in hours of the latency-sensitive jobs that finished; null when none. */
  readonly latencySensitiveMeanJctHours: number | null;
  /** Migrations of latency-sensitive jobs per latency-sensitive job; null when none. */
  readonly latencySensitiveMigrationsPerJob: number | null;
  /** Moves made by plans chosen for the network (Eva's `latency` candidate), per job of the trace. */
  readonly latencyMovesPerJob: number;
}

/** Metrics of a run with the queue layer; null when not applicable. */
export interface QueueRunMetrics {
  readonly p99JctHours: number | null;
  /** Mean PCS unfairness in percent (src/sim/admission.ts); null without caps. */
  readonly unfairness: number | null;
  /**
   * PCS prediction error of the submission-time predictions, in percent: mean and p99 over finished jobs of
   * |actual JCT − predicted JCT| / predicted JCT × 100 (PCS's Pred_err). Null when predictions were off or no job finished.
   */
  readonly predErrAvg: number | null;
  readonly predErrP99: number | null;
  /** Mean sojourn (JCT) of the jobs that ended successfully, in hours (success paper's metric). */
  readonly successfulSojournMeanHours: number | null;
  /** Jobs checkpointed back to the queue so a class could reclaim its guaranteed share (WFQ preemption). */
  readonly preemptions: number;
}

/** How multi-task jobs started (Murmuration digest §7.5): skew, barrier-idle cost, wait to be placed. */
export interface StartRunMetrics {
  /** Mean over starts of multi-task jobs of max − min of their tasks' ready times, seconds. */
  readonly startSkewSecondsMean: number;
  /** Σ over those starts and their tasks of (release − ready) × the task's share of its instance's $/hour. */
  readonly barrierIdleCost: number;
  /** Mean over jobs of (first placement − arrival), seconds. */
  readonly waitToPlaceSecondsMean: number;
  /** Jobs placed between rounds. */
  readonly placedBetweenRounds: number;
}

/** Metrics of a run with spot interruptions simulated (`simulate --spot on`). */
export interface SpotRunMetrics {
  /**
   * Spot instances EC2 took back (each counted once, however many jobs it hit); one drained on its notice and ended by
   * its owner before the reclaim is not one.
   */
  readonly interruptions: number;
  /**
   * Work spot interruptions cost, in job-hours at full throughput (progress past the last checkpoint): lost at the
   * notice by a runtime that evicts its jobs then (karpenter-spot's drain-and-evict), else at the reclaim.
   */
  readonly lostWorkHours: number;
  /** Share of the billed instance-hours bought on spot. */
  readonly spotShare: number;
  /** Rebalance recommendations the simulated market gave (`--spot-rebalance`; each instance at most once). */
  readonly rebalanceRecommendations: number;
}

/** Time-weighted allocated ÷ provisioned capacity over the whole run (null: none of it was provisioned). */
export interface RunUtilization {
  readonly gpus: number | null;
  readonly vcpus: number | null;
  readonly memoryGiB: number | null;
}

export interface RunResult {
  readonly summary: RunSummary;
  readonly series: RunSeries;
  /** Exact, from every sample (the series is downsampled for the charts). */
  readonly utilization?: RunUtilization | undefined;
  /** What the billed capacity was doing, in dollars (cost-ledger.ts). */
  readonly costBreakdown?: CostBreakdown | undefined;
  readonly jobs: readonly JobOutcome[];
  /** Present when the run had a queue layer (`RunOptions.queue`). */
  readonly queue?: QueueRunMetrics | undefined;
  /** Present when jobs declare a network or the run was given one (`RunOptions.network`). */
  readonly network?: NetworkRunMetrics | undefined;
  /** Start skew, barrier-idle cost and wait to be placed (runs given `RunOptions.starts`). */
  readonly starts?: StartRunMetrics | undefined;
  /** Present when spot interruptions were simulated (`RunOptions.spot`). */
  readonly spot?: SpotRunMetrics | undefined;
  /** The co-location table Eva learned, when the run was asked for it (`simulate --save-colocation-table`). */
  readonly learnedColocation?: SerializedColocationTable | undefined;
}
