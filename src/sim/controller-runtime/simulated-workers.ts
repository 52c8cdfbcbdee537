import { demandOn, type Resources } from '../../core/resources.js';
import {
  coStartReadinessEvent,
  coStarts,
  readCoStart,
  writeCoStart,
} from '../../controller/co-start-records.js';
import type { InstanceRecord, StateStore, TaskRecord } from '../../controller/state-store.js';
import { isFinalJobState } from '../../controller/state/lifecycle.js';
import type { WorkerFleet } from '../../controller/worker-liveness.js';
import type { TaskControl, TaskStartRequest, TaskStatus, TaskStopRequest } from '../../controller/seams.js';
import type { ThroughputObservation } from '../../scheduler/types.js';
import { StartMeter } from '../../world/world-state.js';
import { integrateProgress, isActive, jobRate, type SimJob, type SimTask } from '../../world/entities.js';
import { memoized, type GroundTruth } from '../../world/ground-truth.js';
import { checkpointUploaded, keepCheckpointsAtStop } from '../../world/checkpoints.js';
import { rollBackToCheckpoint, savesAtNotice } from '../../world/spot-world.js';
import type { SimLogKind } from '../../world/simulation-types.js';
import type { SimulatedCloud, SimulatedInstance } from './simulated-cloud.js';
import type { Timeline } from './timeline.js';

/**
 * The worker fleet over simulated time: a TaskControl for the controller's reconciler and a WorkerFleet for its
 * rounds, running the trace's jobs with the engine's task model (src/world/simulation.ts, entities.ts):
 * - start: the task holds its instance's capacity at once and runs after fetch + build (build skipped when the image
 *   is on the instance already), reported `starting` until then; once every task of the job runs, the job progresses
 *   after its init delay, and the workers report it at once (the controller pins the job until then);
 * - checkpoint-stop: the task keeps running for the kill delay, then uploads its checkpoint (upload delay), then
 *   frees the capacity; the stop reports `pending` until then; no progress is lost;
 * - progress is integrated exactly between events: full throughput × min over the job's tasks of the ground-truth
 *   rate next to the other active tasks of its instance; completion is rounded up to whole seconds;
 * - co-start (`holdStarts`): a multi-task job's task, once prepared, is held and reported ready in the store's co-start
 *   record, as a worker's heartbeat reports it (controller/co-start-records.ts); it runs when the reconciler's barrier
 *   has released it (its record turns `running`), or is dropped when the controller planned the job again. The
 *   workers hear the controller after each of its passes (`heartbeat`);
 * - spot (`evacuate`, `evict`, `reclaimed`): on EC2's interruption notice fleetwise's worker checkpoints and stops
 *   every task of its host at once (worker/notice-response.ts), as a checkpoint-stop does, while Karpenter's drain evicts them
 *   (a job saves its progress on the eviction's SIGTERM when that fits in the notice, as in the engine's spot world:
 *   `savesAtNotice`); when EC2 reclaims the host, what still ran there is lost. An evicted or reclaimed task's job
 *   goes back to its last checkpoint (world/spot-world.ts `rollBackToCheckpoint`, the engine's rule) and its siblings
 *   elsewhere wait for it, the job inactive, until the controller starts it again.
 * Jobs are the engine's SimJob objects, so JCT, start and migrations are measured on the simulated world, not on
 * the controller's later observation of it.
 */

const COMPLETION_EPSILON_SECONDS = 1e-6;
const ITERATION_EPSILON = 1e-9;

export interface SimulatedWorkersOptions {
  readonly clock: { nowSeconds(): number };
  readonly timeline: Timeline;
  readonly cloud: SimulatedCloud;
  readonly groundTruth: GroundTruth;
  /** A task starts (+1) or stops (−1) holding `demand` of an instance (FleetMeter.allocate). */
  readonly allocate?: ((demand: Resources, sign: 1 | -1) => void) | undefined;
  readonly countMigration?: (() => void) | undefined;
  /**
   * The controller's instance id where a task it checkpoint-stops starts next (its pending start), if anywhere: a task
   * restarted on the instance it stopped on moves nothing, so its stop counts no migration. Absent: every stop leaves.
   */
  readonly nextInstanceOf?: ((taskId: string) => string | undefined) | undefined;
  /** Every lifecycle step of a task or job (the engine's SimLogKind names), for tests and debugging. */
  readonly log?: ((kind: SimLogKind, task: SimTask | undefined, job: SimJob) => void) | undefined;
  /** Something happened the controller acts on (a checkpoint uploaded, a job finished), as a worker would report it. */
  readonly onReport?: (() => void) | undefined;
  /**
   * Hold the prepared tasks of multi-task jobs for the controller's co-start barrier (the controller's `coStart`), with
   * the store the workers report readiness to and hear releases from.
   */
  readonly holdStarts?: { readonly store: StateStore } | undefined;
}

/** A task prepared (or preparing) and held for its job's release. */
interface HeldTask {
  /** The controller's instance id it was started on, and the cloud's. */
  readonly instanceId: string;
  readonly cloudId: string;
  /** Where the task stood before the start (what it goes back to when the controller drops the start). */
  readonly before: 'queued' | 'stopped';
  prepared: boolean;
}

const NO_TASKS: ReadonlySet<SimTask> = new Set();

interface Host {
  readonly images: Set<string>;
  readonly occupants: Set<SimTask>;
}

export class SimulatedWorkers implements TaskControl, WorkerFleet {
  readonly name = 'simulated';
  private readonly truth: GroundTruth;
  private readonly tasks = new Map<string, SimTask>(); // controller task id → task
  private readonly taskIds = new Map<SimTask, string>(); // task → controller task id
  private readonly jobIds = new Map<SimJob, string>(); // job → controller job id
  private readonly live = new Set<SimJob>(); // submitted and unfinished, in submission order
  private readonly hosts = new Map<string, Host>(); // cloud id → what runs there
  private readonly placement = new Map<SimTask, string>(); // task → cloud id whose capacity it holds
  private readonly dirtyHosts = new Set<Host>();
  private readonly dirtyJobs = new Set<SimJob>();
  private readonly held = new Map<SimTask, HeldTask>();
  /** Jobs whose current move (its tasks' checkpoint-stops under way) is counted already. */
  private readonly movesCounted = new WeakSet<SimJob>();
  /** Submitted jobs the controller has not placed yet (their wait to be placed is measured when it does). */
  private readonly unplaced = new Set<SimJob>();
  /** Start skew and barrier-idle cost of the multi-task starts, measured on the simulated world as the engine does. */
  readonly starts = new StartMeter();
  /** Starts of multi-task jobs are held for the controller's co-start barrier (TaskControl.holdsStarts). */
  readonly holdsStarts: boolean;

  constructor(private readonly o: SimulatedWorkersOptions) {
    this.truth = memoized(o.groundTruth);
    this.holdsStarts = o.holdStarts !== undefined;
  }

  /** A job the controller accepted: `taskIds` are its controller task ids, in the order of the trace job's tasks. */
  addJob(jobId: string, job: SimJob, taskIds: readonly string[]): void {
    if (taskIds.length !== job.tasks.length)
      throw new Error(`job ${jobId}: ${taskIds.length} controller tasks for ${job.tasks.length} trace tasks`);
    job.status = 'queued';
    job.integratedToSeconds = this.now();
    this.jobIds.set(job, jobId);
    job.tasks.forEach((task, i) => {
      const id = taskIds[i] as string;
      this.tasks.set(id, task);
      this.taskIds.set(task, id);
    });
    this.live.add(job);
    this.unplaced.add(job);
  }

  /** Submitted jobs not finished yet. */
  liveJobs(): IterableIterator<SimJob> {
    return this.live.values();
  }

  controllerJobId(job: SimJob): string | undefined {
    return this.jobIds.get(job);
  }

  controllerTaskId(task: SimTask): string | undefined {
    return this.taskIds.get(task);
  }

  /** The tasks holding capacity on the cloud's instance `cloudId` (none before its first start). */
  occupantsOf(cloudId: string): ReadonlySet<SimTask> {
    return this.hosts.get(cloudId)?.occupants ?? NO_TASKS;
  }

  /** Whether the task holds capacity on an instance (started and not yet uploaded off it). */
  isPlaced(task: SimTask): boolean {
    return this.placement.has(task);
  }

  // ---- TaskControl

  workerRegistered(instance: InstanceRecord): boolean {
    return instance.cloudId !== undefined && this.o.cloud.get(instance.cloudId)?.registered === true;
  }

  start(request: TaskStartRequest): Promise<void> {
    const task = this.taskOf(request.task);
    const cloudId = request.instance.cloudId;
    if (task === undefined || cloudId === undefined) return Promise.resolve();
    if (task.state !== 'queued' && task.state !== 'stopped') return Promise.resolve(); // idempotent, or done
    const inst = this.o.cloud.get(cloudId);
    // A host EC2 took back has no worker to start anything (the controller learns it at its next cloud sync).
    if (inst === undefined || inst.state === 'terminated') return Promise.resolve();
    const host = this.hostOf(inst);
    if (this.holdsStarts && coStarts(request.job, true))
      this.held.set(task, {
        instanceId: request.instance.id,
        cloudId,
        before: task.state,
        prepared: false,
      });
    task.state = 'launching';
    task.job.status = 'migrating';
    // Ready from this start on: a ready time left from an earlier start that never reached its job's release (the task
    // stopped, or the controller moved it, before its siblings ran) would count that wait as this start's skew.
    task.readySeconds = undefined;
    this.occupy(task, inst.instanceId, host);
    this.o.log?.('start-issued', task, task.job);
    // Engine tryStart: fetch + build, the build skipped when the image is on the instance already.
    const build = host.images.has(task.spec.imageId) ? 0 : task.spec.buildImageDelaySeconds;
    this.o.timeline.at(this.now() + task.spec.fetchDelaySeconds + build, () => this.prepared(task, host));
    return Promise.resolve();
  }

  /**
   * What the workers hear from the controller after one of its passes: a prepared held task whose job the barrier
   * released runs; one whose start the controller withdrew (the job planned again after a co-start timeout,
   * cancelled, moved) is dropped and frees its room.
   */
  heartbeat(): void {
    const store = this.o.holdStarts?.store;
    for (const [task, h] of this.held) {
      const record = store?.getTask(this.taskIds.get(task) as string);
      if (task.state !== 'launching') {
        this.held.delete(task); // stopped or finished meanwhile
        continue;
      }
      const wanted =
        record?.instanceId === h.instanceId && (record.state === 'starting' || record.state === 'running');
      if (wanted && record.state === 'running' && h.prepared) {
        this.held.delete(task);
        const host = this.hosts.get(h.cloudId);
        if (host !== undefined) this.launched(task, host);
      } else if (!wanted) {
        this.held.delete(task);
        this.release(task);
        task.state = h.before;
        task.readySeconds = undefined;
        queueIfAllStopped(task.job);
      }
    }
  }

  /**
   * Note the jobs the controller has placed since the last call: a job leaves `queued` when its tasks are given an
   * instance (a round's or a placement between rounds' starts). One ended before that was never placed.
   */
  notePlaced(store: StateStore): void {
    if (this.unplaced.size === 0) return;
    const now = this.now();
    for (const job of this.unplaced) {
      const state = store.getJob(this.jobIds.get(job) as string)?.state;
      if (state === undefined || state === 'queued') continue;
      if (!isFinalJobState(state)) job.firstPlacedSeconds ??= now;
      this.unplaced.delete(job);
    }
  }

  stop(request: TaskStopRequest): Promise<'stopped' | 'pending'> {
    const task = this.taskOf(request.task);
    if (task === undefined || task.state === 'done') return Promise.resolve('stopped');
    if (task.state === 'killing' || task.state === 'uploading') return Promise.resolve('pending');
    if (task.state !== 'launching' && task.state !== 'running') {
      this.release(task);
      return Promise.resolve('stopped');
    }
    const job = task.job;
    if (!request.checkpoint) {
      // Stopped without a checkpoint (a cancel): gone at once.
      task.state = 'stopped';
      this.deactivate(job);
      this.release(task);
      return Promise.resolve('stopped');
    }
    this.checkpointStop(task, this.o.nextInstanceOf?.(request.task.id) !== request.instance.id);
    return Promise.resolve('pending');
  }

  /**
   * Checkpoint the task and stop it: it runs on through the kill, then uploads, then frees its room. `leaves`: it
   * does not restart on this instance.
   */
  private checkpointStop(task: SimTask, leaves: boolean): void {
    const job = task.job;
    // A move or a return to the queue counts once per job (engine: one migration per job and round), at the first stop
    // of a task leaving its instance: the survivors of a lost host restarted in place beside their lost siblings'
    // replacements moved nothing (the engine restarts such a job from the queue, counting nothing).
    if (!job.tasks.some((t) => t.state === 'killing' || t.state === 'uploading'))
      this.movesCounted.delete(job);
    if (leaves && !this.movesCounted.has(job)) {
      this.movesCounted.add(job);
      job.migrations += 1;
      this.o.countMigration?.();
    }
    job.status = 'migrating';
    task.state = 'killing';
    this.o.log?.('checkpoint-issued', task, job);
    this.o.timeline.at(this.now() + task.spec.killDelaySeconds, () => this.killed(task));
  }

  /**
   * EC2's spot interruption notice reached the host's worker: every task there is checkpointed and stopped at once
   * (one still preparing just stops: it has nothing to save), and the worker starts nothing more.
   */
  evacuate(cloudId: string): void {
    const host = this.hosts.get(cloudId);
    if (host === undefined) return;
    // The host is going: every task leaves it.
    for (const task of [...host.occupants]) {
      if (task.state === 'running') this.checkpointStop(task, true);
      else if (task.state === 'launching') {
        this.held.delete(task);
        task.state = 'stopped';
        this.release(task);
        queueIfAllStopped(task.job);
      }
    }
  }

  /**
   * Karpenter's drain evicted the pods of the host under a notice: its tasks stop now, each job at the progress it
   * saves on the eviction's SIGTERM when that checkpoint fits in the notice (world/spot-world.ts `savesAtNotice`, as
   * the engine evicts), else at its last periodic checkpoint; the host stays until EC2 takes it or the controller
   * ends it, empty.
   */
  evict(cloudId: string, zone: string): void {
    this.loseTasksOn(cloudId, zone, true);
    this.o.onReport?.();
  }

  /**
   * EC2 reclaimed the host: each job with a task still there goes back to its last checkpoint, those tasks are gone
   * with the host, and the job waits for the controller to start them again (its tasks elsewhere keep their room).
   */
  reclaimed(cloudId: string, zone: string): void {
    if (!this.hosts.has(cloudId)) return;
    this.loseTasksOn(cloudId, zone);
    this.hosts.delete(cloudId);
    this.o.onReport?.();
  }

  /**
   * The tasks on the host stop: each of their jobs goes back to its last checkpoint, which is its progress now when
   * they were evicted (`evicted`) and the job saves it within the notice.
   */
  private loseTasksOn(cloudId: string, zone: string, evicted = false): void {
    const host = this.hosts.get(cloudId);
    if (host === undefined) return;
    const jobs = new Set([...host.occupants].map((t) => t.job));
    for (const job of jobs) {
      if (job.status === 'finished') continue;
      let saved: number | undefined;
      if (evicted && savesAtNotice(job)) {
        integrateProgress(job, this.now());
        saved = job.completedIterations;
      }
      rollBackToCheckpoint(job, this.now(), saved, zone);
      for (const task of job.tasks) {
        if (this.placement.get(task) !== cloudId) {
          // A sibling's neighbours run without it now.
          const elsewhere = this.hostOfTask(task);
          if (elsewhere !== undefined) this.dirtyHosts.add(elsewhere);
          continue;
        }
        this.held.delete(task);
        task.state = 'stopped';
        task.rate = 1;
        this.release(task);
      }
      // Its tasks elsewhere keep their room until the controller moves or restarts them.
      job.status = 'migrating';
      queueIfAllStopped(job);
      this.dirtyJobs.add(job);
    }
  }

  status(task: TaskRecord): Promise<TaskStatus> {
    const t = this.taskOf(task);
    if (t === undefined) return Promise.resolve('unknown');
    switch (t.state) {
      case 'done':
        return Promise.resolve('succeeded');
      case 'launching':
        return Promise.resolve('starting');
      case 'running':
      case 'killing':
      case 'uploading':
        return Promise.resolve('running');
      case 'stopped':
      case 'queued':
        return Promise.resolve('stopped');
    }
  }

  // ---- WorkerFleet

  /**
   * Each active task's normalized throughput as its worker measures it: its job's throughput over the full
   * throughput, the min over the job's active tasks (engine observeThroughputs).
   */
  takeObservations(): ThroughputObservation[] {
    const out: ThroughputObservation[] = [];
    for (const job of this.live) {
      let rate = Infinity;
      for (const t of job.tasks) if (isActive(t)) rate = Math.min(rate, t.rate);
      if (rate === Infinity) continue;
      for (const t of job.tasks)
        if (isActive(t)) out.push({ taskId: this.taskIds.get(t) as string, normalizedThroughput: rate });
    }
    return out;
  }

  staleInstances(): InstanceRecord[] {
    return []; // simulated workers never go silent
  }

  markLost(): void {}

  // ---- the world's events

  /** Fetched and built: a held task reports ready and waits for its release; any other runs. */
  private prepared(task: SimTask, host: Host): void {
    if (task.state !== 'launching') return; // stopped or finished meanwhile
    host.images.add(task.spec.imageId);
    const h = this.held.get(task);
    if (h === undefined || this.o.holdStarts === undefined) {
      this.launched(task, host);
      // Reported running, the last of its job's tasks: the controller hears at once that the job is prepared, as the
      // engine's job turns `executing` now (its init delay runs from here).
      if (task.job.tasks.every((t) => t.state === 'running')) this.o.onReport?.();
      return;
    }
    h.prepared = true;
    task.readySeconds = this.now();
    const store = this.o.holdStarts.store;
    const job = store.getJob(this.jobIds.get(task.job) as string);
    if (job === undefined) return;
    // The worker's report, as recordStartReports (controller/co-start-reports.ts) writes it: prepared here since now.
    const record = readCoStart(store, job);
    const taskId = this.taskIds.get(task) as string;
    record.ready[taskId] = { instanceId: h.instanceId, sinceSeconds: this.now() };
    store.transaction(() => {
      writeCoStart(store, job.id, record);
      // Logged as the controller logs it, so the cost replay bills the hold from here, not the whole start.
      store.appendEvent(coStartReadinessEvent(job.id, taskId, h.instanceId, true));
    });
    this.o.onReport?.();
  }

  private launched(task: SimTask, host: Host): void {
    if (task.state !== 'launching') return; // stopped or finished meanwhile
    task.state = 'running';
    this.o.log?.('launched', task, task.job);
    host.images.add(task.spec.imageId);
    this.dirtyHosts.add(host);
    // A held task has been ready since it was prepared (its release comes later); any other is ready now.
    task.readySeconds ??= this.now();
    const job = task.job;
    if (job.tasks.every((t) => t.state === 'running')) {
      this.starts.releaseJob(
        job,
        (t) => {
          const cloudId = this.placement.get(t);
          const host = cloudId === undefined ? undefined : this.o.cloud.get(cloudId);
          return cloudId === undefined || host === undefined
            ? undefined
            : { type: host.type, demand: this.demandOnHost(t, cloudId), pricePerHour: host.pricePerHour };
        },
        this.now(),
      );
      // Gang start: progress begins init_delay after the last task runs.
      job.status = 'executing';
      job.activationToken += 1;
      const token = job.activationToken;
      this.o.timeline.at(this.now() + job.spec.initDelaySeconds, () => this.activated(job, token));
    }
  }

  private activated(job: SimJob, token: number): void {
    if (token !== job.activationToken || job.status === 'finished') return;
    // It resumed from a checkpoint holding exactly the progress it has (engine onJobActive).
    job.checkpointIterations = job.completedIterations;
    job.active = true;
    job.activeSinceSeconds = this.now();
    job.startSeconds ??= this.now();
    this.o.log?.('job-active', undefined, job);
    this.dirtyJobs.add(job);
  }

  private killed(task: SimTask): void {
    if (task.state !== 'killing') return;
    task.state = 'uploading';
    this.o.log?.('killed', task, task.job);
    const host = this.hostOfTask(task);
    if (host !== undefined) this.dirtyHosts.add(host);
    keepCheckpointsAtStop(task.job, this.now());
    this.deactivate(task.job);
    this.o.timeline.at(this.now() + task.spec.uploadDelaySeconds, () => this.uploaded(task));
  }

  private uploaded(task: SimTask): void {
    if (task.state !== 'uploading') return;
    task.state = 'stopped';
    this.o.log?.('uploaded', task, task.job);
    this.release(task);
    checkpointUploaded(task.job);
    queueIfAllStopped(task.job);
    this.o.onReport?.();
  }

  private completed(job: SimJob, version: number): void {
    if (version !== job.version || job.status === 'finished') return;
    integrateProgress(job, this.now());
    job.status = 'finished';
    job.active = false;
    job.activeSinceSeconds = undefined;
    job.throughput = 0;
    job.endSeconds = this.now();
    job.version += 1;
    this.o.log?.('completion', undefined, job);
    for (const task of job.tasks) {
      this.release(task);
      task.state = 'done';
    }
    this.live.delete(job);
    this.o.onReport?.();
  }

  /**
   * Recompute the ground-truth rates on instances whose active tasks changed, then the throughput of every affected
   * job, and reschedule its completion (engine refreshRates).
   */
  refreshRates(): void {
    for (const host of this.dirtyHosts) {
      const active = [...host.occupants].filter(isActive);
      for (const task of active) {
        task.rate = this.truth(
          task.job.spec.workload,
          active.filter((o) => o !== task).map((o) => o.job.spec.workload),
        );
        this.dirtyJobs.add(task.job);
      }
    }
    this.dirtyHosts.clear();
    const now = this.now();
    for (const job of this.dirtyJobs) {
      if (job.status === 'finished') continue;
      integrateProgress(job, now);
      const throughput = job.active ? jobRate(job) * job.spec.fullThroughput : 0;
      const remaining = job.spec.totalIterations - job.completedIterations;
      job.throughput = throughput;
      job.version += 1;
      const version = job.version;
      if (remaining <= ITERATION_EPSILON)
        this.o.timeline.at(now, () => this.completed(job, version), 'completion');
      else if (throughput > 0) {
        const end = Math.ceil(now + remaining / throughput - COMPLETION_EPSILON_SECONDS);
        this.o.timeline.at(Math.max(end, now), () => this.completed(job, version), 'completion');
      }
    }
    this.dirtyJobs.clear();
  }

  // ---- helpers

  private now(): number {
    return this.o.clock.nowSeconds();
  }

  private taskOf(record: TaskRecord): SimTask | undefined {
    return this.tasks.get(record.id);
  }

  private hostOf(inst: SimulatedInstance): Host {
    let host = this.hosts.get(inst.instanceId);
    if (host === undefined) {
      host = { images: new Set(), occupants: new Set() };
      this.hosts.set(inst.instanceId, host);
    }
    return host;
  }

  private hostOfTask(task: SimTask): Host | undefined {
    const id = this.placement.get(task);
    return id === undefined ? undefined : this.hosts.get(id);
  }

  private demandOnHost(task: SimTask, cloudId: string): Resources {
    const family = this.o.cloud.get(cloudId)?.type.family ?? '';
    const d = demandOn(task.spec.demand, family);
    if (d === undefined) throw new Error(`task ${task.id} cannot run on family ${family}`);
    return d;
  }

  private occupy(task: SimTask, cloudId: string, host: Host): void {
    this.release(task);
    this.placement.set(task, cloudId);
    host.occupants.add(task);
    this.o.allocate?.(this.demandOnHost(task, cloudId), 1);
  }

  private release(task: SimTask): void {
    const cloudId = this.placement.get(task);
    if (cloudId === undefined) return;
    const host = this.hosts.get(cloudId);
    if (host !== undefined) {
      host.occupants.delete(task);
      this.dirtyHosts.add(host);
    }
    this.placement.delete(task);
    this.o.allocate?.(this.demandOnHost(task, cloudId), -1);
  }

  /** The job stops progressing (a kill cancels a pending activation, as in the engine). */
  private deactivate(job: SimJob): void {
    job.activationToken += 1;
    if (job.active) {
      job.active = false;
      job.activeSinceSeconds = undefined;
    }
    this.dirtyJobs.add(job);
  }
}

/** A job none of whose tasks holds or prepares on an instance any more is back in the queue. */
function queueIfAllStopped(job: SimJob): void {
  if (job.tasks.every((t) => t.state === 'stopped' || t.state === 'queued')) job.status = 'queued';
}
