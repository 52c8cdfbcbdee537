import type { FamilyDemand } from '../../core/resources.js';

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
}

export interface Trace {
  readonly name: string;
  readonly jobs: readonly TraceJob[];
}
