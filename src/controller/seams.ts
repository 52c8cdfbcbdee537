import type { HostFaultKind } from '../protocol/worker-protocol.js';
import type { InstanceRecord, JobRecord, TaskRecord } from './state-store.js';

/**
 * The seams between the controller and what runs tasks: how the reconciler starts and stops tasks on instances and
 * reads their status (TaskControl: worker-task-control.ts over the worker protocol, the simulator's workers, or a
 * cloud-only stand-in), and where it logs.
 */

export type TaskStatus = 'starting' | 'running' | 'succeeded' | 'failed' | 'stopped' | 'unknown';

export interface TaskStartRequest {
  readonly task: TaskRecord;
  readonly job: JobRecord;
  readonly instance: InstanceRecord;
  /** The pending start-task intent this start carries out (the reconciler's; a start it called off stands no more). */
  readonly intentId?: number | undefined;
}

export interface TaskStopRequest {
  readonly task: TaskRecord;
  readonly instance: InstanceRecord;
  /** Checkpoint before stopping (a move or an eviction to the queue); false for a cancel. */
  readonly checkpoint: boolean;
}

/**
 * How the reconciler controls tasks on instances: asks for starts and stops and reads task status. The tasks
 * themselves run on the workers (their Executor, src/worker/executor.ts). Calls must be idempotent: after a crash the
 * controller repeats a start or stop whose outcome it did not record.
 */
export interface TaskControl {
  readonly name: string;
  /**
   * Whether the instance's worker has registered. Task controls without workers leave it out: an instance is then ready
   * as soon as the cloud reports it running, and no registration timeout applies.
   */
  workerRegistered?(instance: InstanceRecord): boolean;
  /**
   * Starts of multi-task jobs are held (co-start, round/co-start.ts): a start prepares its task and holds it; the task
   * control records in the store's co-start records (co-start-records.ts) which tasks are prepared, and runs a held
   * task once its state is `running` (the reconciler's release). Absent or false: every start runs at once.
   */
  readonly holdsStarts?: boolean;
  start(request: TaskStartRequest): Promise<void>;
  /** `stopped`: the task is gone from the instance (checkpointed if asked); `pending`: still checkpointing. */
  stop(request: TaskStopRequest): Promise<'stopped' | 'pending'>;
  status(task: TaskRecord, instance: InstanceRecord): Promise<TaskStatus>;
  /** Why a task reported `failed` failed (exit code, last output), for the job's reason. */
  failureReason?(task: TaskRecord): string | undefined;
  /** The exit code of a task reported `failed`, if known (`unsuccessfulExitCodes`). */
  exitCode?(task: TaskRecord): number | undefined;
  /**
   * When a task reported `succeeded` or `failed` exited (epoch seconds, this controller's clock: when the report was
   * heard, less the exit's age its worker gave), if its worker said: an exit heard late (the controller was down) ends
   * the task, its job or its attempt then, not when it was heard.
   */
  exitedAtSeconds?(task: TaskRecord): number | undefined;
  /**
   * How a task reported `failed` was kept from starting by its instance's host, not its job (a worker's full disk, a
   * container engine down): its job is placed again elsewhere without using an attempt, and a `broken` instance is
   * drained (reconcile/effects/host-faults.ts). Undefined, or absent: every failure is the job's.
   */
  hostFault?(task: TaskRecord): HostFaultKind | undefined;
}

/**
 * Without workers (dry runs, cloud-only tests): a task "runs" as soon as its instance runs in EC2 and the plan put it
 * there. Nothing ever finishes by itself; a cancel ends a job.
 */
export class CloudOnlyTaskControl implements TaskControl {
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
