import type { NetworkDeclaration } from '../core/network.js';
import type { FamilyDemand } from '../core/resources.js';
import type { SuccessSpec } from '../queue/success.js';
import type { SpotPreference } from '../core/spot.js';

/** One task of a trace job, with the delays Eva's simulator charges (research digest §4, §7). */
export interface TraceTask {
  readonly name: string;
  readonly demand: FamilyDemand;
  readonly shmSizeGiB: number;
  /** Tasks with the same image id skip the build on an instance that already has it. */
  readonly imageId: string;
  readonly fetchDelaySeconds: number;
  readonly buildImageDelaySeconds: number;
  readonly killDelaySeconds: number;
  readonly uploadDelaySeconds: number;
  /**
   * Co-location key the scheduler learns under; default `<job name>_<task name>` (Eva's convention). The
   * controller's prediction worlds pass its own workload keys, so a forked scheduler finds what it learned.
   */
  readonly key?: string | undefined;
}

export interface TraceJob {
  readonly id: string;
  /** Job name in Eva's convention, e.g. `resnet18[3]`; tasks' co-location keys are `<name>_<task name>`. */
  readonly name: string;
  /** The base workload (a row/column of contention_matrix.csv) that sets ground-truth interference. */
  readonly workload: string;
  readonly arrivalSeconds: number;
  /** Standalone duration in seconds (total iterations / full throughput). */
  readonly durationSeconds: number;
  readonly initDelaySeconds: number;
  /** Iterations per second when running alone. */
  readonly fullThroughput: number;
  readonly totalIterations: number;
  readonly tasks: readonly TraceTask[];
  readonly team?: string | undefined;
  /**
   * Declared success model (success paper): stages with continuation probabilities, or a success
   * probability and expected size, in seconds at full throughput. Only success-rank ordering reads it.
   */
  readonly success?: SuccessSpec | undefined;
  /**
   * Whether the job ends successfully (default true). A job that fails at a stage is in the trace with the
   * iterations it actually runs (durationSeconds/totalIterations up to that stage) and `successful: false`.
   */
  readonly successful?: boolean | undefined;
  /**
   * Its latency sensitivity, communication pattern, root task and traffic (latency-aware placement): the simulator
   * slows the job down by its curve at its round trip (its ground truth) and the scheduler sees the declaration.
   */
  readonly network?: NetworkDeclaration | undefined;
  /** Seconds between its own checkpoints (0: never); default DEFAULT_CHECKPOINT_INTERVAL_SECONDS. */
  readonly checkpointIntervalSeconds?: number | undefined;
  /** Whether it may run on spot capacity (absent: allowed). */
  readonly spot?: SpotPreference | undefined;
  /** The most one spot interruption may delay it (a job spec's `spotMaxDelayMinutes`), in seconds. */
  readonly spotMaxDelaySeconds?: number | undefined;
  /** Not moved through its init nor for this long after it starts making progress (a job spec's `noMoveSeconds`). */
  readonly noMoveSeconds?: number | undefined;
  /** What an hour of its completion time is worth, $ (a job spec's `valueOfTimePerJobHour`). */
  readonly valueOfTimePerHour?: number | undefined;
  /**
   * Ids of jobs earlier in the trace that must finish first (the controller's `dependsOn`, AWS Batch's job
   * dependencies): it arrives at `arrivalSeconds` and is held out of every round until the last of them has finished.
   * Each must succeed: a trace whose dependency fails is refused, as the controller ends such a job unstarted.
   */
  readonly dependsOn?: readonly string[] | undefined;
}

/** The team of a trace job that names none (the controller runtime submits it for this team). */
export const DEFAULT_TRACE_TEAM = 'default';

/** A job checkpoints every 30 minutes unless its trace or `--checkpoint-minutes` says otherwise. */
export const DEFAULT_CHECKPOINT_INTERVAL_SECONDS = 1800;

export interface Trace {
  readonly name: string;
  readonly jobs: readonly TraceJob[];
}
