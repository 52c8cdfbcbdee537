import type { Catalog } from '../core/catalog.js';
import type { ClusterSnapshot } from '../core/model.js';
import type { QueueCaps } from '../queue/caps.js';
import type { WfqConfig } from '../queue/wfq.js';
import type { Action, ConfigurationDiff } from '../scheduler/actions.js';
import { evaTunables, EvaScheduler, type EvaOptions } from '../scheduler/eva.js';
import type { DecisionRecord, Scheduler, ThroughputObservation } from '../scheduler/types.js';
import type { CloudProvider } from '../cloud/provider.js';
import {
  Admission,
  UNKNOWN_DURATION_SECONDS,
  type AdmissionJobInfo,
  type PreemptionVictim,
  type QueueDecision,
} from '../queue/admission.js';
import { queueViews, type JobQueueView } from '../queue/admission-views.js';
import { stagesDone, toDistribution } from '../queue/success.js';
import { schedulerCaps } from '../round/plan-caps.js';
import { isQueueWait, runRound, type PlannedRound, type PredictionFork } from '../round/round.js';
import type { ObjectStore } from '../storage/object-store.js';
import { buildContextKey, taskLogPrefix } from '../protocol/object-keys.js';
import { SystemClock, type Clock } from './clock.js';
import type { ControllerConfig, OrphanPolicy } from './config.js';
import { billedInstances, computeCostReport, type DetailedCostReport } from './cost-accounting.js';
import type { JobSpec } from './job-spec/spec.js';
import { CloudOnlyExecutor, silentLogger, type ControllerLogger, type TaskExecutor } from './seams.js';
import { InjectedCrash, type FaultInjector } from './faults.js';
import { Reconciler, type ProgressSummary } from './reconciler.js';
import type { SyncSummary } from './reconcile/cloud-sync.js';
import { predictCompletions } from '../predict/predict.js';
import { predictEtas, worldFingerprint, type PredictFn } from './eta.js';
import { predictionErrorOf, readQueueRecord, writeQueueRecord, type EtaRecord } from './queue-records.js';
import { buildReportDocument, writeReportFiles, type WrittenReport } from './reports.js';
import { ValidationError } from '../core/validation.js';
import type { ClusterView, ControllerService, WhyRecord } from './service.js';
import { buildSnapshot, readSnapshotInputs, type SnapshotInputs } from './snapshot.js';
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
  /** $/hour and instance count (Eva enforces them on its plans) and quotas per family group (admission does). */
  readonly caps: QueueCaps;
  /** WFQ classes, orderings and preemption policy of the queue layer (issue 6); default one FIFO class. */
  readonly queue?: WfqConfig | undefined;
  /** Eva's options besides the caps (the config's `scheduler:` section); default: Eva's defaults. */
  readonly eva?: Omit<EvaOptions, 'caps' | 'variant' | 'exact'> | undefined;
  readonly dryRun: boolean;
  readonly orphanPolicy: OrphanPolicy;
  readonly vanishGraceSeconds: number;
  readonly registrationTimeoutSeconds: number;
  readonly registrationBackoffBaseSeconds: number;
  readonly registrationBackoffMaxSeconds: number;
  readonly reportEverySeconds: number;
  readonly tags?: Readonly<Record<string, string>>;
  /**
   * Plan early on submissions, completions, drains and lost capacity (default true). False: rounds only on the
   * period, as Eva's reference simulator plans (the simulator's `--early-rounds` off).
   */
  readonly earlyRounds?: boolean | undefined;
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
    queue: config.queue,
    eva: evaTunables(config.scheduler),
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
  /**
   * Completion-time predictions (PCS §4, eta.ts): the simulator's `predictCompletions` (default), another
   * function (tests), or false to turn them off.
   */
  readonly predict?: PredictFn | false | undefined;
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
  /** This round's admission decision (who entered the plan, who waits and why). */
  readonly queue?: QueueDecision | undefined;
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
  /** The queue layer: admission under the caps before every plan. */
  readonly admission: Admission;
  /** Queue views last written per job, so unchanged ones are not rewritten every round. */
  private readonly writtenViews = new Map<string, string>();
  private readonly predict: PredictFn | undefined;
  /** The world the last prediction ran on (eta.ts worldFingerprint) and what it predicted, to skip reruns. */
  private lastPrediction: { fingerprint: string; etas: ReadonlyMap<string, EtaRecord> } | undefined;

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
        ? (catalog) =>
            new EvaScheduler(catalog, { ...deps.settings.eva, caps: schedulerCaps(deps.settings.caps) })
        : undefined);
    this.scheduler =
      deps.scheduler ??
      new EvaScheduler(deps.catalog, { ...deps.settings.eva, caps: schedulerCaps(deps.settings.caps) });
    this.predict = deps.predict === false ? undefined : (deps.predict ?? predictCompletions);
    this.admission = new Admission(deps.catalog, {
      caps: deps.settings.caps,
      config: deps.settings.queue,
    });
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
        caps: deps.settings.caps,
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
      this.replaceSilentWorkers();
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
        this.replaceSilentWorkers();
        sync = await this.reconciler.syncWithCloud();
        await this.reconciler.progress();
      }
      const planned = this.planAndRecord(reason);
      const progress = this.settings.dryRun ? undefined : await this.reconciler.progress();
      if (planned.round !== undefined) this.metrics?.observeRound((performance.now() - startedMs) / 1000);
      return { ...planned, sync, progress };
    });
  }

  /** Snapshot → the round (round/round.ts) → record → intents, synchronously (no other write can interleave). */
  private planAndRecord(reason: string): Omit<RoundOutcome, 'sync' | 'progress'> {
    this.loadSchedulerState();
    const now = this.clock.nowSeconds();
    const inputs = readSnapshotInputs(this.store, now);
    const snapshot = buildSnapshot(inputs);
    const outcome = runRound({
      snapshot,
      jobInfo: admissionInfo(inputs, snapshot),
      admission: this.admission,
      scheduler: this.scheduler,
      // Normalized throughputs reported by workers since the last round teach the co-location table.
      observations: this.workers?.takeObservations() ?? [],
      catalog: this.catalog,
      forkForPrediction: this.predictionDue(inputs) && this.scheduler.fork !== undefined,
      carriedOut: !this.settings.dryRun,
    });
    const queue = outcome.queue;
    const planned = outcome.planned;
    if (planned === undefined) {
      this.recordQueueViews(queue, undefined);
      return { actions: [], launched: new Map(), queue };
    }
    const { plan, victims, capViolation } = planned;
    for (const w of plan.decision.waiting) if (!isQueueWait(w.cap)) this.metrics?.countCapHit(w.cap);
    const result =
      this.settings.dryRun || capViolation !== undefined
        ? this.recordUnapplied(planned, reason)
        : this.apply(planned, reason);
    this.recordQueueViews(queue, plan.decision, result.notApplied === undefined ? victims : []);
    if (outcome.fork !== undefined) this.runPrediction(inputs, outcome.fork, now, queue);
    this.saveSchedulerState();
    const kept = this.settings.roundsKept ?? 5000;
    if (result.round !== undefined && result.round % 100 === 0) this.store.pruneRounds(kept);
    return result;
  }

  /** A dry run, or a plan over a cap (the safety rail under the scheduler): recorded, never carried out. */
  private recordUnapplied(planned: PlannedRound, reason: string): Omit<RoundOutcome, 'sync' | 'progress'> {
    const { plan, diff, capViolation } = planned;
    const notApplied = capViolation === undefined ? 'dry run' : `plan breaks a cap: ${capViolation}`;
    const round = this.store.transaction(() => {
      const recorded = this.store.recordRound({ configuration: plan.configuration, decision: plan.decision });
      this.store.appendEvent({
        kind: capViolation === undefined ? 'round.dry-run' : 'round.rejected',
        message: `round ${recorded.round} (${reason}): ${notApplied}; would do ${describeActions(diff)}`,
        data: { round: recorded.round, actions: diff.actions.map(actionJson) },
      });
      return recorded;
    });
    if (capViolation !== undefined) {
      this.log.error(`round ${round.round}: ${notApplied}`);
      this.metrics?.countCapHit(capViolation.split(':')[0] ?? 'cap');
    }
    return {
      round: round.round,
      decision: plan.decision,
      actions: diff.actions,
      launched: new Map(),
      notApplied,
      queue: planned.queue,
    };
  }

  private apply(planned: PlannedRound, reason: string): Omit<RoundOutcome, 'sync' | 'progress'> {
    const { plan, diff, victims } = planned;
    const applied = this.reconciler.applyPlan(plan, diff);
    // A preemption costs like a move: the work since the last checkpoint, then a restore.
    this.metrics?.countMigrations(diff.movedJobIds.length + victims.length);
    this.recordPreemptions(victims);
    this.log.info(`round ${applied.round} (${reason}): ${plan.decision.chosen}; ${describeActions(diff)}`, {
      costPerHour: plan.decision.candidates.find((c) => c.name === plan.decision.chosen)?.costPerHour,
    });
    return {
      round: applied.round,
      decision: plan.decision,
      actions: diff.actions,
      launched: applied.launched,
      queue: planned.queue,
    };
  }

  private recordPreemptions(victims: readonly PreemptionVictim[]): void {
    if (victims.length === 0) return;
    this.store.transaction(() => {
      for (const v of victims) {
        this.store.appendEvent({
          kind: 'queue.preempted',
          jobId: v.jobId,
          message: `job ${v.jobId} checkpointed back to the queue: ${v.reason}`,
          data: { classId: v.classId, forClassId: v.forClassId },
        });
      }
    });
  }

  /**
   * Persist each live job's place in the queue (`queue.job.<id>`, read by the API). A job admitted but left out by
   * the plan (a cap Eva enforces on the packed plan) is shown waiting with that cap. Unchanged views are not
   * rewritten, so `sinceSeconds` says since when the job has been in its state.
   */
  private recordQueueViews(
    queue: QueueDecision,
    decision: DecisionRecord | undefined,
    victims: readonly PreemptionVictim[] = [],
  ): void {
    const leftOut = new Map(
      (decision?.waiting ?? []).filter((w) => !isQueueWait(w.cap)).map((w) => [w.jobId, w.cap]),
    );
    const preempted = new Map(victims.map((v) => [v.jobId, v]));
    const changed: [string, JobQueueView][] = [];
    for (const [jobId, view] of queueViews(queue, this.admission)) {
      const cap = leftOut.get(jobId);
      const victim = preempted.get(jobId);
      const shown: JobQueueView =
        victim !== undefined
          ? {
              ...view,
              status: 'waiting',
              reason: 'class-share',
              detail: `preempted: checkpointing back to the queue so class ${victim.forClassId} reclaims its guaranteed share`,
            }
          : cap === undefined || view.status !== 'admitted'
            ? view
            : {
                ...view,
                status: 'waiting',
                reason: 'caps',
                detail: `admitted, but the packed plan breaks ${cap}; it is admitted again next round`,
              };
      const { sinceSeconds: _since, ...content } = shown;
      const text = JSON.stringify(content);
      if (this.writtenViews.get(jobId) === text) continue;
      this.writtenViews.set(jobId, text);
      changed.push([jobId, shown]);
    }
    if (changed.length === 0) return;
    this.store.transaction(() => {
      for (const [jobId, view] of changed)
        writeQueueRecord(this.store, jobId, { ...readQueueRecord(this.store, jobId), queue: view });
    });
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
      this.admission.setCatalog(catalog);
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
   * A registered worker that stopped heartbeating: its tasks are rescheduled from their last checkpoints and its
   * instance replaced. The termination goes through an intent like every other side effect (reconciler.ts
   * `replaceLostWorker`), so a crash in between cannot leak the instance.
   */
  private replaceSilentWorkers(): void {
    if (this.workers === undefined || this.provider === undefined) return;
    for (const inst of this.workers.staleInstances()) {
      this.workers.markLost(inst.id);
      const reason = `worker of ${inst.id} stopped heartbeating; terminating the instance and rescheduling its tasks`;
      this.store.appendEvent({ kind: 'instance.worker-lost', instanceId: inst.id, message: reason });
      this.log.warn(`worker of ${inst.id} stopped heartbeating; replacing the instance`, {
        cloudId: inst.cloudId,
      });
      this.reconciler.replaceLostWorker(inst.id, reason);
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
    this.admission.forget(job.id);
    this.writtenViews.delete(job.id);
    this.recordPredictionError(job);
    this.reportReasons.push(`${job.id} ${job.state}`);
    this.requestRound(`${job.id} ${job.state}`);
  }

  /** PCS §2: how far the submission prediction was off, for a job that completed (its error is measured). */
  private recordPredictionError(job: JobRecord): void {
    try {
      const record = readQueueRecord(this.store, job.id);
      const predicted = record?.submissionEta?.completionSeconds;
      if (record === undefined || job.state !== 'succeeded' || job.finishedAtSeconds === undefined) return;
      if (predicted === undefined || predicted === null) return;
      const predictionError = predictionErrorOf(predicted, job.submittedAtSeconds, job.finishedAtSeconds);
      writeQueueRecord(this.store, job.id, { ...record, predictionError });
      this.store.appendEvent({
        kind: 'job.prediction-error',
        jobId: job.id,
        message: `job ${job.id} ended ${Math.round(predictionError.errorSeconds)} s ${predictionError.errorSeconds >= 0 ? 'after' : 'before'} its submission prediction`,
        data: { ...predictionError },
      });
    } catch (e) {
      this.log.warn(`cannot record the prediction error of ${job.id}`, { error: (e as Error).message });
    }
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
    const key = buildContextKey(info.sha256, info.encoding);
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
    this.predictAtSubmission(job);
    return job;
  }

  /**
   * PCS §4: a prediction when a job is submitted, recorded as its submission prediction (the one its error is
   * measured against). It starts from the early round the submission asked for. A failure only costs the ETA.
   */
  private predictAtSubmission(job: JobRecord): void {
    if (this.predict === undefined || this.scheduler.fork === undefined) return;
    try {
      this.loadSchedulerState();
      const now = this.clock.nowSeconds();
      const inputs = readSnapshotInputs(this.store, now);
      this.runPrediction(
        inputs,
        { scheduler: this.scheduler.fork(), admission: this.admission.fork() },
        Math.max(now, this.lastRoundAtSeconds + this.minRoundGap()),
        undefined,
        [job.id],
      );
    } catch (e) {
      this.log.warn(`cannot predict the completion of ${job.id}`, { error: (e as Error).message });
    }
  }

  /**
   * Whether this round needs a new prediction: the cluster changed (jobs, tasks, placements, instances), or a job
   * that was predicted to start or end by now has not (the world strayed from the prediction).
   */
  private predictionDue(inputs: SnapshotInputs): boolean {
    if (this.predict === undefined) return false;
    const last = this.lastPrediction;
    if (last === undefined || last.fingerprint !== worldFingerprint(inputs)) return true;
    const now = inputs.nowSeconds;
    return inputs.jobs.some((j) => {
      const eta = last.etas.get(j.id);
      if (eta === undefined) return true;
      const overdueStart =
        j.startedAtSeconds === undefined && eta.startSeconds !== null && eta.startSeconds < now;
      const overdueEnd = eta.completionSeconds !== null && eta.completionSeconds < now;
      return overdueStart || overdueEnd;
    });
  }

  /** Predict and store every live job's ETA; a job's first prediction is also kept as its submission prediction. */
  private runPrediction(
    inputs: SnapshotInputs,
    fork: PredictionFork,
    firstRoundSeconds: number,
    queue?: QueueDecision,
    targets?: readonly string[],
  ): void {
    if (this.predict === undefined) return;
    let run;
    try {
      run = predictEtas(this.predict, {
        inputs,
        views: queue === undefined ? undefined : queueViews(queue, this.admission),
        scheduler: fork.scheduler,
        admission: fork.admission,
        catalog: this.catalog,
        roundSeconds: this.settings.roundSeconds,
        firstRoundSeconds,
        targets,
      });
    } catch (e) {
      this.log.warn('completion-time prediction failed; ETAs keep their last values', {
        error: (e as Error).message,
      });
      return;
    }
    if (run.complete) this.lastPrediction = { fingerprint: worldFingerprint(inputs), etas: run.etas };
    this.store.transaction(() => {
      for (const [jobId, eta] of run.etas) {
        const record = readQueueRecord(this.store, jobId) ?? {};
        writeQueueRecord(this.store, jobId, {
          ...record,
          eta,
          submissionEta: record.submissionEta ?? { ...eta, basis: `at submission: ${eta.basis}` },
        });
      }
    });
    this.log.info(`predicted ${run.etas.size} job(s) in ${run.wallMs.toFixed(0)} ms`);
  }

  cancel(jobId: string): JobRecord {
    return this.endJob(jobId, 'cancelled', 'cancelled by request', true);
  }

  /**
   * End a job as unsuccessful at a stage (success-ranked ordering, issue 6): like a cancel, its tasks stop without a
   * checkpoint and its capacity is freed, but the job is not counted as failed or cancelled. Idempotent; a job
   * that already ended otherwise cannot become unsuccessful (IllegalTransitionError, 409 in the API).
   */
  markUnsuccessful(
    jobId: string,
    options: { readonly stage?: number; readonly reason?: string } = {},
  ): JobRecord {
    const job = this.store.getJob(jobId);
    if (job === undefined) throw new UnknownRecordError('job', jobId);
    const success = job.spec.success;
    const stages = success?.kind === 'stages' ? success.stageSeconds.length : undefined;
    if (options.stage !== undefined && stages !== undefined && options.stage > stages)
      throw new ValidationError('request', [
        `stage: the job declares ${stages} stage(s), got ${options.stage}`,
      ]);
    const why = [
      'stopped as unsuccessful',
      options.stage === undefined ? '' : ` at stage ${options.stage}`,
      options.reason === undefined ? ' by request' : `: ${options.reason}`,
    ].join('');
    return this.endJob(jobId, 'unsuccessful', why, false);
  }

  /** Stop a job's tasks (no checkpoint) and end it in `state`; a job already ended is returned as it is. */
  private endJob(
    jobId: string,
    state: 'cancelled' | 'unsuccessful',
    reason: string,
    idempotent: boolean,
  ): JobRecord {
    let changed = false;
    const job = this.store.transaction(() => {
      const current = this.store.getJob(jobId);
      if (current === undefined) throw new UnknownRecordError('job', jobId);
      if (isFinalJobState(current.state) && (idempotent || current.state === state)) return current;
      const ended = this.store.setJobState(jobId, state, reason);
      changed = true;
      const tasks = this.store.listTasks({ jobId });
      const taskIds = new Set(tasks.map((t) => t.id));
      const pending = this.store.listIntents({ states: ['pending'] });
      const stopping = new Set<string>();
      for (const intent of pending) {
        if (intent.kind === 'start-task' && taskIds.has(intent.payload.taskId))
          this.store.failIntent(intent.id, `job ${state}`);
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
      return ended;
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
    if (this.settings.earlyRounds === false) return;
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
  if (waiting !== undefined)
    parts.push(isQueueWait(waiting.cap) ? `waiting in the ${waiting.cap}` : `waiting: cap ${waiting.cap}`);
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

/** What admission needs of each live job beyond the snapshot: team, declared size, success model, first start. */
function admissionInfo(
  inputs: SnapshotInputs,
  snapshot: ClusterSnapshot,
): (jobId: string) => AdmissionJobInfo {
  const records = new Map(inputs.jobs.map((j) => [j.id, j]));
  const sched = new Map(snapshot.jobs.map((j) => [j.id, j]));
  return (jobId) => {
    const job = records.get(jobId);
    if (job === undefined) return {};
    const perTask = job.spec.expectedDurationSeconds ?? UNKNOWN_DURATION_SECONDS;
    const success = job.spec.success === undefined ? undefined : toDistribution(job.spec.success);
    const remaining = sched.get(jobId)?.expectedRemainingSeconds ?? perTask;
    return {
      team: job.team,
      perTaskSeconds: perTask,
      startedAtSeconds: job.startedAtSeconds,
      success:
        success === undefined
          ? undefined
          : { distribution: success, stagesDone: stagesDone(success, Math.max(0, perTask - remaining)) },
    };
  };
}
