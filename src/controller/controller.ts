import type { Catalog } from '../core/catalog.js';
import type { CloudProvider } from '../cloud/provider.js';
import { Admission } from '../queue/admission.js';
import { schedulerCaps } from '../round/plan-caps.js';
import type { ObjectStore } from '../storage/object-store.js';
import { instanceBilledPricePerHour } from './instance-market.js';
import { recordUploadersFromEvents } from './artifacts.js';
import type { ArchivedSubmissionKey, JobArchive } from './backup/job-archive.js';
import { WITHDRAWN_AT_SUBMISSION } from './submission-keys.js';
import { SystemClock, type Clock } from './clock.js';
import { BetweenRoundsPlacer } from './between-rounds-placement.js';
import type { DetailedCostReport } from './cost-accounting.js';
import type { MonthToDateCosts } from './month-to-date.js';
import type { PeriodCosts } from './stored-month-report.js';
import { readSnapshotInputs } from './snapshot.js';
import { runningTaskCheckpoints, workAtRisk, type MarketWorkAtRisk } from './work-at-risk.js';
import { HistoryRetention } from './history-retention.js';
import { FinishedCheckpointRetention } from './finished-checkpoint-retention.js';
import { DEFAULT_REPORTS_KEPT } from './report-retention.js';
import { compactCoStart, type BarrierIdleHook } from './co-start-records.js';
import { DEFAULT_PREDICTION_BUDGET_SECONDS, DEFAULT_PREDICTION_HORIZON_SECONDS } from './eta-predictions.js';
import { clusterView, whyJob } from './explain.js';
import { submissionWarnings, type ExecutorKind } from './execution-check.js';
import { InjectedCrash } from './faults.js';
import { JobControl } from './job-control.js';
import { JobDependencies } from './job-dependencies.js';
import { RunLimits } from './run-limits.js';
import { LoopMonitor, type LoopHealth } from './loop-health.js';
import type { LatencyMatrixView } from './latency-matrix.js';
import { KeptOrphans } from './kept-orphans.js';
import type { JobSpec } from './job-spec/spec.js';
import { InProcessPredictionEngine, type PredictionEngine } from './prediction-engine.js';
import { WorkerThreadPredictionEngine } from './prediction-worker-engine.js';
import { Predictions } from './predictions.js';
import type { EtaRecord } from './queue-records.js';
import { QueueViews } from './queue-views.js';
import type { SyncSummary } from './reconcile/cloud-sync.js';
import { SpotInterruptions, type InterruptionReport } from './spot-interruptions.js';
import { Reconciler, type ProgressSummary } from './reconciler.js';
import type { WrittenReport } from './reports.js';
import { ReportWriter } from './report-writer.js';
import { RoundRecorder, type RoundMetrics, type RoundOutcome } from './round-recorder.js';
import { RoundSchedule } from './round-schedule.js';
import { buildScheduler, type SchedulerRecipe } from './scheduler-recipe.js';
import { SchedulerState, type ControllerScheduler } from './scheduler-state.js';
import { CloudOnlyTaskControl, silentLogger, type ControllerLogger } from './seams.js';
import type {
  ClusterView,
  ControllerService,
  KeepOptions,
  RoundCause,
  SubmissionCommitHook,
  WhyRecord,
} from './service.js';
import { reconcilerSettings, type ControllerSettings } from './settings.js';
import type { InstanceRecord, JobRecord, StateStore } from './state-store.js';
import type { SerializedColocationTable } from '../scheduler/colocation-table.js';
import type { ControllerDeps } from './controller-deps.js';
import { ControllerCosts } from './controller-costs.js';
import { storedArtifacts, type StoredArtifacts } from './stored-artifacts.js';

export type { ControllerDeps } from './controller-deps.js';
import { replaceSilentWorkers, type WorkerFleet } from './worker-liveness.js';

/**
 * The controller's master loop (ARCHITECTURE.md "Each round"): snapshot the store → Eva plans → record the round and
 * its decision → diff with scheduler/actions.ts → intents → effects (reconciler.ts). Rounds run every
 * `roundSeconds` (default 300 s, Eva's period) and early on submissions, cancels, completions and drains; between
 * rounds a lighter pass every `pollSeconds` reconciles with EC2 and carries out effects whose gates opened (a task
 * starts once its instance runs, an instance terminates once empty).
 *
 * Everything the loop does happens in one sequence (no two passes overlap), while the ControllerService methods the
 * API calls only write the store synchronously and wake the loop. Nothing in a pass waits for the object store: cost
 * reports are written beside the loop (report-writer.ts), so a hung store cannot stall planning. Each pass is timed
 * (loop-health.ts), and `/healthz` reports a pass that has run too long. The scheduler's learned state (co-location table,
 * event history) is saved in the store after every round and loaded at start.
 *
 * This file holds the loop and its passes; each other job of the controller is its own module, composed here:
 * recording a round (round-recorder.ts), queue views (queue-views.ts), the scheduler's learned state
 * (scheduler-state.ts), ETAs (predictions.ts), job control (job-control.ts), views (explain.ts), what the cluster
 * cost (controller-costs.ts), cost reports (report-writer.ts), task logs and build contexts (stored-artifacts.ts), and
 * worker liveness (worker-liveness.ts). What it is built from is controller-deps.ts.
 */

export class Controller implements ControllerService {
  readonly store: StateStore;
  /** Replaced only by applyCatalog (price refresh), between rounds. */
  catalog: Catalog;
  readonly clock: Clock;
  readonly settings: ControllerSettings;
  /** The queue layer: admission under the caps before every plan. */
  readonly admission: Admission;
  private readonly reconciler: Reconciler;
  private readonly log: ControllerLogger;
  private readonly objectStore: ObjectStore | undefined;
  private readonly jobArchive: JobArchive | undefined;
  private readonly metrics: RoundMetrics | undefined;
  private readonly onBarrierIdle: BarrierIdleHook | undefined;
  private readonly workers: WorkerFleet | undefined;
  private readonly provider: CloudProvider | undefined;
  private readonly schedulerState: SchedulerState;
  private readonly queueViews: QueueViews;
  private readonly predictions: Predictions;
  private readonly rounds: RoundRecorder;
  private readonly reports: ReportWriter;
  private readonly retention: HistoryRetention;
  private readonly finishedCheckpoints: FinishedCheckpointRetention;
  /** What the cluster cost (controller-costs.ts). */
  private readonly costViews: ControllerCosts;
  private readonly artifacts: StoredArtifacts;
  private readonly jobs: JobControl;
  private readonly runLimits: RunLimits;
  private readonly dependencies: JobDependencies;
  private readonly monitor: LoopMonitor;
  private readonly orphans: KeptOrphans;
  private readonly interruptions: SpotInterruptions;
  /** Placement between rounds (between-rounds-placement.ts); absent when off or in a dry run. */
  private readonly placer: BetweenRoundsPlacer | undefined;

  /** The loop's sequence: every pass chains here so none overlap (also when tests call them directly). */
  private chain: Promise<unknown> = Promise.resolve();
  private running = false;
  private loopDone: Promise<void> | undefined;
  private wake = new AbortController();
  private readonly schedule: RoundSchedule;

  /** How the workers run tasks, when known (ControllerDeps.executor). */
  private readonly executor: ExecutorKind | undefined;

  /** The cloud sells spot and the scheduler buys it (ControllerDeps.spotMarket). */
  readonly spotMarket: boolean;

  constructor(deps: ControllerDeps) {
    if (!deps.settings.dryRun && deps.provider === undefined)
      throw new Error('a cloud provider is required unless in dry-run');
    this.store = deps.store;
    this.catalog = deps.catalog;
    this.clock = deps.clock ?? new SystemClock();
    this.settings = deps.settings;
    this.schedule = new RoundSchedule(deps.settings);
    this.log = deps.logger ?? silentLogger;
    this.objectStore = deps.objectStore;
    this.executor = deps.executor;
    this.spotMarket = deps.spotMarket === true;
    this.jobArchive = deps.jobArchive;
    this.metrics = deps.metrics;
    this.onBarrierIdle = deps.onBarrierIdle;
    this.workers = deps.workers;
    this.provider = deps.settings.dryRun ? undefined : deps.provider;
    this.monitor = new LoopMonitor(this.clock, deps.settings.loopStuckSeconds);
    const recipe: SchedulerRecipe | undefined =
      deps.schedulerRecipe ??
      (deps.scheduler === undefined
        ? { kind: 'eva', options: { ...deps.settings.eva, caps: schedulerCaps(deps.settings.caps) } }
        : undefined);
    const fromRecipe =
      recipe === undefined ? undefined : (catalog: Catalog) => buildScheduler(recipe, catalog);
    this.schedulerState = new SchedulerState({
      store: deps.store,
      log: this.log,
      scheduler: deps.scheduler ?? buildScheduler(recipe as SchedulerRecipe, deps.catalog),
      schedulerFor: deps.schedulerFor ?? (deps.scheduler === undefined ? fromRecipe : undefined),
      save: deps.saveSchedulerState ?? true,
    });
    this.admission = new Admission(deps.catalog, {
      caps: deps.settings.caps,
      config: deps.settings.queue,
      admitBy: deps.settings.admitBy,
      spot: this.spotMarket,
    });
    this.orphans = new KeptOrphans(this.clock, this.log, deps.settings.clusterName);
    // Everything built here reads the catalog through this, so a price refresh (applyCatalog) reaches all of it.
    const catalog = (): Catalog => this.catalog;
    this.costViews = new ControllerCosts({
      store: deps.store,
      clock: this.clock,
      catalog,
      billingTypes: deps.billingTypes,
      objectStore: deps.objectStore,
    });
    this.artifacts = storedArtifacts(deps.objectStore, deps.store);
    const billingCatalog = (): Catalog => this.costViews.billingCatalog();
    this.reconciler = new Reconciler({
      store: deps.store,
      catalog,
      // Dry run: the reconciler gets no provider, so no code path can reach the cloud.
      provider: deps.settings.dryRun ? undefined : deps.provider,
      tasks: deps.tasks ?? new CloudOnlyTaskControl(),
      clock: this.clock,
      faults: deps.faults,
      logger: this.log,
      settings: reconcilerSettings(deps.settings),
      onJobEnded: (job) => this.jobEnded(job),
      onMoveBegun: () => this.metrics?.countMigrations(1),
      onBarrierIdle: this.onBarrierIdle,
      requestRound: (reason, cause) => this.requestRound(reason, cause),
      onOrphansKept: (instances) => this.orphans.update(instances),
    });
    this.queueViews = new QueueViews({ store: deps.store, admission: this.admission });
    const engine = (): PredictionEngine | undefined => {
      if (deps.predict === false || recipe === undefined) return undefined;
      if (deps.predict === undefined) return new WorkerThreadPredictionEngine();
      return typeof deps.predict === 'function' ? new InProcessPredictionEngine(deps.predict) : deps.predict;
    };
    this.predictions = new Predictions({
      store: deps.store,
      clock: this.clock,
      log: this.log,
      engine: engine(),
      estimator: engine(),
      recipe: recipe ?? { kind: 'eva', options: {} },
      schedulerState: this.schedulerState,
      admission: this.admission,
      catalog,
      roundSeconds: deps.settings.roundSeconds,
      // A prediction outside a round starts from the early round the loop may run next.
      nextRoundSeconds: () => this.schedule.earliestEarlySeconds(),
      horizonSeconds: deps.settings.predictionHorizonSeconds ?? DEFAULT_PREDICTION_HORIZON_SECONDS,
      budgetSeconds: deps.settings.predictionBudgetSeconds ?? DEFAULT_PREDICTION_BUDGET_SECONDS,
    });
    this.rounds = new RoundRecorder({
      store: deps.store,
      clock: this.clock,
      settings: deps.settings,
      log: this.log,
      metrics: deps.metrics,
      workers: deps.workers,
      reconciler: this.reconciler,
      admission: this.admission,
      schedulerState: this.schedulerState,
      catalog,
      queueViews: this.queueViews,
      predictions: this.predictions,
    });
    this.retention = new HistoryRetention({
      store: deps.store,
      clock: this.clock,
      log: this.log,
      settings: deps.settings,
    });
    this.finishedCheckpoints = new FinishedCheckpointRetention({
      store: deps.store,
      clock: this.clock,
      log: this.log,
      objectStore: deps.objectStore,
      settings: deps.settings,
    });
    this.reports = new ReportWriter({
      store: deps.store,
      clock: this.clock,
      log: this.log,
      objectStore: deps.objectStore,
      clusterName: deps.settings.clusterName,
      everySeconds: deps.settings.reportEverySeconds,
      keep: deps.settings.reportsKept ?? DEFAULT_REPORTS_KEPT,
      costs: () => this.costs(0),
      catalog: billingCatalog,
      safeEvent: (kind, message) => this.safeEvent(kind, message),
    });
    this.interruptions = new SpotInterruptions({
      store: deps.store,
      log: this.log,
      provider: this.provider,
      requestRound: (reason, cause) => this.requestRound(reason, cause),
      clock: this.clock,
    });
    deps.workers?.onInterruption?.((instanceId, notice) =>
      this.interruptions.handle(instanceId, { ...notice, source: 'worker' }),
    );
    this.placer =
      deps.settings.placeBetweenRounds === true && !deps.settings.dryRun
        ? new BetweenRoundsPlacer({
            store: deps.store,
            clock: this.clock,
            catalog,
            admission: this.admission,
            scheduler: () => this.schedulerState.scheduler,
            bind: deps.settings.bindBetweenRounds === true,
            workerRegistered: deps.tasks?.workerRegistered?.bind(deps.tasks),
            apply: (jobs) => this.reconciler.applyBetweenRoundsStarts(jobs),
            log: this.log,
          })
        : undefined;
    this.jobs = new JobControl({
      store: deps.store,
      // A submission (or a cancel, freeing capacity) may be placed on paid capacity before the round.
      requestRound: (reason) => {
        this.requestPlacement();
        this.requestRound(reason);
      },
      jobEnded: (job) => this.jobEnded(job),
      predictAfterSubmission: () => this.predictions.afterSubmission(),
      executor: deps.executor,
    });
    this.runLimits = new RunLimits({
      store: deps.store,
      clock: this.clock,
      log: this.log,
      fail: (jobId, reason) => this.jobs.fail(jobId, reason),
    });
    this.dependencies = new JobDependencies({
      store: deps.store,
      log: this.log,
      fail: (jobId, reason) => this.jobs.fail(jobId, reason),
    });
  }

  /** The scheduler planning the next round (a price refresh replaces it). */
  get scheduler(): ControllerScheduler {
    return this.schedulerState.scheduler;
  }

  // -------------------------------------------------------------------------------------------------------------
  // Lifecycle

  /** Load the scheduler's state, reconcile with the cloud (crash recovery), then run the loop in the background. */
  async start(): Promise<void> {
    if (this.running) return;
    await this.recover();
    this.running = true;
    this.schedule.requestedBecause ??= 'start';
    this.loopDone = this.loop();
  }

  /**
   * Stop after the current pass; resolves when the loop has ended (and a report being written is written). A
   * prediction still running is abandoned.
   */
  async stop(): Promise<void> {
    this.running = false;
    this.wake.abort();
    this.workers?.close?.();
    await this.predictions.close();
    await this.loopDone;
    await this.chain.catch(() => undefined);
    await this.reports.settle();
    await this.finishedCheckpoints.stop();
  }

  /** Whether the loop makes progress (`/healthz`). */
  loopHealth(): LoopHealth {
    return this.monitor.health();
  }

  /** Resolves once no completion-time prediction is running or asked for (tests, benchmarks). */
  predictionsSettled(): Promise<void> {
    return this.predictions.settled();
  }

  /** Whether completion-time predictions are on: a job without an ETA yet is then waiting for one. */
  get predictionsEnabled(): boolean {
    return this.predictions.enabled;
  }

  /** Crash recovery: pending intents are re-checked against the cloud and carried out (or found done). */
  async recover(): Promise<{ sync?: SyncSummary; progress?: ProgressSummary }> {
    this.schedulerState.load();
    // Once per state: who uploaded older build contexts, so submissions never read the event log for it.
    recordUploadersFromEvents(this.store);
    // Before the first round can launch: the pools of the last minutes' spot interruptions stay closed.
    this.interruptions.reclosePools();
    if (this.settings.dryRun) return {};
    return this.serial('recovery', async () => {
      const pending = this.store.listIntents({ states: ['pending'] }).length;
      const sync = await this.reconciler.syncWithCloud();
      const progress = await this.reconciler.progress();
      this.log.info('recovered state', {
        pendingIntents: pending,
        adopted: sync.adopted.length,
        orphans: sync.orphans.length,
        keptOrphans: sync.kept.length,
        vanished: sync.vanished.length,
      });
      return { sync, progress };
    });
  }

  private serial<T>(pass: string, fn: () => Promise<T>): Promise<T> {
    const tracked = (): Promise<T> => this.monitor.track(pass, fn);
    const next = this.chain.then(tracked, tracked);
    this.chain = next.catch(() => undefined);
    return next;
  }

  private async loop(): Promise<void> {
    while (this.running) {
      let failed = false;
      try {
        if (this.schedule.due(this.clock.nowSeconds()))
          await this.runRound(this.schedule.requestedBecause ?? 'period');
        else await this.reconcile();
        this.reports.startDue();
      } catch (e) {
        if (e instanceof InjectedCrash) throw e;
        const message = e instanceof Error ? (e.stack ?? e.message) : String(e);
        this.log.error('controller pass failed; continuing', { error: message });
        this.safeEvent('controller.error', message);
        failed = true;
      }
      if (!this.running) break;
      if (this.wake.signal.aborted) this.wake = new AbortController();
      const after = this.clock.nowSeconds();
      const nextRound = this.schedule.nextRoundSeconds();
      const nextLimit = this.nextRunLimitSeconds(failed);
      failed ||= nextLimit === undefined;
      // A pass that failed (the cloud or the store down) is not tried again at once: work still due would spin.
      const wait = Math.max(
        failed ? 1 : 0,
        Math.min(
          nextRound,
          after + this.settings.pollSeconds,
          this.reports.nextDueSeconds,
          // At least a second on: a limit due now was enforced in this pass.
          Math.max(nextLimit ?? Number.POSITIVE_INFINITY, after + 1),
          // A placement asked for during the pass runs in the next one, as soon as it may.
          this.placer?.dueAtSeconds ?? Number.POSITIVE_INFINITY,
        ) - after,
      );
      if (wait > 0) await this.clock.sleep(wait, this.wake.signal);
      // A pass that needed no I/O resolves in microtasks only: let timers and sockets (the API) run between passes.
      else await new Promise<void>((resolve) => setImmediate(resolve));
    }
  }

  /**
   * When the loop must wake for a run limit; undefined when the store could not say. It reads the store, so it fails
   * when the store is down, as the pass does: the loop then waits and tries again, and the lease's renewal, not the
   * loop, decides when this controller must stop (exit 75).
   */
  private nextRunLimitSeconds(passFailed: boolean): number | undefined {
    try {
      return this.runLimits.nextDueSeconds();
    } catch (e) {
      // The pass that failed with the store logged it already.
      if (!passFailed)
        this.log.error('reading the run limits failed; continuing', {
          error: e instanceof Error ? e.message : String(e),
        });
      return undefined;
    }
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
    return this.serial('reconcile', async () => {
      this.workers?.flushProgress?.();
      if (this.settings.dryRun) return {};
      this.enforceRunLimits();
      this.replaceSilentWorkers();
      const sync = await this.reconciler.syncWithCloud();
      this.placer?.placeIfRequested();
      const progress = await this.reconciler.progress();
      return { sync, progress };
    });
  }

  /** One scheduling round (see the class comment). */
  runRound(reason = 'requested'): Promise<RoundOutcome> {
    return this.serial('round', async () => {
      const startedMs = performance.now();
      this.schedule.started(this.clock.nowSeconds());
      this.workers?.flushProgress?.();
      let sync: SyncSummary | undefined;
      if (!this.settings.dryRun) {
        this.enforceRunLimits();
        this.replaceSilentWorkers();
        sync = await this.reconciler.syncWithCloud();
        // Placed first, the round's plan sees them placed (as the simulator's round sees its placements).
        this.placer?.placeIfRequested(true);
        await this.reconciler.progress();
      }
      // A job whose dependency ended without success can never start: it ends before the plan is made.
      const unreachable = this.dependencies.failUnreachable();
      this.metrics?.countJobsFailedByRule?.('dependency', unreachable.length);
      const planned = this.rounds.planAndRecord(reason);
      this.retention.afterRound(planned.round);
      this.finishedCheckpoints.afterRound();
      this.placer?.noteRound(planned.capHoldsJobsBack === true);
      const progress = this.settings.dryRun ? undefined : await this.reconciler.progress();
      if (planned.round !== undefined) this.metrics?.observeRound((performance.now() - startedMs) / 1000);
      return { ...planned, sync, progress };
    });
  }

  /**
   * Use a repriced catalog from the next round on (price refresh, src/controller/price-refresh.ts): admission and the
   * scheduler take the new prices (scheduler-state.ts `replaceFor`); the reconciler (launch gate, capacity fallback),
   * cost reports, predictions and whatever reads `catalog` (the API's dry runs, the workers' start reports) read it
   * at each use. Runs in the loop's sequence, never inside a round.
   */
  applyCatalog(catalog: Catalog): Promise<void> {
    return this.serial('price update', () => {
      this.catalog = catalog;
      this.admission.setCatalog(catalog);
      this.schedulerState.replaceFor(catalog);
      return Promise.resolve();
    });
  }

  private enforceRunLimits(): void {
    // Enforced first: an optional call's arguments are not evaluated when there is no metrics object.
    const stopped = this.runLimits.enforce();
    this.metrics?.countJobsFailedByRule?.('run-limit', stopped.length);
  }

  private replaceSilentWorkers(): void {
    if (this.workers === undefined || this.provider === undefined) return;
    replaceSilentWorkers({
      workers: this.workers,
      store: this.store,
      log: this.log,
      reconciler: this.reconciler,
    });
  }

  private jobEnded(job: JobRecord): void {
    // After the job's end was committed: a crash before this leaves an uncompacted record, which is only larger.
    compactCoStart(this.store, job, this.onBarrierIdle);
    this.jobArchive?.keepEnded(job);
    this.admission.forget(job.id);
    this.queueViews.forget(job.id);
    this.predictions.recordError(job);
    this.reports.due(`${job.id} ${job.state}`);
    this.requestPlacement();
    this.requestRound(`${job.id} ${job.state}`);
  }

  // -------------------------------------------------------------------------------------------------------------
  // Object store: reports, task logs, build contexts

  /** Write the cost report (JSON, CSV, HTML) to the object store now. */
  writeCostReport(reason = 'on demand'): Promise<WrittenReport> {
    return this.reports.writeCostReport(reason);
  }

  /**
   * API: write a report now; answers where the JSON went (`s3://bucket/reports/costs-….json`). Absent without an
   * object store (a dry run): the route answers 501.
   */
  get writeReport(): (() => Promise<string>) | undefined {
    return this.objectStore === undefined ? undefined : () => this.reports.writeReport();
  }

  /** API: task logs and build contexts in the object store (stored-artifacts.ts); absent without one. */
  get jobLogs(): StoredArtifacts['jobLogs'] {
    return this.artifacts.jobLogs;
  }

  get jobLogReader(): StoredArtifacts['jobLogReader'] {
    return this.artifacts.jobLogReader;
  }

  get storeContext(): StoredArtifacts['storeContext'] {
    return this.artifacts.storeContext;
  }

  get buildContextProblem(): StoredArtifacts['buildContextProblem'] {
    return this.artifacts.buildContextProblem;
  }

  // -------------------------------------------------------------------------------------------------------------
  // ControllerService

  submit(spec: JobSpec, team: string, inCommit?: SubmissionCommitHook): JobRecord {
    return this.jobs.submit(spec, team, inCommit);
  }

  submitArray(spec: JobSpec, team: string, inCommit?: SubmissionCommitHook): JobRecord[] {
    return this.jobs.submitArray(spec, team, inCommit);
  }

  /** API: a submission committed with the others of the same moment (group commit, job-control.ts). */
  submitBatched(spec: JobSpec, team: string, inCommit?: SubmissionCommitHook): Promise<JobRecord> {
    return this.jobs.submitBatched(spec, team, inCommit);
  }

  cancel(jobId: string, reason?: string): JobRecord {
    return this.jobs.cancel(jobId, reason);
  }

  cancelMany(jobIds: readonly string[], reason: string): JobRecord[] {
    return this.jobs.cancelMany(jobIds, reason);
  }

  /**
   * API: make a submitted job durable beyond this machine before it is answered (its spec in the job archive, with
   * the idempotency key it came with). When the object store does not take it, the job is withdrawn (cancelled,
   * saying why) and the error thrown, so the client is told to retry and no job runs that a restore could drop; with
   * `withdraw: false` (a resend's jobs, made before and perhaps running) the error is thrown and the job left be.
   */
  async keepSubmission(
    job: JobRecord,
    key?: ArchivedSubmissionKey,
    options: KeepOptions = { withdraw: true, ofArray: false },
  ): Promise<void> {
    if (this.jobArchive === undefined) return;
    try {
      await this.jobArchive.keepSubmitted(job, key, { ofArray: options.ofArray });
    } catch (e) {
      if (!options.withdraw) throw e;
      const why = e instanceof Error ? e.message : String(e);
      this.log.error(`${job.id} withdrawn: its spec could not be stored in the job archive`, { error: why });
      this.jobs.cancel(job.id, `${WITHDRAWN_AT_SUBMISSION}: the object store did not take its spec (${why})`);
      throw e;
    }
  }

  /** API (`submit --dry-run`): the ETA a job with this spec would get if submitted now; nothing is stored. */
  /** API: what a submission of `spec` would be told here, or refused for (a dry run asks; execution-check.ts). */
  submissionWarnings(spec: JobSpec): string[] {
    return submissionWarnings(spec, this.executor);
  }

  estimate(spec: JobSpec): Promise<EtaRecord | null> {
    return this.predictions.estimate(spec);
  }

  /** End a job as unsuccessful at a stage (job-control.ts). */
  markUnsuccessful(
    jobId: string,
    options: { readonly stage?: number; readonly reason?: string } = {},
  ): JobRecord {
    return this.jobs.markUnsuccessful(jobId, options);
  }

  drain(instanceId: string): InstanceRecord {
    return this.jobs.drain(instanceId);
  }

  cluster(): ClusterView {
    // What each instance is billed at: its spot price on spot.
    return clusterView(
      this.store,
      (i) => instanceBilledPricePerHour(this.catalog, this.store, i),
      this.orphans.list(),
    );
  }

  /** The round trips the workers measured between instances (none without workers that probe). */
  latency(): LatencyMatrixView {
    return this.workers?.latencyView?.() ?? { pairs: [], probes: [] };
  }

  /** What the scheduler learned of co-location (Eva §4.4); undefined when it learns none (a baseline). */
  colocation(): SerializedColocationTable | undefined {
    return this.schedulerState.learnedColocation();
  }

  why(jobId: string, limit = 10): WhyRecord[] {
    return whyJob(this.store, jobId, limit);
  }

  costs(sinceSeconds = 0, untilSeconds?: number): DetailedCostReport {
    return this.costViews.costs(sinceSeconds, untilSeconds);
  }

  periodCosts(sinceSeconds = 0, untilSeconds?: number): Promise<PeriodCosts> {
    return this.costViews.periodCosts(sinceSeconds, untilSeconds);
  }

  costsOfJobs(jobIds: readonly string[]): Map<string, number> {
    return this.costViews.costsOfJobs(jobIds);
  }

  monthToDateCosts(): MonthToDateCosts {
    return this.costViews.monthToDateCosts();
  }

  workAtRisk(): MarketWorkAtRisk[] {
    const now = this.clock.nowSeconds();
    return workAtRisk(now, runningTaskCheckpoints(readSnapshotInputs(this.store, now)));
  }

  /**
   * EC2 warned that it reclaims (or may soon reclaim) the instance with this cloud id (the interruption queue):
   * spot-interruptions.ts. False when the instance is not one of this cluster's live instances.
   */
  interruptionFromQueue(cloudId: string, report: Omit<InterruptionReport, 'source'>): boolean {
    const inst = this.store.findInstanceByCloudId(cloudId);
    if (inst === undefined) return false;
    return this.interruptions.handle(inst.id, { ...report, source: 'interruption-queue' });
  }

  /** A job arrived or capacity was freed: place between rounds at the next pass, when a cap holds jobs back. */
  private requestPlacement(): void {
    if (this.placer?.request() === true) this.wake.abort();
  }

  requestRound(reason: string, cause: RoundCause = 'event'): void {
    if (this.schedule.request(reason, cause)) this.wake.abort();
  }
}
