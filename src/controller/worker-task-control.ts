import type { Attention } from './attention-clock.js';
import type { Catalog } from '../core/catalog.js';
import type { MeasuredRtt } from '../core/network.js';
import type { ThroughputObservation } from '../scheduler/types.js';
import type {
  HeartbeatRequest,
  HeartbeatResponse,
  RegisterRequest,
  RegisterResponse,
  TaskReport,
  HostFaultKind,
} from '../protocol/worker-protocol.js';
import type { ContextLimits } from '../protocol/context-limits.js';
import { CheckpointFailures } from './checkpoint-failures.js';
import type { Clock } from './clock.js';
import { recordStartReports, type StartMeasure } from './co-start-reports.js';
import { JobProgress } from './job-progress.js';
import type { LatencyMatrixView } from './latency-matrix.js';
import { OutsideStopRecords } from './outside-stop-records.js';
import { exitedAgo } from './reconcile/effects/task-exit-times.js';
import {
  silentLogger,
  type ControllerLogger,
  type TaskControl,
  type TaskStartRequest,
  type TaskStatus,
  type TaskStopRequest,
} from './seams.js';
import type { InstanceRecord, StateStore, TaskRecord } from './state-store.js';
import { TaskRequests } from './task-requests.js';
import { ThroughputObservations } from './throughput-observations.js';
import type { WorkerRegistrar } from './worker-identity/worker-registrar.js';
import { WorkerProtocolError } from './worker-identity/worker-protocol-error.js';
import { WorkerLatency } from './worker-latency.js';
import type { InterruptionHandler } from './worker-liveness.js';
import { HeartbeatOrder, isOlderCheckpoint, isStaleReport, type InstanceReports } from './worker-reports.js';
import { WorkerSilenceWatch } from './worker-silence-watch.js';

/**
 * The controller's TaskControl over the worker protocol (src/protocol/worker-protocol.ts). Level-triggered: a
 * heartbeat carries what a worker has, and its answer is what the controller wants on that instance, derived from the
 * store (placed tasks) plus the starts and stops the reconciler asked for in this process (task-requests.ts). Nothing
 * here needs to survive a controller restart: the reconciler repeats its pending starts and stops, and workers
 * heartbeat again.
 *
 * What a heartbeat reports goes to the store and to the parts that judge it: job progress (job-progress.ts),
 * throughputs (throughput-observations.ts), round trips (worker-latency.ts), checkpoints not uploaded
 * (checkpoint-failures.ts) and stops from outside (outside-stops.ts); silence is watched by worker-silence-watch.ts.
 */

export { WorkerProtocolError };
export type { StartMeasure };

export interface WorkerTaskControlOptions {
  readonly store: StateStore;
  /**
   * What a start report's holds at the co-start barrier are priced at. A function is read at each report: the
   * controller's current catalog, so holds after a price refresh cost the refreshed prices, as the plan counts them.
   */
  readonly catalog: Catalog | (() => Catalog);
  readonly clock: Clock;
  /** Who may register as which instance (worker-identity/worker-registrar.ts). */
  readonly registrar: WorkerRegistrar;
  /** Where workers put checkpoints and logs (the controller's object store location). */
  readonly objectStoreLocation: string;
  readonly heartbeatSeconds: number;
  /** A registered worker silent for this long is lost: its instance is replaced, its tasks rescheduled. */
  readonly heartbeatTimeoutSeconds: number;
  /**
   * The clock silence is measured on (attention-clock.ts: a stall of the controller's own loop does not count
   * against its workers). Default: `clock`.
   */
  readonly attention?: Attention;
  /** The build context limits of a team's jobs, checked again by workers as they unpack (default: the defaults). */
  readonly contextLimits?: (team: string) => ContextLimits;
  /** Capacity scale per instance type (local mode on a small host); task limits are scaled alike. Default 1. */
  readonly capacityScale?: (typeName: string) => number;
  /** False: instances have no GPU devices, and tasks are given none (local mode; desired-task.ts). Default true. */
  readonly gpuDevices?: boolean;

  /** Round trips older than this are neither shown nor planned with (default latency-matrix.ts's). */
  readonly latencyStaleSeconds?: number;
  readonly logger?: ControllerLogger;
  /**
   * Co-start multi-task jobs (round/co-start.ts): their starts are prepared and held until the reconciler releases the
   * job, all its tasks ready. Default off.
   */
  readonly coStart?: boolean;
  /** A multi-task job's start skew and barrier-idle cost, once all its tasks were heard running (metrics). */
  readonly onStartMeasured?: (jobId: string, measured: StartMeasure) => void;
}

/** Where a heartbeat came from (the HTTP connection), for a probe whose worker did not name its address. */
export interface HeartbeatOrigin {
  readonly remoteAddress?: string | undefined;
}

export class WorkerTaskControl implements TaskControl {
  readonly name = 'worker';
  readonly holdsStarts: boolean;
  private readonly store: StateStore;
  private readonly log: ControllerLogger;
  private readonly reports = new Map<string, InstanceReports>();
  private readonly requests: TaskRequests;
  private readonly failures = new Map<string, string>();
  /** Exit codes of failed tasks (a job's `unsuccessfulExitCodes` turn a failure into "unsuccessful"). */
  private readonly exitCodes = new Map<string, number>();
  /**
   * When ended tasks exited, on this controller's clock: when their workers' reports were heard, less the age each
   * gave (TaskReport.exitedSecondsAgo).
   */
  private readonly exitTimes = new Map<string, number>();
  /** Failed tasks whose worker said its host, not the job, kept them from starting (a full disk). */
  private readonly hostFaults = new Map<string, HostFaultKind>();
  private readonly checkpointFailures: CheckpointFailures;
  private readonly outsideStops: OutsideStopRecords;
  private readonly progress: JobProgress;
  private readonly throughputs: ThroughputObservations;
  private readonly latency: WorkerLatency;
  private readonly silence: WorkerSilenceWatch;
  /** Which heartbeats are late (worker-reports.ts): what they report is older than what was taken. */
  private readonly order = new HeartbeatOrder();
  private seq = 0;
  private interruptionHandler: InterruptionHandler | undefined;

  constructor(private readonly options: WorkerTaskControlOptions) {
    this.store = options.store;
    this.holdsStarts = options.coStart === true;
    this.log = options.logger ?? silentLogger;
    this.requests = new TaskRequests(this.store, this.holdsStarts);
    this.checkpointFailures = new CheckpointFailures(this.store, this.log);
    this.outsideStops = new OutsideStopRecords(this.store, this.log);
    this.progress = new JobProgress(this.store, options.clock, (task) =>
      task.instanceId === undefined ? undefined : this.reports.get(task.instanceId)?.tasks.get(task.id),
    );
    this.throughputs = new ThroughputObservations(this.store);
    this.latency = new WorkerLatency(this.store, options.latencyStaleSeconds, this.log);
    this.silence = new WorkerSilenceWatch(
      this.store,
      options.attention ?? { seconds: () => options.clock.nowSeconds() },
      options.heartbeatSeconds,
      options.heartbeatTimeoutSeconds,
      this.log,
    );
  }

  // ---------------------------------------------------------------------------------------------------------------
  // Protocol

  /**
   * A worker proves which instance it runs on (the registrar's rules: a launch credential once per instance, then its
   * per-instance token) and gets the token it heartbeats with.
   */
  async register(credential: string, request: RegisterRequest): Promise<RegisterResponse> {
    const { instance, workerToken, how } = await this.options.registrar.register(credential, request);
    this.silence.registered(instance.id);
    this.log.info(`worker ${how === 'launch' ? 'registered' : 're-registered'} for ${instance.id}`, {
      cloudId: request.instanceId,
      executor: request.executor,
      identity: request.identity?.kind,
    });
    return {
      instanceId: instance.id,
      workerToken,
      heartbeatSeconds: this.options.heartbeatSeconds,
      objectStore: this.options.objectStoreLocation,
    };
  }

  heartbeat(
    instanceToken: string,
    request: HeartbeatRequest,
    origin: HeartbeatOrigin = {},
  ): HeartbeatResponse {
    const inst = this.store.instanceForWorkerToken(instanceToken);
    if (inst === undefined) throw new WorkerProtocolError(401, 'unknown worker token: register again');
    if (inst.state === 'terminated' || inst.state === 'terminating')
      throw new WorkerProtocolError(410, `instance ${inst.id} is ${inst.state}`);
    const now = this.options.clock.nowSeconds();
    this.seq += 1;
    const seq = this.seq;
    this.silence.heard(inst.id);
    // A late heartbeat (an older one of the same worker, arriving after a newer one) is answered as any, and what it
    // reports is left out: it would set progress and the last checkpoint back to what they were.
    const current = this.order.take(inst.id, request.bootId, request.seq);
    if (current) this.take(inst, request, origin, seq, now);
    const desired = this.requests.desiredOn(inst, this.reports.get(inst.id)?.tasks, {
      ...this.options,
      catalog: this.catalog(),
    });
    // The worker gave up waiting for a late heartbeat's answer: a stop in it has not reached the worker.
    if (current) this.requests.delivered(inst, desired, seq);
    // Only a worker that probes is told its peers (an older worker would not know the field).
    return request.network?.probe === undefined
      ? { tasks: desired }
      : { tasks: desired, peers: this.latency.peersOf(inst) };
  }

  /** What a heartbeat that is not late reports: task states, checkpoints, progress, starts, round trips, notices. */
  private take(
    inst: InstanceRecord,
    request: HeartbeatRequest,
    origin: HeartbeatOrigin,
    seq: number,
    now: number,
  ): void {
    this.reports.set(inst.id, {
      seq,
      atSeconds: now,
      tasks: new Map(request.tasks.map((t) => [t.taskId, t])),
    });
    const measuredStarts = this.store.transaction(() => {
      this.applyReports(inst, request.tasks, now);
      return recordStartReports(
        this.store,
        this.catalog(),
        inst,
        this.requests.startReports(inst, request.tasks),
        now,
        this.options.heartbeatSeconds,
      );
    });
    // Once committed: a start is measured once in the store, and so counted once.
    for (const { jobId, measured } of measuredStarts) this.options.onStartMeasured?.(jobId, measured);
    if (request.network !== undefined)
      this.latency.observe(inst.id, request.network, origin.remoteAddress, now);
    // Before the answer: an interrupted instance is drained at once, so this very answer already reflects it.
    if (request.interruption !== undefined) this.interruptionHandler?.(inst.id, request.interruption);
  }

  /** Spot interruption notices and rebalance recommendations that workers report go to `handler` (the controller). */
  onInterruption(handler: InterruptionHandler): void {
    this.interruptionHandler = handler;
  }

  /** The fresh measured round trips for a round's snapshot, saved in the store (worker-latency.ts). */
  roundRtts(): MeasuredRtt[] {
    return this.latency.roundRtts(this.options.clock.nowSeconds());
  }

  /** The matrix as shown by the API, `fleetwise cluster` and Prometheus. */
  latencyView(): LatencyMatrixView {
    return this.latency.view(this.options.clock.nowSeconds());
  }

  /** Checkpoints, progress, failures and throughputs from one heartbeat. */
  private applyReports(inst: InstanceRecord, reports: readonly TaskReport[], now: number): void {
    const touchedJobs = new Set<string>();
    const throughputs = new Map<string, number>();
    for (const report of reports) {
      const task = this.store.getTask(report.taskId);
      if (task === undefined) continue;
      const stop = this.requests.stopOf(task.id);
      const here = task.instanceId === inst.id || stop?.instanceId === inst.id;
      if (!here) continue;
      if (
        report.checkpoint !== undefined &&
        report.checkpoint.key !== task.lastCheckpointKey &&
        // Never back to an older one (a late report, a worker the controller replaced): the task resumes from it.
        !isOlderCheckpoint(task, report.checkpoint)
      ) {
        this.store.recordCheckpoint(task.id, report.checkpoint.key, report.checkpoint.atSeconds, inst.id);
      }
      let toldByStop = false;
      if (
        report.state === 'stopped' &&
        report.reason !== undefined &&
        stop?.instanceId === inst.id &&
        stop.checkpoint &&
        stop.deliveredSeq !== undefined &&
        stop.uploadFailureRecorded !== true
      ) {
        // The move goes on (the task resumes from its last uploaded checkpoint), but the work since then is lost:
        // the job's owner hears why (a file the archive refuses recurs at every checkpoint).
        stop.uploadFailureRecorded = true;
        toldByStop = true;
        this.checkpointFailures.notUploadedAtMove(task, inst, report.reason);
      }
      this.checkpointFailures.noteError(task, inst, report.checkpointError, toldByStop);
      this.outsideStops.note(task, inst, report);
      if (report.state === 'failed' && !this.failures.has(task.id) && !this.isStale(report, task)) {
        this.failures.set(task.id, report.reason ?? `exit code ${report.exitCode ?? 'unknown'}`);
        if (report.exitCode !== undefined) this.exitCodes.set(task.id, report.exitCode);
        if (report.hostFault !== undefined) this.hostFaults.set(task.id, report.hostFault);
      }
      if (
        (report.state === 'failed' || report.state === 'succeeded') &&
        report.exitedSecondsAgo !== undefined &&
        !this.exitTimes.has(task.id) &&
        !this.isStale(report, task)
      )
        this.exitTimes.set(task.id, exitedAgo(report.exitedSecondsAgo, now));
      if (report.completedIterations !== undefined) {
        this.progress.reported(task.id, report.completedIterations);
        touchedJobs.add(task.jobId);
      }
      if (report.state === 'running' && task.state === 'running' && report.throughputPerSecond !== undefined)
        throughputs.set(task.id, report.throughputPerSecond);
    }
    this.progress.update(touchedJobs);
    this.throughputs.observe(inst, throughputs);
  }

  /** Store the job progress heartbeats reported since the last call (job-progress.ts; the loop calls it each pass). */
  flushProgress(): void {
    this.progress.flush();
  }

  /** Normalized throughputs observed since the last call (one per running task), for Scheduler.observe. */
  takeObservations(): ThroughputObservation[] {
    return this.throughputs.take();
  }

  /** The catalog now (WorkerTaskControlOptions.catalog). */
  private catalog(): Catalog {
    const catalog = this.options.catalog;
    return typeof catalog === 'function' ? catalog() : catalog;
  }

  // ---------------------------------------------------------------------------------------------------------------
  // TaskControl

  workerRegistered(instance: InstanceRecord): boolean {
    return instance.workerTokenHash !== undefined && !this.silence.isLost(instance.id);
  }

  start(request: TaskStartRequest): Promise<void> {
    this.requests.start(request);
    this.failures.delete(request.task.id);
    this.exitCodes.delete(request.task.id);
    this.exitTimes.delete(request.task.id);
    this.hostFaults.delete(request.task.id);
    return Promise.resolve();
  }

  stop(request: TaskStopRequest): Promise<'stopped' | 'pending'> {
    return Promise.resolve(this.requests.stop(request, this.reports.get(request.instance.id)));
  }

  /** A report of an earlier attempt of the task's job (worker-reports.ts). */
  private isStale(report: TaskReport, task: TaskRecord): boolean {
    return isStaleReport(this.store, report, task);
  }

  status(task: TaskRecord, instance: InstanceRecord): Promise<TaskStatus> {
    const report = this.reports.get(instance.id)?.tasks.get(task.id);
    if (report !== undefined && this.isStale(report, task)) return Promise.resolve('unknown');
    if (report?.state === 'succeeded' || report?.state === 'failed') {
      this.requests.startEnded(task.id);
      return Promise.resolve(report.state);
    }
    if (report === undefined) return Promise.resolve('unknown');
    // Still being prepared (image, checkpoint) or held for its job's release: not running yet, so its job is not
    // prepared (snapshot.ts JOB_PREPARED_EVENT) and stays pinned, as the simulator's engine pins it.
    if (report.state === 'starting' || report.state === 'ready') return Promise.resolve('starting');
    return Promise.resolve('running');
  }

  failureReason(task: TaskRecord): string | undefined {
    return this.failures.get(task.id);
  }

  exitCode(task: TaskRecord): number | undefined {
    return this.exitCodes.get(task.id);
  }

  exitedAtSeconds(task: TaskRecord): number | undefined {
    return this.exitTimes.get(task.id);
  }

  hostFault(task: TaskRecord): HostFaultKind | undefined {
    return this.hostFaults.get(task.id);
  }

  /** The worker protocol is served from now on (the API listens): silence counts from here (worker-silence-watch.ts). */
  serving(): void {
    this.silence.serving();
  }

  /** Stop saving the workers' silence (the controller stops). */
  close(): void {
    this.silence.close();
  }

  /** Save each registered worker's silence so far, for a controller that starts after this one. */
  carrySilence(): void {
    this.silence.carrySilence();
  }

  /** Registered workers silent for too long; the caller replaces their instances. */
  staleInstances(): InstanceRecord[] {
    return this.silence.staleInstances();
  }

  /** The caller replaced the instance: forget its worker. */
  markLost(instanceId: string): void {
    this.silence.markLost(instanceId);
    this.reports.delete(instanceId);
    this.order.forget(instanceId);
    this.latency.forget(instanceId);
    this.requests.forgetInstance(instanceId);
  }

  /** Seconds since the instance's worker was last heard (undefined: never, in this process). */
  secondsSinceHeartbeat(instanceId: string): number | undefined {
    return this.silence.secondsSince(instanceId);
  }
}
