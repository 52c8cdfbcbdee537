import type { Catalog } from '../core/catalog.js';
import type { Caps } from '../core/model.js';
import { diffConfiguration, type Action, type ConfigurationDiff } from '../scheduler/actions.js';
import { EvaScheduler } from '../scheduler/eva.js';
import type { Configuration, DecisionRecord, Scheduler, ThroughputObservation } from '../scheduler/types.js';
import type { CloudProvider } from '../cloud/provider.js';
import type { ObjectStore } from '../storage/object-store.js';
import { taskLogPrefix } from '../worker/controller-client.js';
import { SystemClock, type Clock } from './clock.js';
import type { ControllerConfig, OrphanPolicy } from './config.js';
import { billedInstances, computeCostReport, type DetailedCostReport } from './cost-accounting.js';
import type { JobSpec } from './job-spec.js';
import {
  CloudOnlyExecutor,
  InjectedCrash,
  Reconciler,
  silentLogger,
  type ControllerLogger,
  type FaultInjector,
  type ProgressSummary,
  type SyncSummary,
  type TaskExecutor,
} from './reconciler.js';
import { buildReportDocument, writeReportFiles, type WrittenReport } from './reports.js';
import type { ClusterView, ControllerService, WhyRecord } from './service.js';
import { buildSnapshot, readSnapshotInputs } from './snapshot.js';
import { isFinalJobState, PLACED_TASK_STATES } from './state/lifecycle.js';
import {
  UnknownRecordError,
  type InstanceRecord,
  type JobRecord,
  type JsonValue,
  type RoundRecord,
  type StateStore,
} from './state-store.js';

/**
 * The controller's master loop (ARCHITECTURE.md "Each round"): snapshot the store → Eva plans → record the round and
 * its decision → diff with scheduler/actions.ts → intents → effects (reconciler.ts). Rounds run every
 * `roundSeconds` (default 300 s, Eva's period) and early on submissions, cancels, completions and drains; between
 * rounds a lighter pass every `pollSeconds` reconciles with EC2 and carries out effects whose gates opened (a task
 * starts once its instance runs, an instance terminates once empty).
 *
 * Everything the loop does happens in one sequence (no two passes overlap), while the ControllerService methods the
 * API calls only write the store synchronously and wake the loop. The scheduler's learned state (co-location table,
 * event history) is saved in the store after every round and loaded at start.
 */

export const SCHEDULER_STATE_KEY = 'scheduler.eva';

export interface ControllerSettings {
  readonly clusterName: string;
  readonly roundSeconds: number;
  readonly pollSeconds: number;
  readonly caps: Caps;
  readonly dryRun: boolean;
  readonly orphanPolicy: OrphanPolicy;
  readonly vanishGraceSeconds: number;
  readonly registrationTimeoutSeconds: number;
  readonly registrationBackoffBaseSeconds: number;
  readonly registrationBackoffMaxSeconds: number;
  readonly reportEverySeconds: number;
  readonly tags?: Readonly<Record<string, string>>;
  /** Early rounds are at least this far apart, so a burst of submissions is planned together. */
  readonly minRoundGapSeconds?: number;
  /** Rounds (plans and decisions) kept in the store. */
  readonly roundsKept?: number;
}

export function settingsFromConfig(config: ControllerConfig): ControllerSettings {
  return {
    clusterName: config.cluster,
    roundSeconds: config.roundSeconds,
    pollSeconds: config.pollSeconds,
    caps: config.caps,
    dryRun: config.dryRun,
    orphanPolicy: config.orphans,
    vanishGraceSeconds: config.vanishGraceSeconds,
    registrationTimeoutSeconds: config.workerRegistration.timeoutSeconds,
    registrationBackoffBaseSeconds: config.workerRegistration.backoffBaseSeconds,
    registrationBackoffMaxSeconds: config.workerRegistration.backoffMaxSeconds,
    reportEverySeconds: config.reportEverySeconds,
    tags: config.ec2.tags,
  };
}

/** A scheduler whose learned state survives restarts (Eva: co-location table, event history). */
export type ControllerScheduler = Scheduler & {
  exportState?(): unknown;
  importState?(state: never): void;
};

/** Counters the loop feeds (the API's Prometheus ControllerMetrics has this shape). */
export interface RoundMetrics {
  observeRound(durationSeconds: number): void;
  countMigrations(jobs?: number): void;
  countCapHit(cap: string, times?: number): void;
}

export interface ControllerDeps {
  readonly store: StateStore;
  readonly catalog: Catalog;
  /** Required unless `settings.dryRun`; a dry run never touches it. */
  readonly provider?: CloudProvider | undefined;
  readonly executor?: TaskExecutor;
  readonly clock?: Clock;
  /** Where cost reports go; without one, reports are only computed on demand. */
  readonly objectStore?: ObjectStore | undefined;
  readonly settings: ControllerSettings;
  readonly faults?: FaultInjector | undefined;
  readonly logger?: ControllerLogger | undefined;
  /** Defaults to Eva with the configured caps. */
  readonly scheduler?: ControllerScheduler;
  /**
   * Builds the scheduler for a repriced catalog (applyCatalog). Defaults to Eva with the configured caps when
   * `scheduler` is not given; with an injected scheduler and no factory, a new catalog leaves the scheduler as it is.
   */
  readonly schedulerFor?: ((catalog: Catalog) => ControllerScheduler) | undefined;
  readonly metrics?: RoundMetrics | undefined;
  /** Workers (worker-executor.ts): throughput observations, and silent workers whose instance is replaced. */
  readonly workers?: WorkerFleet | undefined;
}

/** What the loop asks of the worker side beyond TaskExecutor (implemented by WorkerExecutor). */
export interface WorkerFleet {
  takeObservations(): ThroughputObservation[];
  staleInstances(): InstanceRecord[];
  markLost(instanceId: string): void;
}

export interface RoundOutcome {
  /** Undefined when nothing was planned (no jobs and no instances). */
  readonly round?: number | undefined;
  readonly decision?: DecisionRecord | undefined;
  readonly actions: readonly Action[];
  /** Plan ids of new instances → their records. */
  readonly launched: ReadonlyMap<string, string>;
  /** Why the plan was not carried out (dry run, a cap the plan broke). */
  readonly notApplied?: string | undefined;
  readonly sync?: SyncSummary | undefined;
  readonly progress?: ProgressSummary | undefined;
}

export class Controller implements ControllerService {
  readonly store: StateStore;
  /** Replaced only by applyCatalog (price refresh), between rounds. */
  catalog: Catalog;
  readonly clock: Clock;
  readonly settings: ControllerSettings;
  /** Replaced only by applyCatalog (price refresh), between rounds. */
  scheduler: ControllerScheduler;
  private readonly reconciler: Reconciler;
  private readonly log: ControllerLogger;
  private readonly objectStore: ObjectStore | undefined;
  private priceOf: ReadonlyMap<string, number>;
  private readonly schedulerFor: ((catalog: Catalog) => ControllerScheduler) | undefined;
  private readonly metrics: RoundMetrics | undefined;
  private readonly workers: WorkerFleet | undefined;
  private readonly provider: CloudProvider | undefined;

  /** The loop's sequence: every pass chains here so none overlap (also when tests call them directly). */
  private chain: Promise<unknown> = Promise.resolve();
  private running = false;
  private loopDone: Promise<void> | undefined;
  private wake = new AbortController();
  private roundRequestedBecause: string | undefined;
  private lastRoundAtSeconds = Number.NEGATIVE_INFINITY;
  private readonly reportReasons: string[] = [];
  private nextReportAtSeconds: number;
  private schedulerLoaded = false;

  constructor(deps: ControllerDeps) {
    if (!deps.settings.dryRun && deps.provider === undefined)
      throw new Error('a cloud provider is required unless in dry-run');
    this.store = deps.store;
    this.catalog = deps.catalog;
    this.clock = deps.clock ?? new SystemClock();
    this.settings = deps.settings;
    this.log = deps.logger ?? silentLogger;
    this.objectStore = deps.objectStore;
    this.metrics = deps.metrics;
    this.workers = deps.workers;
    this.provider = deps.settings.dryRun ? undefined : deps.provider;
    this.schedulerFor =
      deps.schedulerFor ??
      (deps.scheduler === undefined
        ? (catalog) => new EvaScheduler(catalog, { caps: deps.settings.caps })
        : undefined);
    this.scheduler = deps.scheduler ?? new EvaScheduler(deps.catalog, { caps: deps.settings.caps });
    this.priceOf = new Map(deps.catalog.types.map((t) => [t.name, t.costPerHour]));
    this.nextReportAtSeconds = this.clock.nowSeconds() + deps.settings.reportEverySeconds;
    this.reconciler = new Reconciler({
      store: deps.store,
      catalog: deps.catalog,
      // Dry run: the reconciler gets no provider, so no code path can reach the cloud.
      provider: deps.settings.dryRun ? undefined : deps.provider,
      executor: deps.executor ?? new CloudOnlyExecutor(),
      clock: this.clock,
      faults: deps.faults,
      logger: this.log,
      settings: {
        clusterName: deps.settings.clusterName,
        orphanPolicy: deps.settings.orphanPolicy,
        vanishGraceSeconds: deps.settings.vanishGraceSeconds,
        registrationTimeoutSeconds: deps.settings.registrationTimeoutSeconds,
        registrationBackoffBaseSeconds: deps.settings.registrationBackoffBaseSeconds,
        registrationBackoffMaxSeconds: deps.settings.registrationBackoffMaxSeconds,
        maxCostPerHour: deps.settings.caps.maxCostPerHour,
        tags: deps.settings.tags ?? {},
      },
      onJobEnded: (job) => this.jobEnded(job),
      requestRound: (reason) => this.requestRound(reason),
    });
  }

  // -------------------------------------------------------------------------------------------------------------
  // Lifecycle

  /** Load the scheduler's state, reconcile with the cloud (crash recovery), then run the loop in the background. */
  async start(): Promise<void> {
    if (this.running) return;
    await this.recover();
    this.running = true;
    this.roundRequestedBecause ??= 'start';
    this.loopDone = this.loop();
  }

  /** Stop after the current pass; resolves when the loop has ended. */
  async stop(): Promise<void> {
    this.running = false;
    this.wake.abort();
    await this.loopDone;
    await this.chain.catch(() => undefined);
  }

  /** Crash recovery: pending intents are re-checked against the cloud and carried out (or found done). */
  async recover(): Promise<{ sync?: SyncSummary; progress?: ProgressSummary }> {
    this.loadSchedulerState();
    if (this.settings.dryRun) return {};
    return this.serial(async () => {
      const pending = this.store.listIntents({ states: ['pending'] }).length;
      const sync = await this.reconciler.syncWithCloud();
      const progress = await this.reconciler.progress();
      this.log.info('recovered state', {
        pendingIntents: pending,
        adopted: sync.adopted.length,
        orphans: sync.orphans.length,
        vanished: sync.vanished.length,
      });
      return { sync, progress };
    });
  }

  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.chain.then(fn, fn);
    this.chain = next.catch(() => undefined);
    return next;
  }

  private async loop(): Promise<void> {
    while (this.running) {
      const now = this.clock.nowSeconds();
      const roundDue = now >= this.lastRoundAtSeconds + this.settings.roundSeconds;
      const earlyAllowed = now >= this.lastRoundAtSeconds + this.minRoundGap();
      try {
        if (roundDue || (this.roundRequestedBecause !== undefined && earlyAllowed))
          await this.runRound(this.roundRequestedBecause ?? 'period');
        else await this.reconcile();
        await this.writeDueReports();
      } catch (e) {
        if (e instanceof InjectedCrash) throw e;
        const message = e instanceof Error ? (e.stack ?? e.message) : String(e);
        this.log.error('controller pass failed; continuing', { error: message });
        this.safeEvent('controller.error', message);
      }
      if (!this.running) break;
      if (this.wake.signal.aborted) this.wake = new AbortController();
      const after = this.clock.nowSeconds();
      const nextRound =
        this.roundRequestedBecause !== undefined
          ? this.lastRoundAtSeconds + this.minRoundGap()
          : this.lastRoundAtSeconds + this.settings.roundSeconds;
      const wait = Math.max(
        0,
        Math.min(nextRound, after + this.settings.pollSeconds, this.nextReportAtSeconds) - after,
      );
      if (wait > 0) await this.clock.sleep(wait, this.wake.signal);
    }
  }

  private minRoundGap(): number {
    return this.settings.minRoundGapSeconds ?? Math.min(this.settings.roundSeconds, 2);
  }

  private safeEvent(kind: string, message: string): void {
    try {
      this.store.appendEvent({ kind, message: message.slice(0, 4000) });
    } catch {
      // the store itself failing is logged already
    }
  }

  // -------------------------------------------------------------------------------------------------------------
  // Passes

  /** Reconcile with the cloud and carry out effects whose gates opened (between rounds). */
  reconcile(): Promise<{ sync?: SyncSummary; progress?: ProgressSummary }> {
    return this.serial(async () => {
      if (this.settings.dryRun) return {};
      await this.replaceSilentWorkers();
      const sync = await this.reconciler.syncWithCloud();
      const progress = await this.reconciler.progress();
      return { sync, progress };
    });
  }

  /** One scheduling round (see the class comment). */
  runRound(reason = 'requested'): Promise<RoundOutcome> {
    return this.serial(async () => {
      const startedMs = performance.now();
      this.roundRequestedBecause = undefined;
      this.lastRoundAtSeconds = this.clock.nowSeconds();
      let sync: SyncSummary | undefined;
      if (!this.settings.dryRun) {
        await this.replaceSilentWorkers();
        sync = await this.reconciler.syncWithCloud();
        await this.reconciler.progress();
      }
      const planned = this.planAndRecord(reason);
      const progress = this.settings.dryRun ? undefined : await this.reconciler.progress();
      if (planned.round !== undefined) this.metrics?.observeRound((performance.now() - startedMs) / 1000);
      return { ...planned, sync, progress };
    });
  }

  /** Snapshot → plan → record → diff → intents, synchronously (no other write can interleave). */
  private planAndRecord(reason: string): Omit<RoundOutcome, 'sync' | 'progress'> {
    this.loadSchedulerState();
    const now = this.clock.nowSeconds();
    const snapshot = buildSnapshot(readSnapshotInputs(this.store, now));
    if (snapshot.jobs.length === 0 && snapshot.instances.length === 0)
      return { actions: [], launched: new Map() };
    // Normalized throughputs reported by workers since the last round (worker-executor.ts) teach the co-location table.
    this.scheduler.observe(snapshot, this.workers?.takeObservations() ?? []);
    const plan = this.scheduler.plan(snapshot);
    const diff = diffConfiguration(snapshot, plan.configuration, this.catalog, {
      scheduler: this.scheduler.name,
    });
    const broken = this.capViolation(plan.configuration, diff);
    for (const w of plan.decision.waiting) this.metrics?.countCapHit(w.cap);
    let outcome: Omit<RoundOutcome, 'sync' | 'progress'>;
    if (this.settings.dryRun || broken !== undefined) {
      const notApplied = broken === undefined ? 'dry run' : `plan breaks a cap: ${broken}`;
      const round = this.store.transaction(() => {
        const recorded = this.store.recordRound({
          configuration: plan.configuration,
          decision: plan.decision,
        });
        this.store.appendEvent({
          kind: broken === undefined ? 'round.dry-run' : 'round.rejected',
          message: `round ${recorded.round} (${reason}): ${notApplied}; would do ${describeActions(diff)}`,
          data: { round: recorded.round, actions: diff.actions.map(actionJson) },
        });
        return recorded;
      });
      if (broken !== undefined) {
        this.log.error(`round ${round.round}: ${notApplied}`);
        this.metrics?.countCapHit(broken.split(':')[0] ?? 'cap');
      }
      outcome = {
        round: round.round,
        decision: plan.decision,
        actions: diff.actions,
        launched: new Map(),
        notApplied,
      };
    } else {
      const applied = this.reconciler.applyPlan(plan, diff);
      this.metrics?.countMigrations(diff.movedJobIds.length);
      this.log.info(`round ${applied.round} (${reason}): ${plan.decision.chosen}; ${describeActions(diff)}`, {
        costPerHour: plan.decision.candidates.find((c) => c.name === plan.decision.chosen)?.costPerHour,
      });
      outcome = {
        round: applied.round,
        decision: plan.decision,
        actions: diff.actions,
        launched: applied.launched,
      };
    }
    this.saveSchedulerState();
    const kept = this.settings.roundsKept ?? 5000;
    if (outcome.round !== undefined && outcome.round % 100 === 0) this.store.pruneRounds(kept);
    return outcome;
  }

  /**
   * The safety rail under the scheduler (ARCHITECTURE.md "Safety rails"): a plan over a hard cap is not carried out,
   * whatever produced it.
   */
  private capViolation(configuration: Configuration, diff: ConfigurationDiff): string | undefined {
    const caps = this.settings.caps;
    const cost = configuration.instances.reduce((s, i) => s + (this.priceOf.get(i.typeName) ?? 0), 0);
    if (caps.maxCostPerHour !== undefined && cost > caps.maxCostPerHour + 1e-9)
      return `maxCostPerHour: $${cost.toFixed(2)}/h over the $${caps.maxCostPerHour}/h cap`;
    if (caps.maxInstances !== undefined && configuration.instances.length > caps.maxInstances)
      return `maxInstances: ${configuration.instances.length} instances over the cap of ${caps.maxInstances}`;
    if (caps.maxMigrationsPerRound !== undefined && diff.movedJobIds.length > caps.maxMigrationsPerRound)
      return `maxMigrationsPerRound: ${diff.movedJobIds.length} migrations over the cap of ${caps.maxMigrationsPerRound}`;
    return undefined;
  }

  /**
   * Use a repriced catalog from the next round on (price refresh, src/controller/price-refresh.ts). Eva's PriceBook is
   * built from the catalog at construction, so a new scheduler instance is built for it and the learned state
   * (co-location table, event history, known jobs) is carried over with exportState/importState; its plan cache is
   * not, so the next round plans afresh at the new prices. Runs in the loop's sequence, never inside a round. The
   * reconciler keeps the catalog it started with (its cost attribution and launch-time cost check use those prices).
   */
  applyCatalog(catalog: Catalog): Promise<void> {
    return this.serial(() => {
      this.catalog = catalog;
      this.priceOf = new Map(catalog.types.map((t) => [t.name, t.costPerHour]));
      if (this.schedulerFor === undefined) {
        this.log.warn('new catalog prices do not reach the injected scheduler (no schedulerFor factory)');
        return Promise.resolve();
      }
      const next = this.schedulerFor(catalog);
      // Before the first round the saved state is still in the store: the new scheduler loads it then.
      const learned = this.schedulerLoaded ? this.scheduler.exportState?.() : undefined;
      if (learned !== undefined && next.importState !== undefined)
        next.importState.call(next, JSON.parse(JSON.stringify(learned)) as never);
      this.scheduler = next;
      return Promise.resolve();
    });
  }

  private loadSchedulerState(): void {
    if (this.schedulerLoaded) return;
    this.schedulerLoaded = true;
    const saved = this.store.getValue(SCHEDULER_STATE_KEY);
    const importState = this.scheduler.importState;
    if (saved === undefined || importState === undefined) return;
    try {
      importState.call(this.scheduler, saved as never);
    } catch (e) {
      this.log.warn('saved scheduler state is unreadable; starting from defaults', {
        error: (e as Error).message,
      });
    }
  }

  private saveSchedulerState(): void {
    const exported = this.scheduler.exportState?.();
    if (exported === undefined) return;
    this.store.setValue(SCHEDULER_STATE_KEY, JSON.parse(JSON.stringify(exported)) as JsonValue);
  }

  /**
   * A registered worker that stopped heartbeating (issue "Worker agent": its tasks are rescheduled from their last
   * checkpoints and its instance replaced): the instance is terminated through the provider, so the next sync finds
   * it gone and the reconciler releases its tasks to the queue, exactly as for an instance EC2 lost.
   */
  private async replaceSilentWorkers(): Promise<void> {
    if (this.workers === undefined || this.provider === undefined) return;
    for (const inst of this.workers.staleInstances()) {
      this.workers.markLost(inst.id);
      this.store.appendEvent({
        kind: 'instance.worker-lost',
        instanceId: inst.id,
        message: `worker of ${inst.id} stopped heartbeating; terminating the instance and rescheduling its tasks`,
      });
      this.log.warn(`worker of ${inst.id} stopped heartbeating; replacing the instance`, {
        cloudId: inst.cloudId,
      });
      if (inst.cloudId !== undefined) {
        try {
          await this.provider.terminate([inst.cloudId]);
        } catch (e) {
          this.log.error(`cannot terminate ${inst.id}`, { error: (e as Error).message });
        }
      }
    }
  }

  /**
   * API: a job's task output, from the log objects workers upload (`logs/<job>/…`, one per run of a task, in start
   * order) while tasks run and when they stop or finish.
   */
  async jobLogs(jobId: string): Promise<string> {
    if (this.objectStore === undefined)
      throw new Error('no object store configured: task logs are kept there');
    const keys: string[] = [];
    for await (const info of this.objectStore.list(taskLogPrefix(jobId))) keys.push(info.key);
    const parts: string[] = [];
    for (const key of keys.sort()) {
      const text = (await this.objectStore.getBuffer(key)).toString('utf8');
      parts.push(
        `==> ${key.slice(taskLogPrefix(jobId).length)} <==\n${text}${text.endsWith('\n') || text === '' ? '' : '\n'}`,
      );
    }
    return parts.join('');
  }

  // -------------------------------------------------------------------------------------------------------------
  // Reports

  private jobEnded(job: JobRecord): void {
    this.reportReasons.push(`${job.id} ${job.state}`);
    this.requestRound(`${job.id} ${job.state}`);
  }

  private async writeDueReports(): Promise<void> {
    if (this.objectStore === undefined) return;
    const now = this.clock.nowSeconds();
    const reasons = this.reportReasons.splice(0);
    if (now >= this.nextReportAtSeconds) {
      reasons.push('hourly');
      this.nextReportAtSeconds = now + this.settings.reportEverySeconds;
    }
    if (reasons.length === 0) return;
    try {
      await this.writeCostReport(reasons.join(', '));
    } catch (e) {
      this.log.error('cannot write the cost report', { error: (e as Error).message });
      this.safeEvent('report.error', (e as Error).message);
    }
  }

  /** Write the cost report (JSON, CSV, HTML) to the object store now. */
  async writeCostReport(reason = 'on demand'): Promise<WrittenReport> {
    if (this.objectStore === undefined) throw new Error('no object store configured for reports');
    const now = this.clock.nowSeconds();
    const report = this.costs(0);
    const doc = buildReportDocument({
      cluster: this.settings.clusterName,
      reason,
      report,
      instances: billedInstances(this.store.listInstances(), this.catalog),
    });
    const keys = await writeReportFiles(this.objectStore, doc);
    this.store.appendEvent({
      kind: 'report.written',
      message: `cost report (${reason}) written to ${locationOf(this.objectStore, keys.json)}`,
      data: { ...keys, reason, totalCost: report.totalCost, atSeconds: now },
    });
    return keys;
  }

  /** API: write a report now; answers where the JSON went (`s3://bucket/reports/costs-….json`). */
  async writeReport(): Promise<string> {
    if (this.objectStore === undefined) throw new Error('no object store configured for reports');
    const keys = await this.writeCostReport('on demand');
    return locationOf(this.objectStore, keys.json);
  }

  /**
   * API: keep an uploaded Docker build context in the object store, content-addressed (the same archive is stored
   * once); answers the reference a job spec's `build.context` carries for workers to fetch.
   */
  async storeContext(
    archive: Buffer,
    info: { readonly sha256: string; readonly encoding: 'tar' | 'gzip'; readonly team: string | undefined },
  ): Promise<string> {
    if (this.objectStore === undefined) throw new Error('no object store configured for build contexts');
    if (!/^[0-9a-f]{64}$/.test(info.sha256))
      throw new Error('a build context is named by its sha256 (64 hex digits)');
    const key = `contexts/${info.sha256}.${info.encoding === 'gzip' ? 'tar.gz' : 'tar'}`;
    if (!(await this.objectStore.exists(key))) await this.objectStore.put(key, archive);
    this.store.appendEvent({
      kind: 'context.stored',
      message: `build context ${info.sha256.slice(0, 12)} (${archive.length} bytes) from ${info.team ?? 'admin'}`,
      data: { key, sizeBytes: archive.length, team: info.team ?? null },
    });
    return locationOf(this.objectStore, key);
  }

  // -------------------------------------------------------------------------------------------------------------
  // ControllerService

  submit(spec: JobSpec, team: string): JobRecord {
    const job = this.store.submitJob(spec.team === team ? spec : { ...spec, team });
    this.requestRound(`${job.id} submitted`);
    return job;
  }

  cancel(jobId: string): JobRecord {
    let changed = false;
    const job = this.store.transaction(() => {
      const current = this.store.getJob(jobId);
      if (current === undefined) throw new UnknownRecordError('job', jobId);
      if (isFinalJobState(current.state)) return current;
      changed = true;
      const cancelled = this.store.setJobState(jobId, 'cancelled', 'cancelled by request');
      const tasks = this.store.listTasks({ jobId });
      const taskIds = new Set(tasks.map((t) => t.id));
      const pending = this.store.listIntents({ states: ['pending'] });
      const stopping = new Set<string>();
      for (const intent of pending) {
        if (intent.kind === 'start-task' && taskIds.has(intent.payload.taskId))
          this.store.failIntent(intent.id, 'job cancelled');
        if (intent.kind === 'stop-task' && taskIds.has(intent.payload.taskId))
          stopping.add(intent.payload.taskId);
      }
      for (const task of tasks)
        if (
          PLACED_TASK_STATES.includes(task.state) &&
          task.instanceId !== undefined &&
          !stopping.has(task.id)
        )
          this.store.recordIntent({
            kind: 'stop-task',
            payload: { taskId: task.id, instanceId: task.instanceId, checkpoint: false },
          });
      return cancelled;
    });
    if (changed) this.jobEnded(job);
    return job;
  }

  drain(instanceId: string): InstanceRecord {
    const inst = this.store.getInstance(instanceId) ?? this.store.findInstanceByCloudId(instanceId);
    if (inst === undefined) throw new UnknownRecordError('instance', instanceId);
    if (inst.state !== 'requested' && inst.state !== 'launching' && inst.state !== 'running') return inst;
    const drained = this.store.setInstanceState(inst.id, 'draining', { reason: 'drained by request' });
    this.requestRound(`${inst.id} drained`);
    return drained;
  }

  cluster(): ClusterView {
    const instances = this.store.listInstances({
      states: ['requested', 'launching', 'running', 'draining', 'terminating'],
    });
    const tasks = this.store.listTasks({ states: [...PLACED_TASK_STATES] });
    const onInstance = new Map<string, string[]>();
    for (const t of tasks) {
      if (t.instanceId === undefined) continue;
      onInstance.set(t.instanceId, [...(onInstance.get(t.instanceId) ?? []), t.id]);
    }
    let costPerHour = 0;
    const views = instances.map((i) => {
      const price = this.priceOf.get(i.typeName) ?? 0;
      if (i.launchedAtSeconds !== undefined) costPerHour += price;
      return { ...i, costPerHour: price, taskIds: onInstance.get(i.id) ?? [] };
    });
    return { instances: views, tasks, costPerHour };
  }

  why(jobId: string, limit = 10): WhyRecord[] {
    const job = this.store.getJob(jobId);
    if (job === undefined) throw new UnknownRecordError('job', jobId);
    const taskIds = new Set(this.store.listTasks({ jobId }).map((t) => t.id));
    // The rounds that moved the job, as the controller carried them out (the diff, not only the scheduler's view).
    const movedIn = new Set<number>();
    for (const e of this.store.listEvents({ kind: 'round.applied', afterSeq: 0 })) {
      const data = e.data as { round?: unknown; moved?: unknown } | undefined;
      if (typeof data?.round === 'number' && Array.isArray(data.moved) && data.moved.includes(jobId))
        movedIn.add(data.round);
    }
    const out: WhyRecord[] = [];
    for (const round of this.store.listRounds(Math.max(limit * 20, 200))) {
      if (out.length >= limit) break;
      if (round.atSeconds < job.submittedAtSeconds) break;
      if (job.finishedAtSeconds !== undefined && round.atSeconds > job.finishedAtSeconds) continue;
      const summary = summarizeForJob(round, jobId, taskIds, movedIn.has(round.round));
      if (summary !== undefined)
        out.push({ round: round.round, atSeconds: round.atSeconds, summary, decision: round.decision });
    }
    return out;
  }

  costs(sinceSeconds = 0): DetailedCostReport {
    return computeCostReport(this.store, this.catalog, this.clock.nowSeconds(), sinceSeconds);
  }

  requestRound(reason: string): void {
    this.roundRequestedBecause ??= reason;
    this.wake.abort();
  }
}

/** A round as one line for one job ("waiting: cap maxCostPerHour", "moved to inst-4 (c7i.xlarge, new)", …). */
export function summarizeForJob(
  round: RoundRecord,
  jobId: string,
  taskIds: ReadonlySet<string>,
  moved = false,
): string | undefined {
  const { decision, configuration } = round;
  const parts: string[] = [];
  const waiting = decision.waiting.find((w) => w.jobId === jobId);
  if (waiting !== undefined) parts.push(`waiting: cap ${waiting.cap}`);
  const pinned = decision.pinned.find((p) => p.jobId === jobId);
  if (pinned !== undefined) parts.push(`kept in place: ${pinned.why}`);
  const placed = configuration.instances.filter((i) => i.taskIds.some((t) => taskIds.has(t)));
  const chosen = decision.candidates.find((c) => c.name === decision.chosen);
  if (placed.length > 0) {
    const where = placed.map((i) => `${i.id} (${i.typeName}${i.isNew ? ', new' : ''})`).join(', ');
    parts.push(
      moved || chosen?.movedJobs.includes(jobId) === true ? `moved to ${where}` : `placed on ${where}`,
    );
  } else if (waiting === undefined) parts.push('not placed by this plan');
  if (parts.length === 0) return undefined;
  return `${parts.join('; ')} — plan ${decision.chosen}: ${decision.reason}`;
}

function locationOf(store: ObjectStore, key: string): string {
  return store.location.endsWith('/') ? `${store.location}${key}` : `${store.location}/${key}`;
}

function describeActions(diff: ConfigurationDiff): string {
  const count = (kind: Action['kind']): number => diff.actions.filter((a) => a.kind === kind).length;
  return `${count('launch-instance')} launch(es), ${count('start-task')} task start(s), ${count('checkpoint-stop')} checkpoint-stop(s), ${count('terminate-instance')} termination(s)`;
}

function actionJson(action: Action): JsonValue {
  return JSON.parse(JSON.stringify(action)) as JsonValue;
}
