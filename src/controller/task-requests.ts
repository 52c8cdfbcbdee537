import type { DesiredTask, TaskReport } from '../protocol/worker-protocol.js';
import { coStarts } from './co-start-records.js';
import { describeTask, type DescribeOptions } from './desired-task.js';
import type { TaskStartRequest, TaskStopRequest } from './seams.js';
import { isFinalJobState, PLACED_TASK_STATES } from './state/lifecycle.js';
import type { InstanceRecord, JobRecord, StateStore, TaskRecord } from './state-store.js';
import type { InstanceReports } from './worker-reports.js';

/**
 * The starts and stops the reconciler asked of workers in this process, and what the controller wants on an instance
 * from them and the store (placed tasks): the answer to its worker's heartbeat. Nothing here needs to survive a
 * controller restart: the reconciler repeats its pending starts and stops.
 */

/**
 * A start the reconciler asked for in this process: of the task on this instance, in this attempt of its job, for
 * this start intent. It stands while the intent is pending; a start that failed (a co-start re-plan, the job planned
 * again) or belongs to another placement or attempt does not make the worker prepare the task.
 */
interface StartRequest {
  readonly instanceId: string;
  readonly attempt: number;
  /** The pending start-task intent it carries out (undefined when there was none). */
  readonly intentId: number | undefined;
}

export interface StopRequest {
  readonly instanceId: string;
  checkpoint: boolean;
  /** Heartbeat sequence number whose answer carried this stop to the worker. */
  deliveredSeq?: number;
  /** The worker's word that its checkpoint at this stop was not uploaded is recorded (once per stop). */
  uploadFailureRecorded?: boolean;
}

export class TaskRequests {
  /** Task → the latest start asked for (kept once void: the worker's copy of the task belongs to that start). */
  private readonly startRequested = new Map<string, StartRequest>();
  private readonly stopping = new Map<string, StopRequest>();

  constructor(
    private readonly store: StateStore,
    /** Co-start multi-task jobs: their starts are prepared and held until the reconciler releases the job. */
    private readonly holdsStarts: boolean,
  ) {}

  /** The reconciler asks for a start: a stop of the task asked on another instance is over. */
  start(request: TaskStartRequest): void {
    const { task, job, instance } = request;
    this.startRequested.set(task.id, {
      instanceId: instance.id,
      attempt: job.attempts,
      intentId: request.intentId,
    });
    const stop = this.stopping.get(request.task.id);
    if (stop !== undefined && stop.instanceId !== request.instance.id) this.stopping.delete(request.task.id);
  }

  /** The reconciler asks for a stop: stopped once a heartbeat after the one that carried it no longer runs the task. */
  stop(request: TaskStopRequest, reports: InstanceReports | undefined): 'stopped' | 'pending' {
    const { task, instance } = request;
    let stop = this.stopping.get(task.id);
    if (stop === undefined || stop.instanceId !== instance.id) {
      stop = { instanceId: instance.id, checkpoint: request.checkpoint };
      this.stopping.set(task.id, stop);
    } else if (!request.checkpoint && stop.checkpoint) {
      stop.checkpoint = false; // a cancel overrides a move's checkpoint
      stop.deliveredSeq = undefined;
    }
    if (stop.deliveredSeq !== undefined && reports !== undefined && reports.seq > stop.deliveredSeq) {
      const report = reports.tasks.get(task.id);
      if (
        report === undefined ||
        report.state === 'stopped' ||
        report.state === 'succeeded' ||
        report.state === 'failed'
      ) {
        this.stopping.delete(task.id);
        this.startRequested.delete(task.id);
        return 'stopped';
      }
    }
    return 'pending';
  }

  /** The stop asked of the task, on whichever instance. */
  stopOf(taskId: string): StopRequest | undefined {
    return this.stopping.get(taskId);
  }

  /** The task's worker reported how its start ended: the start asked for is over. */
  startEnded(taskId: string): void {
    this.startRequested.delete(taskId);
  }

  /** The instance is lost: the stops asked there are over. */
  forgetInstance(instanceId: string): void {
    for (const [taskId, stop] of this.stopping)
      if (stop.instanceId === instanceId) this.stopping.delete(taskId);
  }

  /**
   * The reports the co-start records take: a task waiting to start here is ready only as prepared for a start the
   * controller wants now (`startWanted`), not for one that was called off (the task placed again before its siblings'
   * instances are up) nor for an earlier attempt.
   */
  startReports(inst: InstanceRecord, reports: readonly TaskReport[]): TaskReport[] {
    return reports.filter((report) => {
      const task = this.store.getTask(report.taskId);
      if (task?.state !== 'starting' || task.instanceId !== inst.id) return true;
      const job = this.store.getJob(task.jobId);
      return job !== undefined && this.startWanted(task, job, inst, report);
    });
  }

  /**
   * Whether a task `starting` on `inst` is to be run (or prepared and held) there: the reconciler asked for this start
   * (this placement, this attempt, its intent still pending), or, when this process never asked for a start of the
   * task (a controller restarted before its first pass repeats the pending starts), its worker already has it for
   * the job's current attempt.
   */
  private startWanted(
    task: TaskRecord,
    job: JobRecord,
    inst: InstanceRecord,
    report: TaskReport | undefined,
  ): boolean {
    const asked = this.startRequested.get(task.id);
    if (asked !== undefined)
      return (
        asked.instanceId === inst.id &&
        asked.attempt === job.attempts &&
        (asked.intentId === undefined || this.store.getIntent(asked.intentId)?.state === 'pending')
      );
    return (
      report !== undefined &&
      (report.attempt ?? 1) === job.attempts &&
      (report.state === 'starting' || report.state === 'ready' || report.state === 'running')
    );
  }

  /** What the controller wants on an instance now. */
  desiredOn(
    inst: InstanceRecord,
    reported: ReadonlyMap<string, TaskReport> | undefined,
    describe: DescribeOptions,
  ): DesiredTask[] {
    const ids = new Set<string>();
    for (const t of this.store.listTasks({ instanceId: inst.id }))
      if (PLACED_TASK_STATES.includes(t.state)) ids.add(t.id);
    for (const [taskId, stop] of this.stopping) if (stop.instanceId === inst.id) ids.add(taskId);
    const out: DesiredTask[] = [];
    for (const taskId of ids) {
      const task = this.store.getTask(taskId);
      const job = task === undefined ? undefined : this.store.getJob(task.jobId);
      if (task === undefined || job === undefined) continue;
      const stop = this.stopping.get(taskId);
      let action: DesiredTask['action'] | undefined;
      let hold = false;
      if (stop !== undefined && stop.instanceId === inst.id)
        action = stop.checkpoint ? 'checkpoint-stop' : 'stop';
      else if (task.instanceId !== inst.id) continue;
      else if (isFinalJobState(job.state)) action = 'stop';
      else if (task.state === 'checkpointing') action = 'checkpoint-stop';
      else if (task.state === 'running') action = 'run';
      else if (task.state === 'starting' && this.startWanted(task, job, inst, reported?.get(taskId))) {
        action = 'run';
        // Co-start: prepared and held until the reconciler releases the job (its tasks turn `running`).
        hold = coStarts(job, this.holdsStarts);
      }
      if (action === undefined) continue;
      const desired = describeTask(task, job, inst, action, describe);
      out.push(hold ? { ...desired, hold: true } : desired);
    }
    return out;
  }

  /** The stops among `desired` that reach the worker for the first time go in the answer to heartbeat `seq`. */
  delivered(inst: InstanceRecord, desired: readonly DesiredTask[], seq: number): void {
    for (const d of desired) {
      const stop = this.stopping.get(d.taskId);
      if (
        d.action !== 'run' &&
        stop !== undefined &&
        stop.instanceId === inst.id &&
        stop.deliveredSeq === undefined
      )
        stop.deliveredSeq = seq;
    }
  }
}
