import type { Market } from '../core/market.js';
import type { InstancePlacement } from '../core/network.js';
import type { InstanceLifecycle, JobStatus, TaskState } from './entities.js';
import type { TraceJob } from './trace.js';

/**
 * The simulator's world as plain data (PCS §4): what a completion-time prediction runs forward. The
 * simulator exports its own world at a round (exact: in-flight events included); the controller builds one from
 * its state store (instances up or booting, tasks running or starting, progress so far).
 */
export interface WorldInstance {
  readonly id: string;
  readonly typeName: string;
  readonly lifecycle: InstanceLifecycle;
  /** False once a plan dropped it (terminates when empty). */
  readonly assignable: boolean;
  /** Image ids built on it (a start there skips the build). */
  readonly images: readonly string[];
  /** Planned but not launched yet: launching it now would break a cap (it launches once room frees). */
  readonly launchDeferred?: boolean | undefined;
  /** Its zone and cluster placement group, when known. */
  readonly placement?: InstancePlacement | undefined;
  /** Bought on spot (absent: on demand), at this $/hour. */
  readonly market?: Market | undefined;
  readonly pricePerHour?: number | undefined;
}

export interface WorldTask {
  /** Task name within its job (TraceTask.name). */
  readonly name: string;
  readonly state: TaskState;
  /** Instance the plan committed it to. */
  readonly committedInstanceId?: string | undefined;
  /** Instance whose capacity it holds. */
  readonly occupyingInstanceId?: string | undefined;
  /** A start waits for its gates. */
  readonly pendingStart?: boolean | undefined;
  /** It works on until the instances its job moves to are ready, then checkpoints (make before break). */
  readonly pendingStop?: boolean | undefined;
}

export interface WorldJob {
  /** What the job is: demands, delays, full throughput, total iterations (remaining = total − completed). */
  readonly spec: TraceJob;
  readonly status: JobStatus;
  readonly requeueAfterStop?: boolean | undefined;
  /** Making progress now (init delay passed since all its tasks launched). */
  readonly active: boolean;
  /** Since when it has been active (its no-move window counts from here). */
  readonly activeSinceSeconds?: number | undefined;
  readonly completedIterations: number;
  readonly startSeconds: number | null;
  readonly migrations: number;
  readonly tasks: readonly WorldTask[];
  /** Invalidation tokens of pending job-active events (simulator export only; the controller leaves them 0). */
  readonly activationToken?: number | undefined;
}

/** A pending event, by ids. Completions are not listed: they follow from the rates, recomputed on import. */
export type WorldEvent =
  | { readonly kind: 'round'; readonly timeSeconds: number; readonly early?: boolean | undefined }
  | {
      readonly kind: 'instantiated' | 'worker-started' | 'registered' | 'terminated';
      readonly timeSeconds: number;
      readonly instanceId: string;
    }
  | {
      readonly kind: 'launched' | 'killed' | 'uploaded';
      readonly timeSeconds: number;
      readonly jobId: string;
      readonly taskName: string;
    }
  | {
      readonly kind: 'job-active';
      readonly timeSeconds: number;
      readonly jobId: string;
      readonly token: number;
    };

export interface SimWorld {
  readonly nowSeconds: number;
  /** Arrived, unfinished jobs in arrival order: live ones, and those held for their dependencies (status `held`). */
  readonly jobs: readonly WorldJob[];
  /** Instances not yet terminated. */
  readonly instances: readonly WorldInstance[];
  /** Pending events; must include the next scheduling round. */
  readonly events: readonly WorldEvent[];
  /** Instances waiting to terminate once empty, by id. */
  readonly pendingTerminationIds?: readonly string[] | undefined;
  /** Counter for new instance ids (`i-<n>`), so they do not collide with existing ones. */
  readonly instanceCounter?: number | undefined;
}
