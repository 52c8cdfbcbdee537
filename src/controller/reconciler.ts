import type { Catalog, InstanceType } from '../core/catalog.js';
import { demandOn, type FamilyDemand, type Resources } from '../core/resources.js';
import type { QueueCaps } from '../queue/caps.js';
import { launchGate, startGate, terminateGate, type GateWait } from '../round/gates.js';
import { chooseReplacementType } from '../round/replacement.js';
import type { ConfigurationDiff } from '../scheduler/actions.js';
import { PriceBook } from '../scheduler/reservation-price.js';
import type { Configuration, Plan } from '../scheduler/types.js';
import {
  InsufficientCapacityError,
  QuotaExceededError,
  TAG_LAUNCH_TOKEN,
  type CloudInstance,
  type CloudProvider,
} from '../cloud/provider.js';
import type { Clock } from './clock.js';
import type { OrphanPolicy } from './config.js';
import { expandTasks } from './job-spec/tasks.js';
import { isFinalJobState, PLACED_TASK_STATES } from './state/lifecycle.js';
import type {
  InstanceRecord,
  IntentPayload,
  IntentRecord,
  JobRecord,
  JobState,
  JsonValue,
  StateStore,
  TaskRecord,
} from './state-store.js';

/**
 * Turning plans into effects, crash-safely (ARCHITECTURE.md "Principles": level-triggered reconciliation).
 *
 * A round's plan is diffed (scheduler/actions.ts) and written to the store in ONE transaction: new instance records
 * with their launch intents, stop and start intents for the tasks that move, task and job states, and instances the
 * plan drops marked `draining`. Effects run afterwards, each re-reading the store first and completing its intent in
 * the same transaction that records its outcome:
 *
 *   launch      pending `launch` intent → CloudProvider.launch with the instance's stored idempotency token
 *   stop        pending `stop-task` intent → TaskExecutor.stop; the task is released (and re-committed to its
 *               destination when a `start-task` intent waits for it)
 *   start       pending `start-task` intent → TaskExecutor.start once the instance is running (and its worker
 *               registered) and no other job is still checkpointing off it
 *   terminate   a `draining` instance that nothing occupies → `terminate` intent → CloudProvider.terminate
 *
 * `syncWithCloud` compares the store with what EC2 lists under the cluster tag: a launch whose instance exists (found by
 * its launch-token tag) is adopted rather than relaunched; instances EC2 has that the store does not know are
 * adopted or terminated (orphan policy); instances that vanished are marked terminated and their tasks replanned.
 * Restarting is therefore just running these steps again: every pending intent is either found done in the cloud or
 * performed (again, idempotently).
 */

// ---------------------------------------------------------------------------------------------------------------
// Seams: the task executor and fault injection

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
 * Runs tasks on instances (through the worker agent, in the worker issue). Calls must be idempotent: after a crash the
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
 * Until the worker exists: a task "runs" as soon as its instance runs in EC2 and the plan put it there. Nothing ever
 * finishes by itself; a cancel ends a job.
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

/** Named points between an intent and its effect, where tests inject a crash (and restart the controller). */
export const FAULT_POINTS = [
  'round:planned',
  'round:committed',
  'launch:before-call',
  'launch:after-call',
  'stop:before-call',
  'stop:after-call',
  'start:before-call',
  'start:after-call',
  'terminate:before-call',
  'terminate:after-call',
  'orphan:recorded',
] as const;
export type FaultPoint = (typeof FAULT_POINTS)[number];

export interface FaultInjector {
  /** Called at each point; throwing (InjectedCrash) or exiting the process simulates a crash there. */
  hit(point: FaultPoint, detail: string): void;
}

/** Thrown by fault injectors; never caught by the reconciler's error handling. */
export class InjectedCrash extends Error {
  constructor(readonly point: FaultPoint) {
    super(`injected crash at ${point}`);
    this.name = 'InjectedCrash';
  }
}

export interface ControllerLogger {
  info(message: string, data?: Record<string, unknown>): void;
  warn(message: string, data?: Record<string, unknown>): void;
  error(message: string, data?: Record<string, unknown>): void;
}

export const silentLogger: ControllerLogger = { info() {}, warn() {}, error() {} };

// ---------------------------------------------------------------------------------------------------------------

export interface ReconcilerSettings {
  readonly clusterName: string;
  readonly orphanPolicy: OrphanPolicy;
  readonly vanishGraceSeconds: number;
  readonly registrationTimeoutSeconds: number;
  readonly registrationBackoffBaseSeconds: number;
  readonly registrationBackoffMaxSeconds: number;
  /** Caps every launch keeps, counting the fleet in transit (round/gates.ts `launchGate`). */
  readonly caps: QueueCaps;
  /** Extra tags on launched instances. */
  readonly tags?: Readonly<Record<string, string>>;
  /** Retry delays for launches that failed for another reason than capacity (throttling, API errors). */
  readonly launchRetryBaseSeconds?: number;
  readonly launchRetryMaxSeconds?: number;
}

export interface ReconcilerDeps {
  readonly store: StateStore;
  readonly catalog: Catalog;
  /** Undefined in dry-run: nothing here may call the cloud then. */
  readonly provider: CloudProvider | undefined;
  readonly executor: TaskExecutor;
  readonly clock: Clock;
  readonly settings: ReconcilerSettings;
  readonly faults?: FaultInjector | undefined;
  readonly logger?: ControllerLogger | undefined;
  /** A job reached a final state (its cost report is due) or the fleet changed enough to plan again. */
  readonly onJobEnded?: (job: JobRecord) => void;
  readonly requestRound?: (reason: string) => void;
}

export interface AppliedPlan {
  readonly round: number;
  /** Plan ids (`new-<n>`) → instance records created for them. */
  readonly launched: ReadonlyMap<string, string>;
  readonly configuration: Configuration;
}

export interface SyncSummary {
  readonly listed: number;
  readonly adopted: readonly string[];
  readonly orphans: readonly string[];
  readonly vanished: readonly string[];
}

export interface ProgressSummary {
  readonly launched: readonly string[];
  readonly started: readonly string[];
  readonly stopped: readonly string[];
  readonly terminated: readonly string[];
  readonly replaced: readonly string[];
  readonly deferredLaunches: number;
}

/** KV key of the launch backoff after worker-registration failures (persisted so a restart does not reset it). */
export const LAUNCH_BACKOFF_KEY = 'controller.launchBackoff';

interface LaunchBackoff {
  readonly failures: number;
  readonly notBeforeSeconds: number;
}

const LIVE_INSTANCE_STATES = ['requested', 'launching', 'running', 'draining', 'terminating'] as const;

export class Reconciler {
  private readonly store: StateStore;
  private readonly book: PriceBook;
  private readonly settings: ReconcilerSettings;
  private readonly log: ControllerLogger;
  /** Launch intents that failed for a transient reason: attempts and when to try again (in memory). */
  private readonly launchRetry = new Map<number, { attempts: number; notBeforeSeconds: number }>();

  constructor(private readonly deps: ReconcilerDeps) {
    this.store = deps.store;
    this.book = new PriceBook(deps.catalog);
    this.settings = deps.settings;
    this.log = deps.logger ?? silentLogger;
  }

  private fault(point: FaultPoint, detail: string): void {
    this.deps.faults?.hit(point, detail);
  }

  private now(): number {
    return this.deps.clock.nowSeconds();
  }

  private get provider(): CloudProvider {
    if (this.deps.provider === undefined)
      throw new Error('no cloud provider (dry-run): refusing a cloud call');
    return this.deps.provider;
  }

  // -------------------------------------------------------------------------------------------------------------
  // Plan → intents (one transaction)

  /**
   * Record the round and turn its diff into intents and state changes, all in one transaction: a crash before the
   * commit leaves no trace (the next round plans again), after it every effect is recorded as pending.
   */
  applyPlan(plan: Plan, diff: ConfigurationDiff): AppliedPlan {
    const applied = this.store.transaction(() => {
      const launched = new Map<string, string>();
      for (const action of diff.actions)
        if (action.kind === 'launch-instance')
          launched.set(action.instanceId, this.store.createInstance({ typeName: action.typeName }).id);
      const resolve = (id: string): string => launched.get(id) ?? id;
      const configuration: Configuration = {
        instances: plan.configuration.instances.map((i) => ({ ...i, id: resolve(i.id) })),
      };
      const { round } = this.store.recordRound({ configuration, decision: plan.decision });
      const touchedJobs = new Set<string>();
      for (const action of diff.actions) {
        switch (action.kind) {
          case 'launch-instance': {
            const instance = this.store.getInstance(resolve(action.instanceId)) as InstanceRecord;
            this.store.recordIntent(
              {
                kind: 'launch',
                payload: {
                  instanceId: instance.id,
                  typeName: instance.typeName,
                  launchToken: instance.launchToken,
                },
              },
              { key: `launch:${instance.id}`, round },
            );
            break;
          }
          case 'checkpoint-stop': {
            this.store.recordIntent(
              {
                kind: 'stop-task',
                payload: { taskId: action.taskId, instanceId: action.instanceId, checkpoint: true },
              },
              { round },
            );
            this.store.setTaskState(action.taskId, 'checkpointing');
            const job = this.store.getJob(action.jobId) as JobRecord;
            if (job.state === 'running')
              this.store.setJobState(
                job.id,
                'migrating',
                action.then === 'move' ? `moving (round ${round})` : `returned to the queue (round ${round})`,
              );
            touchedJobs.add(action.jobId);
            break;
          }
          case 'start-task': {
            const instanceId = resolve(action.instanceId);
            this.store.recordIntent(
              { kind: 'start-task', payload: { taskId: action.taskId, instanceId } },
              { round },
            );
            const task = this.store.getTask(action.taskId) as TaskRecord;
            if (!PLACED_TASK_STATES.includes(task.state))
              this.store.setTaskState(task.id, 'starting', instanceId);
            touchedJobs.add(action.jobId);
            break;
          }
          case 'terminate-instance':
            this.store.setInstanceState(action.instanceId, 'draining', {
              reason: `not in the plan of round ${round}`,
            });
            break;
        }
      }
      for (const jobId of touchedJobs) this.settleJob(jobId, `round ${round}`);
      this.store.appendEvent({
        kind: 'round.applied',
        message: `round ${round}: ${diff.actions.length} action(s), ${launched.size} launch(es), ${diff.movedJobIds.length} move(s), ${diff.startedJobIds.length} start(s)`,
        data: {
          round,
          launched: Object.fromEntries(launched),
          moved: [...diff.movedJobIds],
          started: [...diff.startedJobIds],
          queued: [...diff.queuedJobIds],
          terminated: diff.actions.filter((a) => a.kind === 'terminate-instance').map((a) => a.instanceId),
        },
      });
      this.fault('round:planned', `round ${round}`);
      return { round, launched, configuration };
    });
    this.fault('round:committed', `round ${applied.round}`);
    return applied;
  }

  // -------------------------------------------------------------------------------------------------------------
  // Job state from its tasks

  private pendingStartsOf(taskIds: ReadonlySet<string>): IntentRecord[] {
    return this.store
      .listIntents({ states: ['pending'], kind: 'start-task' })
      .filter((i) => i.kind === 'start-task' && taskIds.has(i.payload.taskId));
  }

  /**
   * Derive a job's state from its tasks and pending starts: checkpointing → migrating, starting (or waiting to) →
   * starting, all running → running, nothing placed → queued. Only legal transitions are taken (lifecycle.ts); a
   * queued job whose tasks all run passes through starting.
   */
  private settleJob(jobId: string, reason: string): void {
    const job = this.store.getJob(jobId);
    if (job === undefined || isFinalJobState(job.state)) return;
    const tasks = this.store.listTasks({ jobId });
    const starts = this.pendingStartsOf(new Set(tasks.map((t) => t.id)));
    const checkpointing = tasks.some((t) => t.state === 'checkpointing');
    const allRunning = tasks.length > 0 && tasks.every((t) => t.state === 'running');
    const anyPlaced = tasks.some((t) => PLACED_TASK_STATES.includes(t.state));
    let target: JobState;
    if (checkpointing) target = job.state === 'running' ? 'migrating' : job.state;
    else if (allRunning && starts.length === 0) target = 'running';
    else if (starts.length > 0 || tasks.some((t) => t.state === 'starting')) target = 'starting';
    else if (!anyPlaced) target = 'queued';
    else target = 'queued'; // part of a gang lost: the next plan restarts or requeues it whole
    this.moveJob(job, target, reason);
  }

  private moveJob(job: JobRecord, target: JobState, reason: string): void {
    if (job.state === target) return;
    if (job.state === 'queued' && target === 'running') this.store.setJobState(job.id, 'starting', reason);
    if (job.state === 'running' && target === 'starting') return; // only a move (via migrating) restarts a running job
    this.store.setJobState(job.id, target, reason);
  }

  // -------------------------------------------------------------------------------------------------------------
  // Cloud sync

  /**
   * Compare the store with the cloud's view of the cluster (one List call). Level-triggered: safe to run at any time,
   * and the whole of crash recovery for launches and terminations.
   */
  async syncWithCloud(): Promise<SyncSummary> {
    const cloud = await this.provider.list(this.settings.clusterName);
    const now = this.now();
    const byCloudId = new Map(cloud.map((c) => [c.instanceId, c]));
    const byToken = new Map<string, CloudInstance[]>();
    for (const c of cloud) {
      const token = c.tags[TAG_LAUNCH_TOKEN];
      if (token === undefined) continue;
      const list = byToken.get(token);
      if (list === undefined) byToken.set(token, [c]);
      else list.push(c);
    }
    const claimed = new Set<string>();
    const adopted: string[] = [];
    const vanished: string[] = [];
    const records = this.store.listInstances({ states: [...LIVE_INSTANCE_STATES] });
    for (const inst of records) {
      if (inst.cloudId !== undefined) {
        claimed.add(inst.cloudId);
        const seen = byCloudId.get(inst.cloudId);
        if (
          seen === undefined ||
          seen.state === 'shutting-down' ||
          seen.state === 'stopping' ||
          seen.state === 'stopped'
        ) {
          if (inst.state === 'terminating') continue; // the terminate step finishes it
          const since = inst.launchedAtSeconds ?? inst.requestedAtSeconds;
          // DescribeInstances is eventually consistent right after RunInstances: wait before declaring it lost.
          if (seen === undefined && now - since < this.settings.vanishGraceSeconds) continue;
          this.loseInstance(inst, seen === undefined ? 'vanished from EC2' : `EC2 reports it ${seen.state}`);
          vanished.push(inst.id);
        } else if (seen.state === 'running' && inst.state === 'launching') {
          this.store.setInstanceState(inst.id, 'running', { availabilityZone: seen.availabilityZone });
        }
        continue;
      }
      // No cloud id yet: a launch that may have happened before a crash. Its token finds it.
      const found = (byToken.get(inst.launchToken) ?? []).filter((c) => !claimed.has(c.instanceId));
      const first = found[0];
      if (first === undefined) continue;
      claimed.add(first.instanceId);
      this.adoptLaunch(inst, first);
      adopted.push(inst.id);
    }
    const orphans: string[] = [];
    for (const c of cloud) {
      if (claimed.has(c.instanceId) || c.state === 'shutting-down') continue;
      // Known to the store but closed (declared lost, or replaced): its tasks are elsewhere, so it only costs money.
      const known = this.store.findInstanceByCloudId(c.instanceId);
      if (known !== undefined) await this.terminateStray(known, c);
      else orphans.push(this.handleOrphan(c).id);
    }
    return { listed: cloud.length, adopted, orphans, vanished };
  }

  /** A launch recorded without its result (crash between RunInstances and the store): attach the instance found. */
  private adoptLaunch(inst: InstanceRecord, cloud: CloudInstance): void {
    this.store.transaction(() => {
      const change = {
        cloudId: cloud.instanceId,
        availabilityZone: cloud.availabilityZone,
        reason: 'found by launch token',
      };
      if (inst.state === 'requested') this.store.setInstanceState(inst.id, 'launching', change);
      else this.store.setInstanceState(inst.id, inst.state, change);
      if (cloud.state === 'running' && this.store.getInstance(inst.id)?.state === 'launching')
        this.store.setInstanceState(inst.id, 'running');
      for (const intent of this.pendingIntentsFor('launch', inst.id)) this.store.completeIntent(intent.id);
    });
    this.log.info('adopted a launched instance found by its launch token', {
      instanceId: inst.id,
      cloudId: cloud.instanceId,
    });
  }

  /**
   * An instance tagged with this cluster that the store does not know (a lost database, a launch whose record was
   * rolled back, or someone else's launch with our tags). It gets a record either way, so its cost is accounted for:
   * adopted, the plan uses it or drops it; under the terminate policy (or a type the catalog lacks) it is drained at
   * once and terminated by the next terminate pass.
   */
  private handleOrphan(cloud: CloudInstance): InstanceRecord {
    const knownType = this.deps.catalog.types.some((t) => t.name === cloud.typeName);
    const terminate = this.settings.orphanPolicy === 'terminate' || !knownType;
    const record = this.store.transaction(() => {
      const inst = this.store.createInstance({
        typeName: cloud.typeName,
        availabilityZone: cloud.availabilityZone,
        launchToken: `adopted-${cloud.instanceId}`,
      });
      this.store.setInstanceState(inst.id, 'launching', {
        cloudId: cloud.instanceId,
        availabilityZone: cloud.availabilityZone,
        reason: 'orphan found in EC2',
      });
      if (terminate)
        return this.store.setInstanceState(inst.id, 'draining', {
          reason: knownType
            ? 'orphan (policy: terminate)'
            : `orphan of type ${cloud.typeName}, not in the catalog`,
        });
      return cloud.state === 'running'
        ? this.store.setInstanceState(inst.id, 'running', { reason: 'orphan adopted' })
        : inst;
    });
    this.log.warn(`orphan instance ${cloud.instanceId} ${terminate ? 'will be terminated' : 'adopted'}`, {
      instanceId: record.id,
      typeName: cloud.typeName,
    });
    this.fault('orphan:recorded', record.id);
    this.deps.requestRound?.('orphan found');
    return record;
  }

  /** An instance whose record is closed still runs: terminate it (intent first, like every effect). */
  private async terminateStray(known: InstanceRecord, cloud: CloudInstance): Promise<void> {
    const intent = this.store.recordIntent({
      kind: 'terminate',
      payload: { instanceId: known.id, cloudId: cloud.instanceId },
    });
    this.fault('terminate:before-call', known.id);
    await this.provider.terminate([cloud.instanceId]);
    this.fault('terminate:after-call', known.id);
    this.store.transaction(() => {
      this.store.completeIntent(intent.id);
      this.store.appendEvent({
        kind: 'instance.stray-terminated',
        instanceId: known.id,
        message: `${cloud.instanceId} still ran after ${known.id} was closed (${known.reason ?? known.state}); terminated`,
      });
    });
    this.log.warn(`terminated stray instance ${cloud.instanceId} of closed record ${known.id}`);
  }

  /** The instance is gone (vanished, stopped, never registered): release its tasks so the next plan places them. */
  private loseInstance(inst: InstanceRecord, reason: string): void {
    const affected = this.store.transaction(() => {
      for (const intent of this.pendingIntentsFor('launch', inst.id))
        this.store.failIntent(intent.id, reason);
      this.store.setInstanceState(inst.id, 'terminated', { reason });
      return this.releaseTasksOn(inst.id, `instance ${inst.id} lost: ${reason}`);
    });
    this.log.warn(`instance ${inst.id} lost: ${reason}`, { cloudId: inst.cloudId, jobs: [...affected] });
    if (affected.size > 0) this.deps.requestRound?.(`instance ${inst.id} lost`);
  }

  /**
   * A worker that stopped heartbeating: its tasks go back to the queue (rescheduled from their last checkpoints) and
   * its instance is terminated through the intent discipline like any other: a `terminate` intent is recorded in
   * the same transaction, and `performTerminations` carries it out (and again after a crash).
   */
  replaceLostWorker(instanceId: string, reason: string): void {
    const affected = this.store.transaction(() => {
      const inst = this.store.getInstance(instanceId);
      if (inst === undefined || inst.state === 'terminating' || inst.state === 'terminated')
        return new Set<string>();
      const jobs = this.releaseTasksOn(inst.id, reason);
      if (this.pendingIntentsFor('terminate', inst.id).length === 0)
        this.store.recordIntent({
          kind: 'terminate',
          payload: { instanceId: inst.id, ...(inst.cloudId === undefined ? {} : { cloudId: inst.cloudId }) },
        });
      this.store.setInstanceState(inst.id, 'terminating', { reason });
      return jobs;
    });
    if (affected.size > 0) this.deps.requestRound?.(`worker of ${instanceId} lost`);
  }

  /**
   * Tasks on (or headed to) an instance that can no longer host them go back to pending, their pending starts and
   * stops there are failed, and their jobs return to the queue. Returns the affected job ids.
   */
  private releaseTasksOn(instanceId: string, reason: string): Set<string> {
    const jobs = new Set<string>();
    for (const intent of this.store.listIntents({ states: ['pending'] })) {
      if (
        (intent.kind === 'start-task' || intent.kind === 'stop-task') &&
        intent.payload.instanceId === instanceId
      ) {
        this.store.failIntent(intent.id, reason);
        const task = this.store.getTask(intent.payload.taskId);
        if (task !== undefined) jobs.add(task.jobId);
      }
    }
    for (const task of this.store.listTasks({ instanceId })) {
      if (!PLACED_TASK_STATES.includes(task.state)) continue;
      const job = this.store.getJob(task.jobId) as JobRecord;
      this.store.setTaskState(task.id, isFinalJobState(job.state) ? 'stopped' : 'pending');
      jobs.add(task.jobId);
    }
    for (const jobId of jobs) {
      const job = this.store.getJob(jobId) as JobRecord;
      if (isFinalJobState(job.state)) continue;
      // Starts elsewhere for a job that just lost part of its gang are void: the next plan places it whole.
      const taskIds = new Set(this.store.listTasks({ jobId }).map((t) => t.id));
      for (const start of this.pendingStartsOf(taskIds)) this.store.failIntent(start.id, reason);
      for (const task of this.store.listTasks({ jobId }))
        if (task.state === 'starting') this.store.setTaskState(task.id, 'pending');
      if (job.state !== 'queued') this.store.setJobState(jobId, 'queued', reason);
    }
    return jobs;
  }

  private pendingIntentsFor(kind: 'launch' | 'terminate', instanceId: string): IntentRecord[] {
    return this.store
      .listIntents({ states: ['pending'], kind })
      .filter((i) => (i.kind === 'launch' || i.kind === 'terminate') && i.payload.instanceId === instanceId);
  }

  // -------------------------------------------------------------------------------------------------------------
  // Effects

  /** Carry out every pending effect whose gate is open. Safe to call at any time, any number of times. */
  async progress(): Promise<ProgressSummary> {
    this.stopTasksOfEndedJobs();
    const stopped = await this.performStops();
    const replaced = this.dryRun ? [] : this.checkRegistrations();
    const { launched, deferred } = this.dryRun ? { launched: [], deferred: 0 } : await this.performLaunches();
    // Launched instances may already run (stand-ins like moto start them at once): look before gating starts on it.
    if (launched.length > 0) await this.syncWithCloud();
    const started = await this.performStarts();
    await this.pollTaskStatuses();
    const terminated = this.dryRun ? [] : await this.performTerminations();
    return { launched, started, stopped, terminated, replaced, deferredLaunches: deferred };
  }

  private get dryRun(): boolean {
    return this.deps.provider === undefined;
  }

  // ---- stops

  /**
   * Level-triggered safety net: a task still placed although its job ended (e.g. the job was ended by another writer
   * of the store, not through ControllerService.cancel) gets a stop intent, so its instance can empty and terminate.
   */
  private stopTasksOfEndedJobs(): void {
    const stopping = new Set<string>();
    for (const i of this.store.listIntents({ states: ['pending'], kind: 'stop-task' }))
      if (i.kind === 'stop-task') stopping.add(i.payload.taskId);
    const ended = new Map<string, boolean>();
    for (const task of this.store.listTasks({ states: [...PLACED_TASK_STATES] })) {
      if (stopping.has(task.id) || task.instanceId === undefined) continue;
      let final = ended.get(task.jobId);
      if (final === undefined) {
        final = isFinalJobState((this.store.getJob(task.jobId) as JobRecord).state);
        ended.set(task.jobId, final);
      }
      if (final)
        this.store.recordIntent({
          kind: 'stop-task',
          payload: { taskId: task.id, instanceId: task.instanceId, checkpoint: false },
        });
    }
  }

  private async performStops(): Promise<string[]> {
    const done: string[] = [];
    for (const intent of this.store.listIntents({ states: ['pending'], kind: 'stop-task' })) {
      if (intent.kind !== 'stop-task') continue;
      const { taskId, instanceId, checkpoint } = intent.payload;
      const task = this.store.getTask(taskId);
      const instance = this.store.getInstance(instanceId);
      if (
        task === undefined ||
        instance === undefined ||
        task.instanceId !== instanceId ||
        !PLACED_TASK_STATES.includes(task.state)
      ) {
        this.store.completeIntent(intent.id); // already off the instance
        continue;
      }
      // A task can only be running where the instance ever ran; otherwise there is nothing to stop there.
      const mayRunThere =
        instance.runningAtSeconds !== undefined &&
        (instance.state === 'running' || instance.state === 'draining');
      if (mayRunThere) {
        this.fault('stop:before-call', taskId);
        const outcome = await this.deps.executor.stop({ task, instance, checkpoint });
        this.fault('stop:after-call', taskId);
        if (outcome === 'pending') continue;
      }
      this.store.transaction(() => {
        this.store.completeIntent(intent.id);
        const current = this.store.getTask(taskId) as TaskRecord;
        if (current.instanceId !== instanceId || !PLACED_TASK_STATES.includes(current.state)) return;
        this.store.setTaskState(taskId, 'stopped');
        const job = this.store.getJob(current.jobId) as JobRecord;
        if (isFinalJobState(job.state)) return;
        const next = this.pendingStartsOf(new Set([taskId]))[0];
        if (next?.kind === 'start-task') {
          const target = this.store.getInstance(next.payload.instanceId);
          if (target !== undefined && target.state !== 'terminated' && target.state !== 'terminating')
            this.store.setTaskState(taskId, 'starting', target.id);
          else this.store.failIntent(next.id, `instance ${next.payload.instanceId} is gone`);
        }
        this.settleJob(current.jobId, 'checkpointed and stopped');
      });
      done.push(taskId);
    }
    return done;
  }

  // ---- starts

  private isReady(instance: InstanceRecord): boolean {
    if (instance.state !== 'running') return false;
    const registered = this.deps.executor.workerRegistered;
    return registered === undefined ? true : registered.call(this.deps.executor, instance);
  }

  /**
   * Carry out pending starts whose gate (round/gates.ts `startGate`, the rule the simulated world follows too) is
   * open: the task's own stop is done, no task of its job is still checkpointing, its instance is ready, and the
   * instance has room for it next to what occupies it now.
   */
  private async performStarts(): Promise<string[]> {
    const started: string[] = [];
    const stoppingOf = new Map<string, number>(); // job → tasks still checkpointing
    const used = new Map<string, Resources>(); // instance → what its occupants use
    for (const t of this.store.listTasks({ states: ['running', 'checkpointing'] })) {
      if (t.state === 'checkpointing') stoppingOf.set(t.jobId, (stoppingOf.get(t.jobId) ?? 0) + 1);
      if (t.instanceId !== undefined) this.occupy(used, t, t.instanceId);
    }
    for (const intent of this.store.listIntents({ states: ['pending'], kind: 'start-task' })) {
      if (intent.kind !== 'start-task') continue;
      const { taskId, instanceId } = intent.payload;
      const task = this.store.getTask(taskId);
      const job = task === undefined ? undefined : this.store.getJob(task.jobId);
      const instance = this.store.getInstance(instanceId);
      if (task === undefined || job === undefined || isFinalJobState(job.state)) {
        this.store.failIntent(intent.id, 'the job ended');
        continue;
      }
      if (instance === undefined || instance.state === 'terminated' || instance.state === 'terminating') {
        this.store.transaction(() => {
          this.store.failIntent(intent.id, `instance ${instanceId} is gone`);
          this.releaseTasksOn(instanceId, `instance ${instanceId} is gone`);
        });
        continue;
      }
      const type = this.typeOf(instance.typeName);
      const demand = type === undefined ? undefined : demandOn(this.demandOf(task), type.family);
      if (type === undefined || demand === undefined) continue; // the diff never plans this; nothing can start it
      const occupied = used.get(instanceId) ?? [0, 0, 0];
      const wait = startGate({
        taskStopped: task.state === 'starting' && task.instanceId === instanceId,
        jobTasksStopping: stoppingOf.get(job.id) ?? 0,
        instanceReady: this.isReady(instance),
        freeCapacity: [
          type.capacity[0] - occupied[0],
          type.capacity[1] - occupied[1],
          type.capacity[2] - occupied[2],
        ],
        demand,
      });
      if (wait !== undefined) continue;
      this.fault('start:before-call', taskId);
      await this.deps.executor.start({ task, job, instance });
      this.fault('start:after-call', taskId);
      this.store.transaction(() => {
        this.store.completeIntent(intent.id);
        const current = this.store.getTask(taskId) as TaskRecord;
        const currentJob = this.store.getJob(current.jobId) as JobRecord;
        // Cancelled meanwhile: its stop intent (recorded by the cancel) stops it.
        if (
          isFinalJobState(currentJob.state) ||
          current.state !== 'starting' ||
          current.instanceId !== instanceId
        )
          return;
        this.store.setTaskState(taskId, 'running');
        this.settleJob(current.jobId, 'all tasks running');
      });
      this.occupy(used, task, instanceId);
      started.push(taskId);
    }
    return started;
  }

  private occupy(used: Map<string, Resources>, task: TaskRecord, instanceId: string): void {
    const inst = this.store.getInstance(instanceId);
    const type = inst === undefined ? undefined : this.typeOf(inst.typeName);
    const d = type === undefined ? undefined : demandOn(this.demandOf(task), type.family);
    if (d === undefined) return;
    const u = used.get(instanceId) ?? [0, 0, 0];
    used.set(instanceId, [u[0] + d[0], u[1] + d[1], u[2] + d[2]]);
  }

  private typeOf(typeName: string): InstanceType | undefined {
    return this.deps.catalog.types.find((t) => t.name === typeName);
  }

  // ---- task completion

  private async pollTaskStatuses(): Promise<void> {
    for (const task of this.store.listTasks({ states: ['running'] })) {
      const instance = task.instanceId === undefined ? undefined : this.store.getInstance(task.instanceId);
      if (instance === undefined || instance.state !== 'running') continue;
      const status = await this.deps.executor.status(task, instance);
      if (status !== 'succeeded' && status !== 'failed') continue;
      const ended = this.store.transaction(() => {
        const job = this.store.getJob(task.jobId) as JobRecord;
        if (isFinalJobState(job.state)) return undefined;
        this.store.setTaskState(task.id, status);
        if (status === 'failed') {
          for (const other of this.store.listTasks({ jobId: job.id }))
            if (PLACED_TASK_STATES.includes(other.state))
              this.store.recordIntent({
                kind: 'stop-task',
                payload: { taskId: other.id, instanceId: other.instanceId as string, checkpoint: false },
              });
          const code = this.deps.executor.exitCode?.(task);
          // A declared "unsuccessful at a stage" exit (success-ranked ordering, issue 6) is not a failure.
          if (code !== undefined && (job.spec.unsuccessfulExitCodes ?? []).includes(code))
            return this.store.setJobState(
              job.id,
              'unsuccessful',
              `task ${task.id} exited with ${code}, one of the job's unsuccessfulExitCodes`,
            );
          const why = this.deps.executor.failureReason?.(task);
          return this.store.setJobState(
            job.id,
            'failed',
            `task ${task.id} failed${why === undefined ? '' : `: ${why}`}`,
          );
        }
        const all = this.store.listTasks({ jobId: job.id });
        return all.every((t) => t.state === 'succeeded')
          ? this.store.setJobState(job.id, 'succeeded')
          : undefined;
      });
      if (ended !== undefined) {
        this.deps.onJobEnded?.(ended);
        this.deps.requestRound?.(`job ${ended.id} ${ended.state}`);
      }
    }
  }

  // ---- launches

  private launchBackoff(): LaunchBackoff {
    const value = this.store.getValue(LAUNCH_BACKOFF_KEY) as
      { failures?: unknown; notBeforeSeconds?: unknown } | undefined;
    return {
      failures: typeof value?.failures === 'number' ? value.failures : 0,
      notBeforeSeconds: typeof value?.notBeforeSeconds === 'number' ? value.notBeforeSeconds : 0,
    };
  }

  private async performLaunches(): Promise<{ launched: string[]; deferred: number }> {
    const launched: string[] = [];
    let deferred = 0;
    const backoff = this.launchBackoff();
    for (let intent of this.store.listIntents({ states: ['pending'], kind: 'launch' })) {
      // Each capacity fallback records a new intent for a new instance; follow the chain within this pass.
      for (;;) {
        if (intent.kind !== 'launch') break;
        if (this.now() < backoff.notBeforeSeconds) {
          deferred += 1;
          break;
        }
        const retry = this.launchRetry.get(intent.id);
        if (retry !== undefined && this.now() < retry.notBeforeSeconds) {
          deferred += 1;
          break;
        }
        if (this.launchWait(intent.payload.typeName) !== undefined) {
          deferred += 1; // the fleet in transit must shrink first (round/gates.ts `launchGate`)
          break;
        }
        const outcome = await this.launchOne(intent);
        if (outcome.kind === 'launched') launched.push(outcome.instanceId);
        if (outcome.kind !== 'fallback') break;
        intent = outcome.next;
      }
    }
    return { launched, deferred };
  }

  private async launchOne(
    intent: IntentRecord & { kind: 'launch' },
  ): Promise<
    | { kind: 'launched'; instanceId: string }
    | { kind: 'fallback'; next: IntentRecord }
    | { kind: 'skipped' | 'failed' }
  > {
    const payload: IntentPayload<'launch'> = intent.payload;
    const inst = this.store.getInstance(payload.instanceId);
    if (inst === undefined || inst.state !== 'requested' || inst.cloudId !== undefined) {
      // Launched already (adopted by the sync), or dropped before its launch.
      if (inst?.cloudId !== undefined) this.store.completeIntent(intent.id);
      else this.store.failIntent(intent.id, `instance ${payload.instanceId} is ${inst?.state ?? 'unknown'}`);
      return { kind: 'skipped' };
    }
    this.fault('launch:before-call', inst.id);
    let result;
    try {
      result = await this.provider.launch({
        typeName: inst.typeName,
        idempotencyToken: payload.launchToken,
        clusterName: this.settings.clusterName,
        planId: `round-${intent.round ?? 0}`,
        instanceKey: inst.id,
        availabilityZones: inst.availabilityZone === undefined ? [] : [inst.availabilityZone],
        tags: { ...(this.settings.tags ?? {}) },
      });
    } catch (e) {
      if (e instanceof InjectedCrash) throw e;
      if (e instanceof InsufficientCapacityError || e instanceof QuotaExceededError)
        return this.fallBack(intent, inst, e);
      this.deferLaunch(intent, inst, e);
      return { kind: 'failed' };
    }
    this.fault('launch:after-call', inst.id);
    const cloudId = result.instanceIds[0] as string;
    if (result.instanceIds.length > 1)
      this.log.warn('a launch token matched several instances; the others are handled as orphans', {
        instanceId: inst.id,
        cloudIds: [...result.instanceIds],
      });
    this.store.transaction(() => {
      const current = this.store.getInstance(inst.id) as InstanceRecord;
      this.store.setInstanceState(inst.id, current.state === 'requested' ? 'launching' : current.state, {
        cloudId,
        availabilityZone: result.availabilityZone,
        reason: result.reusedExisting ? 'found by launch token' : `launched (round ${intent.round ?? 0})`,
      });
      this.store.completeIntent(intent.id);
    });
    this.launchRetry.delete(intent.id);
    this.store.deleteValue(refusedKey(inst.id));
    this.log.info(`launched ${inst.typeName} for ${inst.id}`, { cloudId, reused: result.reusedExisting });
    return { kind: 'launched', instanceId: inst.id };
  }

  /** Throttling or another API error: keep the intent pending and retry with capped exponential backoff. */
  private deferLaunch(intent: IntentRecord, inst: InstanceRecord, error: unknown): void {
    const previous = this.launchRetry.get(intent.id)?.attempts ?? 0;
    const attempts = previous + 1;
    const base = this.settings.launchRetryBaseSeconds ?? 10;
    const max = this.settings.launchRetryMaxSeconds ?? 300;
    const delay = Math.min(max, base * 2 ** (attempts - 1));
    this.launchRetry.set(intent.id, { attempts, notBeforeSeconds: this.now() + delay });
    const message = error instanceof Error ? error.message : String(error);
    this.store.appendEvent({
      kind: 'instance.launch-error',
      instanceId: inst.id,
      message: `launch of ${inst.typeName} failed (attempt ${attempts}, retry in ${delay} s): ${message}`,
      data: { attempts, retryInSeconds: delay, error: message },
    });
    this.log.warn(`launch of ${inst.id} failed; retrying in ${delay} s`, { error: message });
  }

  /** The tasks an instance is to host: committed there, or waiting to start there. */
  private plannedTasksOf(instanceId: string): TaskRecord[] {
    const ids = new Set<string>();
    for (const t of this.store.listTasks({ instanceId }))
      if (PLACED_TASK_STATES.includes(t.state)) ids.add(t.id);
    for (const i of this.store.listIntents({ states: ['pending'], kind: 'start-task' }))
      if (i.kind === 'start-task' && i.payload.instanceId === instanceId) ids.add(i.payload.taskId);
    return [...ids].map((id) => this.store.getTask(id)).filter((t): t is TaskRecord => t !== undefined);
  }

  private demandOf(task: TaskRecord): FamilyDemand {
    const job = this.store.getJob(task.jobId) as JobRecord;
    const expanded = expandTasks(job.spec).find((t) => t.index === task.index);
    if (expanded === undefined) throw new Error(`task ${task.id}: no such task in its job's spec`);
    return expanded.template.demand;
  }

  /**
   * No capacity for the type (in any zone the provider tried) or a quota: launch the next-cheapest type that holds
   * the instance's planned tasks instead (industry-anchors.md §(c) 6; Karpenter falls back across offerings), keeping
   * the $/hour cap. The old record is closed and a new one (new token) takes over its tasks; without any fitting
   * type, the tasks return to the queue and the next round plans again.
   */
  private fallBack(
    intent: IntentRecord & { kind: 'launch' },
    inst: InstanceRecord,
    error: InsufficientCapacityError | QuotaExceededError,
  ): { kind: 'fallback'; next: IntentRecord } | { kind: 'failed' } {
    const tasks = this.plannedTasksOf(inst.id);
    const demands = tasks.map((t) => this.demandOf(t));
    const refused = new Set([inst.typeName, ...this.refusedTypesOf(inst.id)]);
    const replacement = chooseReplacementType({
      typesByCost: this.book.byCostAscending,
      demands,
      refused,
      capacityConstrained: (typeName) => this.deps.provider?.isCapacityConstrained?.(typeName) === true,
      launchGate: (type) => this.launchWait(type.name),
    });
    const reason = `${error.message}`;
    if (replacement === undefined) {
      this.store.transaction(() => {
        this.store.failIntent(intent.id, reason);
        this.store.setInstanceState(inst.id, 'terminated', {
          reason: `${reason}; no other type fits its tasks`,
        });
        this.releaseTasksOn(inst.id, `no capacity for ${inst.typeName}`);
      });
      this.log.warn(`no capacity for ${inst.typeName} and no fitting alternative; its tasks wait`, {
        instanceId: inst.id,
      });
      this.deps.requestRound?.('insufficient capacity');
      return { kind: 'failed' };
    }
    const next = this.store.transaction(() => {
      const created = this.store.createInstance({ typeName: replacement.name });
      this.store.failIntent(intent.id, `${reason}; replaced by ${created.id} (${replacement.name})`);
      this.store.setInstanceState(inst.id, 'terminated', {
        reason: `${reason}; replaced by ${created.id} (${replacement.name})`,
      });
      const launch = this.store.recordIntent(
        {
          kind: 'launch',
          payload: { instanceId: created.id, typeName: created.typeName, launchToken: created.launchToken },
        },
        { key: `launch:${created.id}`, ...(intent.round === undefined ? {} : { round: intent.round }) },
      );
      for (const pending of this.store.listIntents({ states: ['pending'], kind: 'start-task' })) {
        if (pending.kind !== 'start-task' || pending.payload.instanceId !== inst.id) continue;
        this.store.failIntent(pending.id, `moved to ${created.id}`);
        this.store.recordIntent(
          { kind: 'start-task', payload: { taskId: pending.payload.taskId, instanceId: created.id } },
          intent.round === undefined ? {} : { round: intent.round },
        );
      }
      for (const task of this.store.listTasks({ instanceId: inst.id }))
        if (task.state === 'starting') this.store.setTaskState(task.id, 'starting', created.id);
      this.store.setValue(refusedKey(created.id), [...refused]);
      this.store.appendEvent({
        kind: 'instance.fallback',
        instanceId: created.id,
        message: `${inst.typeName} refused (${error.code ?? 'capacity'}); launching ${replacement.name} for ${tasks.length} task(s) instead`,
        data: { from: inst.id, fromType: inst.typeName, toType: replacement.name, refused: [...refused] },
      });
      return launch;
    });
    this.store.deleteValue(refusedKey(inst.id));
    this.log.warn(`no capacity for ${inst.typeName}; trying ${replacement.name}`, {
      from: inst.id,
      to: next.payload.instanceId,
    });
    return { kind: 'fallback', next };
  }

  /**
   * The launch gate for one more instance of `typeName`: every instance launched and not yet terminated counts
   * against the caps until it is gone (round/gates.ts `launchGate`, as in the simulated world).
   */
  private launchWait(typeName: string): GateWait {
    const type = this.typeOf(typeName);
    if (type === undefined) return undefined; // the provider refuses an unknown type itself
    const inTransit: InstanceType[] = [];
    for (const i of this.store.listInstances({ states: [...LIVE_INSTANCE_STATES] })) {
      if (i.cloudId === undefined) continue; // not launched (yet, or ever)
      const t = this.typeOf(i.typeName);
      if (t !== undefined) inTransit.push(t);
    }
    return launchGate(type, inTransit, this.settings.caps);
  }

  private refusedTypesOf(instanceId: string): string[] {
    const value = this.store.getValue(refusedKey(instanceId));
    return Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : [];
  }

  // ---- worker registration

  /**
   * An instance running in EC2 whose worker has not registered within the timeout is replaced: drained (then
   * terminated), its tasks returned to the queue, and launches paused with doubling backoff so that a broken AMI or
   * bootstrap cannot launch instances in a loop. A registration resets the backoff.
   */
  private checkRegistrations(): string[] {
    const registered = this.deps.executor.workerRegistered;
    if (registered === undefined) return [];
    const replaced: string[] = [];
    const now = this.now();
    for (const inst of this.store.listInstances({ states: ['running'] })) {
      if (registered.call(this.deps.executor, inst)) {
        if (this.launchBackoff().failures > 0)
          this.store.setValue(LAUNCH_BACKOFF_KEY, { failures: 0, notBeforeSeconds: 0 });
        continue;
      }
      const since = inst.runningAtSeconds ?? inst.updatedAtSeconds;
      if (now - since < this.settings.registrationTimeoutSeconds) continue;
      const previous = this.launchBackoff();
      const failures = previous.failures + 1;
      const delay = Math.min(
        this.settings.registrationBackoffMaxSeconds,
        this.settings.registrationBackoffBaseSeconds * 2 ** (failures - 1),
      );
      const reason = `worker did not register within ${this.settings.registrationTimeoutSeconds} s`;
      this.store.transaction(() => {
        this.store.setInstanceState(inst.id, 'draining', { reason });
        this.releaseTasksOn(inst.id, reason);
        this.store.setValue(LAUNCH_BACKOFF_KEY, { failures, notBeforeSeconds: now + delay } satisfies Record<
          string,
          JsonValue
        >);
        this.store.appendEvent({
          kind: 'instance.registration-timeout',
          instanceId: inst.id,
          message: `${reason}; replacing it, launches paused for ${delay} s (failure ${failures} in a row)`,
          data: { failures, backoffSeconds: delay },
        });
      });
      this.log.warn(`instance ${inst.id}: ${reason}; launches paused ${delay} s`, { failures });
      replaced.push(inst.id);
    }
    if (replaced.length > 0) this.deps.requestRound?.('worker registration timeout');
    return replaced;
  }

  // ---- terminations

  private async performTerminations(): Promise<string[]> {
    const terminated: string[] = [];
    const occupants = new Map<string, number>();
    const aimedAt = new Map<string, number>();
    for (const t of this.store.listTasks({ states: [...PLACED_TASK_STATES] }))
      if (t.instanceId !== undefined) occupants.set(t.instanceId, (occupants.get(t.instanceId) ?? 0) + 1);
    for (const i of this.store.listIntents({ states: ['pending'], kind: 'start-task' }))
      if (i.kind === 'start-task')
        aimedAt.set(i.payload.instanceId, (aimedAt.get(i.payload.instanceId) ?? 0) + 1);
    for (const inst of this.store.listInstances({ states: ['draining', 'terminating'] })) {
      if (
        inst.state === 'draining' &&
        terminateGate(occupants.get(inst.id) ?? 0, aimedAt.get(inst.id) ?? 0) !== undefined
      )
        continue;
      const cloudId = inst.cloudId;
      const intent =
        this.pendingIntentsFor('terminate', inst.id)[0] ??
        this.store.transaction(() => {
          for (const launch of this.pendingIntentsFor('launch', inst.id))
            this.store.failIntent(launch.id, 'not needed any more');
          const recorded = this.store.recordIntent({
            kind: 'terminate',
            payload: { instanceId: inst.id, ...(cloudId === undefined ? {} : { cloudId }) },
          });
          this.store.setInstanceState(inst.id, 'terminating', { reason: inst.reason });
          return recorded;
        });
      const target = intent.kind === 'terminate' ? (intent.payload.cloudId ?? cloudId) : cloudId;
      this.fault('terminate:before-call', inst.id);
      if (target !== undefined) {
        try {
          await this.provider.terminate([target]);
        } catch (e) {
          if (e instanceof InjectedCrash) throw e;
          const message = e instanceof Error ? e.message : String(e);
          this.log.warn(`terminate of ${inst.id} failed; retrying next pass`, { error: message });
          this.store.appendEvent({
            kind: 'instance.terminate-error',
            instanceId: inst.id,
            message,
            data: { error: message },
          });
          continue;
        }
      }
      this.fault('terminate:after-call', inst.id);
      this.store.transaction(() => {
        this.store.setInstanceState(inst.id, 'terminated', { reason: inst.reason });
        this.store.completeIntent(intent.id);
      });
      terminated.push(inst.id);
    }
    return terminated;
  }
}

function refusedKey(instanceId: string): string {
  return `controller.refusedTypes.${instanceId}`;
}
