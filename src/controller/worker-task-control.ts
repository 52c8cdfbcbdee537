import { z } from 'zod';
import type { Attention } from './attention-clock.js';
import { CarriedSilence, CARRY_SILENCE_EVERY_SECONDS } from './carried-silence.js';
import { WorkerSilence } from './worker-silence.js';
import type { Catalog } from '../core/catalog.js';
import type { MeasuredRtt } from '../core/network.js';
import { networkAwareness } from '../scheduler/latency-view.js';
import type { ThroughputObservation } from '../scheduler/types.js';
import type {
  DesiredTask,
  HeartbeatRequest,
  HeartbeatResponse,
  ProbePeer,
  RegisterRequest,
  RegisterResponse,
  TaskReport,
  HostFaultKind,
} from '../protocol/worker-protocol.js';
import type { ContextLimits } from '../protocol/context-limits.js';
import type { Clock } from './clock.js';
import { coStarts } from './co-start-records.js';
import { recordStartReports, type StartMeasure } from './co-start-reports.js';
import { describeTask } from './desired-task.js';
import { addJobWarning, removeJobWarning } from './execution-check.js';
import { LatencyMatrix, type LatencyMatrixView } from './latency-matrix.js';
import {
  silentLogger,
  type ControllerLogger,
  type TaskControl,
  type TaskStartRequest,
  type TaskStatus,
  type TaskStopRequest,
} from './seams.js';
import { isFinalJobState, PLACED_TASK_STATES } from './state/lifecycle.js';
import type { InstanceRecord, JobRecord, JsonValue, StateStore, TaskRecord } from './state-store.js';
import type { WorkerRegistrar } from './worker-identity/worker-registrar.js';
import { WorkerProtocolError } from './worker-identity/worker-protocol-error.js';
import type { InterruptionHandler } from './worker-liveness.js';

/**
 * The controller's TaskControl over the worker protocol (src/protocol/worker-protocol.ts). Level-triggered: a
 * heartbeat carries what a worker has, and its answer is what the controller wants on that instance, derived from the
 * store (placed tasks) plus the starts and stops the reconciler asked for in this process. Nothing here needs to
 * survive a controller restart: the reconciler repeats its pending starts and stops, and workers heartbeat again.
 *
 * Throughput (Eva §4.3, digest "co-location table"): workers report iterations per second; a task's standalone
 * throughput is the best it showed alone on an instance (kept in the store per workload key); observed / standalone
 * is its normalized throughput, and a job's is its slowest task's (Eva §4.4: a gang runs at its slowest member's pace).
 *
 * Round trips (latency-matrix.ts): a worker with a latency probe says where it listens and what it measured; the
 * answer names its peers, the other instances running tasks of its jobs.
 */

export const STANDALONE_THROUGHPUT_KEY = 'worker.standaloneThroughput';
/** The latest latency matrix, saved once per round (round trips are re-measured within a minute anyway). */
export const LATENCY_MATRIX_KEY = 'network.latencyMatrix';

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

interface InstanceReports {
  readonly seq: number;
  readonly atSeconds: number;
  readonly tasks: ReadonlyMap<string, TaskReport>;
}

/** The job view's warning when a move's checkpoint did not reach the store (the newest one is kept). */
const CHECKPOINT_NOT_UPLOADED = 'checkpoint not uploaded at a move:';
/** The job view's warning when a running task's checkpoints cannot be uploaded (TaskReport.checkpointError). */
const CHECKPOINT_NOT_PACKED = 'checkpoint not uploaded while running:';

/**
 * The event of a stop from outside a worker (a host shutdown, `docker stop`, a signal not from the worker) that the
 * worker resumed its task from (TaskReport.outsideStops): one per such restart, shown as a restart in the job's view.
 */
export const TASK_STOPPED_OUTSIDE_EVENT = 'task.stopped-outside';

/** What a TASK_STOPPED_OUTSIDE_EVENT records: the task's attempt, and which of its stops there it was (1, 2, …). */
const stoppedOutsideData = z.object({
  attempt: z.number().int().positive(),
  count: z.number().int().positive(),
});

/**
 * New stops from outside recorded from one report at most. A worker reports each stop before it resumes the task
 * (it waits for the controller's answer), so more than one in a report is heartbeats lost meanwhile; and a worker
 * lets one attempt of a task have 10 (src/worker/outside-stops.ts), so more than that is no count worth an event each.
 */
const MAX_OUTSIDE_STOPS_PER_REPORT = 10;

/**
 * How long a running task that has written no progress while a sibling did counts as having done 0 of its job's
 * iterations (a slow first line: a restore, a warm-up) before it is taken for one that writes none (a gang's
 * coordinator) and left out of its job's progress: counted as nothing meanwhile, a gang's progress would jump to its
 * fastest task's count and fall back when the slower one reports its first line.
 */
export const SILENT_TASK_GRACE_SECONDS = 120;

/** What a `task.state` event records of the change (state/lifecycle.ts transitionTask): the state it went to. */
const taskStateData = z.object({ to: z.string() });

/** The stops from outside last recorded for a task: those of one attempt of it on one instance. */
interface OutsideStops {
  readonly instanceId: string;
  readonly attempt: number;
  readonly count: number;
}

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

interface StopRequest {
  readonly instanceId: string;
  checkpoint: boolean;
  /** Heartbeat sequence number whose answer carried this stop to the worker. */
  deliveredSeq?: number;
  /** The worker's word that its checkpoint at this stop was not uploaded is recorded (once per stop). */
  uploadFailureRecorded?: boolean;
}

export class WorkerTaskControl implements TaskControl {
  readonly name = 'worker';
  readonly holdsStarts: boolean;
  private readonly store: StateStore;
  private readonly log: ControllerLogger;
  private readonly reports = new Map<string, InstanceReports>();
  /** Task → the latest start asked for (kept once void: the worker's copy of the task belongs to that start). */
  private readonly startRequested = new Map<string, StartRequest>();
  private readonly stopping = new Map<string, StopRequest>();
  private readonly failures = new Map<string, string>();
  /** Exit codes of failed tasks (a job's `unsuccessfulExitCodes` turn a failure into "unsuccessful"). */
  private readonly exitCodes = new Map<string, number>();
  /** Failed tasks whose worker said its host, not the job, kept them from starting (a full disk). */
  private readonly hostFaults = new Map<string, HostFaultKind>();
  /** Task → the checkpoint error its worker reports, told to the job's owner once (TaskReport.checkpointError). */
  private readonly checkpointErrors = new Map<string, string>();
  /** Tasks whose reports said no checkpoint error, and whose job view holds no such warning of theirs. */
  private readonly checkpointsClean = new Set<string>();
  /** Task → its stops from outside recorded so far (TASK_STOPPED_OUTSIDE_EVENT). */
  private readonly outsideStops = new Map<string, OutsideStops>();
  private readonly completed = new Map<string, number>();
  /**
   * Tasks taken for ones that write no progress (a gang's coordinator): silent past SILENT_TASK_GRACE_SECONDS of
   * running while a sibling reported. Left out of their job's progress from then on, moves included.
   */
  private readonly silentTasks = new Set<string>();
  /** Job → iterations done, reported since the last `flushProgress`. */
  private readonly progress = new Map<string, number>();
  private readonly observations = new Map<string, number>();
  private readonly latency: LatencyMatrix;
  private readonly silence: WorkerSilence;
  private readonly carried: CarriedSilence;
  private carryTimer: ReturnType<typeof setInterval> | undefined;
  private carryFailure: string | undefined;
  private seq = 0;
  private interruptionHandler: InterruptionHandler | undefined;

  constructor(private readonly options: WorkerTaskControlOptions) {
    this.store = options.store;
    this.holdsStarts = options.coStart === true;
    this.log = options.logger ?? silentLogger;
    this.latency = new LatencyMatrix(options.latencyStaleSeconds, this.log);
    // A worker heard at its interval is never silent for two of them (a late beat is not silence worth saving).
    this.carried = new CarriedSilence(this.store, 2 * options.heartbeatSeconds);
    this.silence = new WorkerSilence(
      options.attention ?? { seconds: () => options.clock.nowSeconds() },
      options.heartbeatTimeoutSeconds,
      this.carried.loaded,
    );
    this.latency.load(this.store.getValue(LATENCY_MATRIX_KEY));
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
    this.reports.set(inst.id, {
      seq,
      atSeconds: now,
      tasks: new Map(request.tasks.map((t) => [t.taskId, t])),
    });
    const measuredStarts = this.store.transaction(() => {
      this.applyReports(inst, request.tasks);
      return recordStartReports(
        this.store,
        this.catalog(),
        inst,
        this.startReports(inst, request.tasks),
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
    const desired = this.desiredFor(inst);
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
    // Only a worker that probes is told its peers (an older worker would not know the field).
    return request.network?.probe === undefined
      ? { tasks: desired }
      : { tasks: desired, peers: this.peersOf(inst) };
  }

  /** Spot interruption notices and rebalance recommendations that workers report go to `handler` (the controller). */
  onInterruption(handler: InterruptionHandler): void {
    this.interruptionHandler = handler;
  }

  /**
   * The other instances running tasks of the network-aware jobs (the scheduler's own test, latency-view.ts networkAwareness)
   * that have tasks on this one, whose probes are known; round trips of other jobs are planned with by nobody. The
   * latency-sensitive jobs' peers come first, then those of jobs that only declare traffic, each by submission: an
   * answer names at most the protocol's limit, and what falls beyond it stays the same from one answer to the next.
   */
  private peersOf(inst: InstanceRecord): ProbePeer[] {
    const jobIds = new Set(
      this.store
        .listTasks({ instanceId: inst.id })
        .filter((t) => PLACED_TASK_STATES.includes(t.state))
        .map((t) => t.jobId),
    );
    const jobs: { job: JobRecord; tasks: TaskRecord[] }[] = [];
    for (const jobId of jobIds) {
      const job = this.store.getJob(jobId);
      if (job !== undefined) jobs.push({ job, tasks: this.store.listTasks({ jobId }) });
    }
    const aware = new Map(
      jobs.flatMap(({ job, tasks }) => {
        const awareness = networkAwareness(job.spec.network, tasks.length);
        return awareness === undefined ? [] : [[job.id, awareness] as const];
      }),
    );
    const peers: string[] = [];
    for (const { tasks } of jobs
      .filter(({ job }) => aware.has(job.id))
      .sort(
        (a, b) =>
          Number(aware.get(b.job.id)?.sensitive) - Number(aware.get(a.job.id)?.sensitive) ||
          a.job.submittedAtSeconds - b.job.submittedAtSeconds ||
          a.job.id.localeCompare(b.job.id, 'en', { numeric: true }),
      ))
      peers.push(
        ...tasks
          .flatMap((t) =>
            PLACED_TASK_STATES.includes(t.state) && t.instanceId !== undefined && t.instanceId !== inst.id
              ? [t.instanceId]
              : [],
          )
          .sort(),
      );
    return this.latency.probePeers(inst.id, peers);
  }

  /** Instances that may still answer probes: pairs to any other are history. */
  private liveInstanceIds(): Set<string> {
    return new Set(
      this.store.listInstances({ states: ['launching', 'running', 'draining'] }).map((i) => i.id),
    );
  }

  /**
   * The fresh measured round trips for a round's snapshot; saved in the store at the same time (once per round), so a
   * restarted controller plans with them until its workers report again.
   */
  roundRtts(): MeasuredRtt[] {
    // Read first: reading drops the pairs of instances gone, so the saved matrix holds only live ones.
    const rtts = this.latency.measuredRtts(this.options.clock.nowSeconds(), this.liveInstanceIds());
    this.store.setValue(LATENCY_MATRIX_KEY, this.latency.toJson());
    return rtts;
  }

  /** The matrix as shown by the API, `fleetwise cluster` and Prometheus. */
  latencyView(): LatencyMatrixView {
    return this.latency.view(this.options.clock.nowSeconds(), this.liveInstanceIds());
  }

  /** Checkpoints, progress, failures and throughputs from one heartbeat. */
  private applyReports(inst: InstanceRecord, reports: readonly TaskReport[]): void {
    const touchedJobs = new Set<string>();
    const throughputs = new Map<string, number>();
    for (const report of reports) {
      const task = this.store.getTask(report.taskId);
      if (task === undefined) continue;
      const here = task.instanceId === inst.id || this.stopping.get(task.id)?.instanceId === inst.id;
      if (!here) continue;
      if (report.checkpoint !== undefined && report.checkpoint.key !== task.lastCheckpointKey) {
        this.store.recordCheckpoint(task.id, report.checkpoint.key, report.checkpoint.atSeconds, inst.id);
      }
      const stop = this.stopping.get(task.id);
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
        this.checkpointFailed(task, inst, CHECKPOINT_NOT_UPLOADED, report.reason);
        this.log.warn(`task ${task.id} stopped without its checkpoint: ${report.reason}`);
      }
      this.noteCheckpointError(task, inst, report.checkpointError, toldByStop);
      this.noteOutsideStops(task, inst, report);
      if (report.state === 'failed' && !this.failures.has(task.id) && !this.isStale(report, task)) {
        this.failures.set(task.id, report.reason ?? `exit code ${report.exitCode ?? 'unknown'}`);
        if (report.exitCode !== undefined) this.exitCodes.set(task.id, report.exitCode);
        if (report.hostFault !== undefined) this.hostFaults.set(task.id, report.hostFault);
      }
      if (report.completedIterations !== undefined) {
        this.completed.set(task.id, report.completedIterations);
        touchedJobs.add(task.jobId);
      }
      if (report.state === 'running' && task.state === 'running' && report.throughputPerSecond !== undefined)
        throughputs.set(task.id, report.throughputPerSecond);
    }
    for (const jobId of touchedJobs) {
      const done = this.jobProgress(jobId);
      if (done !== undefined) this.progress.set(jobId, done);
    }
    this.observeThroughputs(inst, throughputs);
  }

  /**
   * A job's iterations done, from its tasks' reports: a gang has done what its least advanced task still at work has
   * done, among those that have not succeeded (one done with its part stays where its part ended while the others go
   * on). A task that has reported nothing yet has done 0, until it has been running SILENT_TASK_GRACE_SECONDS without
   * a word while a sibling reported: then it is taken for one that writes no progress (a gang's coordinator) and left
   * out. Once none is left at work, the most any reached. Undefined while no task has reported.
   */
  private jobProgress(jobId: string): number | undefined {
    const tasks = this.store.listTasks({ jobId });
    if (!tasks.some((t) => this.completed.has(t.id))) return undefined;
    const going: number[] = [];
    const ended: number[] = [];
    for (const t of tasks) {
      const done = this.completed.get(t.id);
      if (this.succeeded(t)) {
        if (done !== undefined) ended.push(done);
      } else if (done !== undefined) going.push(done);
      else if (!this.silent(t)) going.push(0);
    }
    if (going.length > 0) return Math.min(...going);
    return ended.length > 0 ? Math.max(...ended) : undefined;
  }

  /**
   * Whether a task that has reported no progress (while a sibling did) is one that writes none: it has run
   * SILENT_TASK_GRACE_SECONDS since it last became `running` (its newest `task.state` event; a store that no longer
   * has it, since its record last changed), now or before in this process.
   */
  private silent(task: TaskRecord): boolean {
    if (this.silentTasks.has(task.id)) return true;
    if (task.state !== 'running') return false;
    const [last] = this.store.listEvents({
      jobId: task.jobId,
      taskId: task.id,
      kind: 'task.state',
      newestFirst: true,
      limit: 1,
    });
    const runningSince =
      last !== undefined && taskStateData.safeParse(last.data).data?.to === 'running'
        ? last.atSeconds
        : task.updatedAtSeconds;
    if (this.options.clock.nowSeconds() - runningSince < SILENT_TASK_GRACE_SECONDS) return false;
    this.silentTasks.add(task.id);
    return true;
  }

  /** The task succeeded, as the store has it or as its worker's latest report of this attempt says. */
  private succeeded(task: TaskRecord): boolean {
    if (task.state === 'succeeded') return true;
    const report =
      task.instanceId === undefined ? undefined : this.reports.get(task.instanceId)?.tasks.get(task.id);
    return report?.state === 'succeeded' && !this.isStale(report, task);
  }

  /**
   * Stops from outside the worker that a task resumed from (TaskReport.outsideStops, counted in its attempt on that
   * instance, with the task's record there: a restarted worker goes on counting): restarts the controller neither
   * asked for nor sees otherwise (its report goes from `stopped` back to `running`), so each is recorded once, a
   * TASK_STOPPED_OUTSIDE_EVENT with the worker's reason, and the job's view counts it among its restarts. A count
   * below the one recorded is a worker that lost the task's record and counts from 0 again: all it says is new.
   */
  private noteOutsideStops(task: TaskRecord, inst: InstanceRecord, report: TaskReport): void {
    const count = report.outsideStops;
    if (count === undefined || this.isStale(report, task)) return;
    const attempt = report.attempt ?? 1;
    const known = this.knownOutsideStops(task.id, inst.id, attempt);
    if (count === known) return;
    const fresh = Math.min(count > known ? count - known : count, MAX_OUTSIDE_STOPS_PER_REPORT);
    const why =
      report.state === 'stopped' && report.reason !== undefined
        ? report.reason
        : 'stopped from outside its worker; it resumed from its last checkpoint';
    for (let n = count - fresh + 1; n <= count; n++)
      this.store.appendEvent({
        kind: TASK_STOPPED_OUTSIDE_EVENT,
        jobId: task.jobId,
        taskId: task.id,
        instanceId: inst.id,
        message: `task ${task.id} on ${inst.id}: ${why}`,
        data: { attempt, count: n },
      });
    this.outsideStops.set(task.id, { instanceId: inst.id, attempt, count });
    this.log.warn(`task ${task.id} on ${inst.id} was stopped from outside its worker: ${why}`);
  }

  /**
   * How many stops from outside of the task's attempt on the instance are recorded: as this process last recorded
   * them, or (a controller restarted since) as the newest such event says.
   */
  private knownOutsideStops(taskId: string, instanceId: string, attempt: number): number {
    let known = this.outsideStops.get(taskId);
    if (known === undefined) {
      const [last] = this.store.listEvents({
        taskId,
        kind: TASK_STOPPED_OUTSIDE_EVENT,
        newestFirst: true,
        limit: 1,
      });
      const data = stoppedOutsideData.safeParse(last?.data);
      known =
        data.success && last?.instanceId !== undefined
          ? { instanceId: last.instanceId, ...data.data }
          : { instanceId, attempt, count: 0 };
      this.outsideStops.set(taskId, known);
    }
    return known.instanceId === instanceId && known.attempt === attempt ? known.count : 0;
  }

  /**
   * A running task's checkpoints cannot be uploaded (its worker's `checkpointError`): the task goes on, but a lost
   * instance or a move would cost it the work since its last upload, so the job's owner hears why, once per reason,
   * unless the report of its stop without a checkpoint says it already. A report without it (an upload succeeded
   * since) ends it: should it come back, it is told again.
   */
  private noteCheckpointError(
    task: TaskRecord,
    inst: InstanceRecord,
    error: string | undefined,
    toldByStop: boolean,
  ): void {
    if (error === undefined) {
      // Over (an upload succeeded since), or not known in this process (a restarted controller): the view's warning
      // of this task goes, once.
      if (this.checkpointsClean.has(task.id)) return;
      this.checkpointErrors.delete(task.id);
      this.checkpointsClean.add(task.id);
      removeJobWarning(this.store, task.jobId, `${CHECKPOINT_NOT_PACKED} task ${task.id}:`);
      return;
    }
    this.checkpointsClean.delete(task.id);
    if (this.checkpointErrors.get(task.id) === error) return;
    this.checkpointErrors.set(task.id, error);
    if (toldByStop) return;
    this.checkpointFailed(
      task,
      inst,
      CHECKPOINT_NOT_PACKED,
      `${error}; it runs on, and would resume from its last uploaded checkpoint (tried again once its checkpoint ` +
        'directory changes)',
    );
    this.log.warn(`task ${task.id}: its checkpoints cannot be uploaded: ${error}`);
  }

  /** A `task.checkpoint-failed` event, and the job view's warning of that `kind` (the newest one kept). */
  private checkpointFailed(task: TaskRecord, inst: InstanceRecord, kind: string, reason: string): void {
    const message = `task ${task.id}: ${reason}`;
    this.store.appendEvent({
      kind: 'task.checkpoint-failed',
      jobId: task.jobId,
      taskId: task.id,
      instanceId: inst.id,
      message,
    });
    addJobWarning(this.store, task.jobId, kind, message);
  }

  private observeThroughputs(inst: InstanceRecord, throughputs: ReadonlyMap<string, number>): void {
    if (throughputs.size === 0) return;
    const placed = this.store
      .listTasks({ instanceId: inst.id })
      .filter((t) => PLACED_TASK_STATES.includes(t.state));
    const standalone = this.standalone();
    let changed = false;
    const normalized = new Map<string, number>();
    for (const [taskId, perSecond] of throughputs) {
      const task = placed.find((t) => t.id === taskId);
      if (task === undefined || perSecond <= 0) continue;
      if (placed.length === 1 && perSecond > (standalone[task.workloadKey] ?? 0)) {
        standalone[task.workloadKey] = perSecond;
        changed = true;
      }
      const base = standalone[task.workloadKey];
      if (base === undefined) continue; // never seen alone: no reference yet
      normalized.set(taskId, Math.min(1, Math.max(0.01, perSecond / base)));
    }
    if (changed) this.store.setValue(STANDALONE_THROUGHPUT_KEY, standalone);
    // A job runs at its slowest task's pace; every one of its tasks is observed at that pace.
    const byJob = new Map<string, number>();
    for (const [taskId, value] of normalized) {
      const jobId = (this.store.getTask(taskId) as TaskRecord).jobId;
      byJob.set(jobId, Math.min(byJob.get(jobId) ?? 1, value));
    }
    for (const [taskId] of normalized) {
      const jobId = (this.store.getTask(taskId) as TaskRecord).jobId;
      this.observations.set(taskId, byJob.get(jobId) as number);
    }
  }

  private standalone(): Record<string, number> {
    const value = this.store.getValue(STANDALONE_THROUGHPUT_KEY);
    const out: Record<string, number> = {};
    if (typeof value === 'object' && value !== null && !Array.isArray(value))
      for (const [k, v] of Object.entries(value as Record<string, JsonValue>))
        if (typeof v === 'number') out[k] = v;
    return out;
  }

  /**
   * Store the job progress heartbeats reported since the last call, in one transaction (the loop calls it before each
   * pass). Progress is level-triggered: workers report absolute iteration counts in every heartbeat, so keeping it
   * here until the next pass loses nothing a restart would not hear again, and spares each heartbeat a write, and
   * with it a sync of the store (an fsync of SQLite's WAL), which would bound heartbeats to a few hundred a second.
   */
  flushProgress(): void {
    if (this.progress.size === 0) return;
    const reported = [...this.progress];
    this.progress.clear();
    this.store.transaction(() => {
      for (const [jobId, done] of reported) {
        const job = this.store.getJob(jobId);
        if (job === undefined || isFinalJobState(job.state) || done === job.completedIterations) continue;
        this.store.recordJobProgress(jobId, done, job.spec.totalIterations);
      }
    });
  }

  /** Normalized throughputs observed since the last call (one per running task), for Scheduler.observe. */
  takeObservations(): ThroughputObservation[] {
    const out = [...this.observations].map(([taskId, normalizedThroughput]) => ({
      taskId,
      normalizedThroughput,
    }));
    this.observations.clear();
    return out;
  }

  /**
   * The reports the co-start records take: a task waiting to start here is ready only as prepared for a start the
   * controller wants now (`startWanted`), not for one that was called off (the task placed again before its siblings'
   * instances are up) nor for an earlier attempt.
   */
  private startReports(inst: InstanceRecord, reports: readonly TaskReport[]): TaskReport[] {
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
  /** The catalog now (WorkerTaskControlOptions.catalog). */
  private catalog(): Catalog {
    const catalog = this.options.catalog;
    return typeof catalog === 'function' ? catalog() : catalog;
  }

  private desiredFor(inst: InstanceRecord): DesiredTask[] {
    const reported = this.reports.get(inst.id)?.tasks;
    const describe = { ...this.options, catalog: this.catalog() };
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

  // ---------------------------------------------------------------------------------------------------------------
  // TaskControl

  workerRegistered(instance: InstanceRecord): boolean {
    return instance.workerTokenHash !== undefined && !this.silence.isLost(instance.id);
  }

  start(request: TaskStartRequest): Promise<void> {
    const { task, job, instance } = request;
    this.startRequested.set(task.id, {
      instanceId: instance.id,
      attempt: job.attempts,
      intentId: request.intentId,
    });
    const stop = this.stopping.get(request.task.id);
    if (stop !== undefined && stop.instanceId !== request.instance.id) this.stopping.delete(request.task.id);
    this.failures.delete(request.task.id);
    this.exitCodes.delete(request.task.id);
    this.hostFaults.delete(request.task.id);
    return Promise.resolve();
  }

  stop(request: TaskStopRequest): Promise<'stopped' | 'pending'> {
    const { task, instance } = request;
    let stop = this.stopping.get(task.id);
    if (stop === undefined || stop.instanceId !== instance.id) {
      stop = { instanceId: instance.id, checkpoint: request.checkpoint };
      this.stopping.set(task.id, stop);
    } else if (!request.checkpoint && stop.checkpoint) {
      stop.checkpoint = false; // a cancel overrides a move's checkpoint
      stop.deliveredSeq = undefined;
    }
    const reports = this.reports.get(instance.id);
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
        return Promise.resolve('stopped');
      }
    }
    return Promise.resolve('pending');
  }

  /**
   * A report of an earlier attempt of the task's job: after a retry the worker still reports the exit that ended
   * that attempt until it runs the task again.
   */
  private isStale(report: TaskReport, task: TaskRecord): boolean {
    const job = this.store.getJob(task.jobId);
    return job !== undefined && (report.attempt ?? 1) < job.attempts;
  }

  status(task: TaskRecord, instance: InstanceRecord): Promise<TaskStatus> {
    const report = this.reports.get(instance.id)?.tasks.get(task.id);
    if (report !== undefined && this.isStale(report, task)) return Promise.resolve('unknown');
    if (report?.state === 'succeeded' || report?.state === 'failed') {
      this.startRequested.delete(task.id);
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

  hostFault(task: TaskRecord): HostFaultKind | undefined {
    return this.hostFaults.get(task.id);
  }

  /**
   * The worker protocol is served from now on (the API listens): silence counts from here (worker-silence.ts), and is
   * saved for the next controller from now on (carried-silence.ts) until `close()`.
   */
  serving(): void {
    this.silence.serving();
    this.carryTimer ??= setInterval(() => this.carrySilence(), CARRY_SILENCE_EVERY_SECONDS * 1000);
    this.carryTimer.unref();
  }

  /** Stop saving the workers' silence (the controller stops). */
  close(): void {
    if (this.carryTimer !== undefined) clearInterval(this.carryTimer);
    this.carryTimer = undefined;
  }

  /** Save each registered worker's silence so far, for a controller that starts after this one (worker-silence.ts). */
  carrySilence(): void {
    try {
      const silence = new Map<string, number>();
      for (const inst of this.watchedWorkers()) silence.set(inst.id, this.silence.silenceToCarry(inst.id));
      this.carried.save(silence);
      this.carryFailure = undefined;
    } catch (e) {
      // The next save tries again; a failure is logged once, not twice a second.
      const message = (e as Error).message;
      if (message !== this.carryFailure) this.log.warn(`saving the workers' silence failed: ${message}`);
      this.carryFailure = message;
    }
  }

  /** Registered workers silent for too long (worker-silence.ts); the caller replaces their instances. */
  staleInstances(): InstanceRecord[] {
    return this.watchedWorkers().filter((inst) => this.silence.isSilent(inst.id));
  }

  /** The instances whose registered worker is watched for silence (not lost yet), the fleet's size noted. */
  private watchedWorkers(): InstanceRecord[] {
    const watched = this.store
      .listInstances({ states: ['running', 'draining'] })
      .filter((inst) => inst.workerTokenHash !== undefined && !this.silence.isLost(inst.id));
    this.silence.observeFleet(watched.map((inst) => inst.id));
    return watched;
  }

  /** The caller replaced the instance: forget its worker. */
  markLost(instanceId: string): void {
    this.silence.markLost(instanceId);
    this.reports.delete(instanceId);
    this.latency.forget(instanceId);
    for (const [taskId, stop] of this.stopping)
      if (stop.instanceId === instanceId) this.stopping.delete(taskId);
  }

  /** Seconds since the instance's worker was last heard (undefined: never, in this process). */
  secondsSinceHeartbeat(instanceId: string): number | undefined {
    return this.silence.secondsSince(instanceId);
  }
}
