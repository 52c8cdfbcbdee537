import type { Readable } from 'node:stream';
import { z } from 'zod';

/**
 * What a worker runs tasks with: Docker containers (executors/docker.ts) or plain processes (executors/process.ts)
 * for hosts without Docker. Every call is idempotent and level-triggered: the worker compares the tasks the
 * controller wants on its instance with `list()` and starts/stops the difference; a restarted worker adopts what
 * is already running (containers are found again by their labels, processes by their pid files).
 */
export interface TaskLaunch {
  /** Task id (`job-7.0`); containers/processes are labelled with it. */
  readonly taskId: string;
  readonly jobId: string;
  /** An image to pull/use, or a build context directory (already fetched and unpacked) with an optional Dockerfile. */
  readonly image?: string | undefined;
  readonly build?:
    | { readonly contextDir: string; readonly dockerfile?: string | undefined; readonly contentHash: string }
    | undefined;
  readonly command: readonly string[];
  readonly env: Readonly<Record<string, string>>;
  /** Limits: vCPUs, memory GiB, GPUs (device requests on GPU instances), shm GiB. */
  readonly vcpus: number;
  readonly memoryGiB: number;
  readonly gpus: number;
  readonly shmSizeGiB: number;
  /** Host directory mounted at FLEETWISE_CHECKPOINT_DIR inside the task; holds the restored checkpoint if any. */
  readonly checkpointDir: string;
  /** Host file the task appends progress to (FLEETWISE_PROGRESS_FILE). */
  readonly progressFile: string;
  /** True when this start restores a checkpoint (FLEETWISE_RESTORE=1). */
  readonly restoring: boolean;
  /** The job's attempt, from 1 (FLEETWISE_ATTEMPT; AWS Batch's AWS_BATCH_JOB_ATTEMPT). */
  readonly attempt?: number | undefined;
  /** The job's checkpoint signal and timeout, and the iterations it declares: kept with the launch (`LaunchedAs`). */
  readonly checkpointSignal?: string | undefined;
  readonly checkpointTimeoutSeconds?: number | undefined;
  readonly totalIterations?: number | undefined;
}

/**
 * What the executor kept of a task's launch, so that a restarted worker whose own record of the task is gone (a disk
 * that filled, a torn write) still knows which attempt runs, how to stop it and when it is done: without the attempt
 * its exit would be recorded and reported as attempt 1's, and the controller's next answer would run it again.
 */
export interface LaunchedAs {
  readonly jobId: string;
  readonly attempt: number;
  readonly checkpointSignal?: string | undefined;
  readonly checkpointTimeoutSeconds?: number | undefined;
  readonly totalIterations?: number | undefined;
}

const launchedAsSchema = z.object({
  jobId: z.string().min(1),
  attempt: z.number().int().positive().optional(),
  checkpointSignal: z.string().min(1).optional(),
  checkpointTimeoutSeconds: z.number().positive().optional(),
  totalIterations: z.number().nonnegative().optional(),
});

/**
 * `LaunchedAs` out of a launch as an executor kept it (the process executor's launch.json is the whole `TaskLaunch`);
 * undefined when it is not one. A launch without an attempt is attempt 1, as FLEETWISE_ATTEMPT tells the task.
 */
export function launchedAsOf(kept: unknown): LaunchedAs | undefined {
  const parsed = launchedAsSchema.safeParse(kept);
  if (!parsed.success) return undefined;
  const { jobId, attempt, checkpointSignal, checkpointTimeoutSeconds, totalIterations } = parsed.data;
  return {
    jobId,
    attempt: attempt ?? 1,
    ...(checkpointSignal === undefined ? {} : { checkpointSignal }),
    ...(checkpointTimeoutSeconds === undefined ? {} : { checkpointTimeoutSeconds }),
    ...(totalIterations === undefined ? {} : { totalIterations }),
  };
}

/** A task's exit code when SIGKILL ended it (128 + 9), as Docker reports it and the process executor too. */
export const SIGKILL_EXIT_CODE = 128 + 9;

export type TaskRunState = 'starting' | 'running' | 'exited';

export interface TaskRunStatus {
  readonly taskId: string;
  readonly state: TaskRunState;
  readonly exitCode?: number | undefined;
  readonly startedAt?: Date | undefined;
  readonly finishedAt?: Date | undefined;
  /** False when the executor records but does not apply the CPU/memory/shm/GPU limits (the process executor). */
  readonly limitsEnforced?: boolean | undefined;
  /** The kernel killed it (or one of its processes) for using more memory than its limit (Docker's OOMKilled). */
  readonly oomKilled?: boolean | undefined;
  /** The memory limit it ran under, GiB, when the executor applied one. */
  readonly memoryLimitGiB?: number | undefined;
  /** What the executor kept of its launch (undefined when it kept nothing readable). */
  readonly launched?: LaunchedAs | undefined;
}

/**
 * How far into a task's output a reader has got: `bytes` of it (as `logs` gives it), and optionally an executor's
 * own note that finds that point again without reading what comes before (Docker's, executors/docker-log-reads.ts).
 * The note only speeds a read up: `bytes` alone is always enough, which is how a restarted worker resumes.
 */
export interface LogPosition {
  readonly bytes: number;
  readonly resume?: string | undefined;
}

export interface LogChunk {
  /** Output past the position asked for; empty when there is none yet. */
  readonly data: Buffer;
  /** The position after `data`. */
  readonly next: LogPosition;
}

/** Where `releaseImages` says what it removed and what failed (the agent's log). */
export interface ImageReleaseLog {
  info(message: string): void;
  warn(message: string): void;
}

export interface Executor {
  readonly kind: 'docker' | 'process';
  /**
   * Whether `status` says when the kernel killed a task for its memory (`oomKilled`): then a SIGKILL that was not
   * that is someone's kill (`docker stop` past its grace, `docker kill`). The process executor cannot tell.
   */
  readonly reportsOomKills?: boolean | undefined;
  /**
   * Everything of a start that can be done before the task is created (pull or build its image, make its host paths
   * usable by the image's user), so that `start` is quick: a held task is ready only once this is done, and its job's
   * release then starts every task at once, none still pulling while its siblings run. A failure here is the start's
   * failure (a build that fails, with its log). Optional, and `start` does all of it anyway when it was not called.
   */
  prepare?(launch: TaskLaunch): Promise<void>;
  /** Start a task; if one with this task id already runs, this is a no-op (adoption). */
  start(launch: TaskLaunch): Promise<void>;
  /** Send the checkpoint signal (e.g. SIGTERM) without waiting. */
  signal(taskId: string, signal: NodeJS.Signals): Promise<void>;
  /** Stop now (after the grace period the caller chose); idempotent; removes nothing the logs need. */
  kill(taskId: string): Promise<void>;
  /** Forget a finished task (remove its container/process record). */
  remove(taskId: string): Promise<void>;
  /**
   * A task's container was removed (it ended, or moved away): in the background, and at most once at a time, remove
   * the images this executor built for tasks that nothing needs any more (executors/docker.ts). `held` gives the
   * launches of the tasks prepared here and held, not started yet, whose images stay; it is asked when the removal
   * runs. What is removed is logged at info, what fails as a warning: this never throws, and never delays the caller.
   * Optional: an executor that builds nothing has nothing to remove.
   */
  releaseImages?(held: () => Iterable<TaskLaunch>, log: ImageReleaseLog): void;
  status(taskId: string): Promise<TaskRunStatus | undefined>;
  /** Every task this executor knows on this host (for adoption after a worker restart). */
  list(): Promise<TaskRunStatus[]>;
  /** The task's combined stdout/stderr so far. */
  logs(taskId: string): Promise<Readable>;
  /**
   * The task's output past `from`, about `maxBytes` of it (a Docker log line is never split, so a little more may
   * come): what a worker ships, so shipping costs what is new, never the whole output again.
   */
  readLogs(taskId: string, from: LogPosition, maxBytes: number): Promise<LogChunk>;
  /** The last `lines` lines of the task's output, read from its end (the reason a failed task gives). */
  logTail(taskId: string, lines: number): Promise<string>;
}
