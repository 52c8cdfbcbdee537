import type { InstanceRecord, JobRecord, TaskRecord } from './state-store.js';

/**
 * The seams between the controller and what runs tasks: how the reconciler starts and stops tasks on instances and
 * reads their status (worker-executor.ts over the worker protocol, the simulator's workers, or a cloud-only stand-in),
 * and where it logs.
 */

export type TaskStatus = 'starting' | 'running' | 'succeeded' | 'failed' | 'stopped' | 'unknown';

export interface TaskStartRequest {
  readonly task: TaskRecord;
  readonly job: JobRecord;
  readonly instance: InstanceRecord;
}

export interface TaskStopRequest {
  readonly task: TaskRecord;
  readonly instance: InstanceRecord;
  /** Checkpoint before stopping (a move or an eviction to the queue); false for a cancel. */
  readonly checkpoint: boolean;
}

/**
 * Runs tasks on instances (through the worker agents). Calls must be idempotent: after a crash the
 * controller repeats a start or stop whose outcome it did not record.
 */
export interface TaskExecutor {
  readonly name: string;
  /**
   * Whether the instance's worker has registered. Executors without workers leave it out: an instance is then ready
   * as soon as the cloud reports it running, and no registration timeout applies.
   */
  workerRegistered?(instance: InstanceRecord): boolean;
  start(request: TaskStartRequest): Promise<void>;
  /** `stopped`: the task is gone from the instance (checkpointed if asked); `pending`: still checkpointing. */
  stop(request: TaskStopRequest): Promise<'stopped' | 'pending'>;
  status(task: TaskRecord, instance: InstanceRecord): Promise<TaskStatus>;
  /** Why a task the executor reported `failed` failed (exit code, last output), for the job's reason. */
  failureReason?(task: TaskRecord): string | undefined;
  /** The exit code of a task the executor reported `failed`, if known (`unsuccessfulExitCodes`). */
  exitCode?(task: TaskRecord): number | undefined;
}

/**
 * Without workers (dry runs, cloud-only tests): a task "runs" as soon as its instance runs in EC2 and the plan put it
 * there. Nothing ever finishes by itself; a cancel ends a job.
 */
export class CloudOnlyExecutor implements TaskExecutor {
  readonly name = 'cloud-only';
  async start(): Promise<void> {}
  async stop(): Promise<'stopped'> {
    return 'stopped';
  }
  async status(): Promise<TaskStatus> {
    return 'running';
  }
}

export interface ControllerLogger {
  info(message: string, data?: Record<string, unknown>): void;
  warn(message: string, data?: Record<string, unknown>): void;
  error(message: string, data?: Record<string, unknown>): void;
}

export const silentLogger: ControllerLogger = { info() {}, warn() {}, error() {} };
