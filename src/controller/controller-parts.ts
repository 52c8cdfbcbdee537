import type { Catalog } from '../core/catalog.js';
import type { CloudProvider } from '../cloud/provider.js';
import type { Admission } from '../queue/admission.js';
import { schedulerCaps } from '../round/plan-caps.js';
import { AdmissionStateKeeper } from './admission-state.js';
import { BetweenRoundsPlacer } from './between-rounds-placement.js';
import type { Clock } from './clock.js';
import type { ControllerDeps } from './controller-deps.js';
import { ControllerLoop } from './controller-loop.js';
import { ControllerPasses } from './controller-passes.js';
import { ControllerCosts } from './controller-costs.js';
import type { DetailedCostReport } from './cost-accounting.js';
import { DEFAULT_PREDICTION_BUDGET_SECONDS, DEFAULT_PREDICTION_HORIZON_SECONDS } from './eta-predictions.js';
import { FinishedCheckpointRetention } from './finished-checkpoint-retention.js';
import { HistoryRetention } from './history-retention.js';
import { JobControl } from './job-control.js';
import { JobDependencies } from './job-dependencies.js';
import { KeptOrphans } from './kept-orphans.js';
import { LoopMonitor } from './loop-health.js';
import { InProcessPredictionEngine, type PredictionEngine } from './prediction-engine.js';
import { WorkerThreadPredictionEngine } from './prediction-worker-engine.js';
import { Predictions } from './predictions.js';
import { QueueViews } from './queue-views.js';
import { Reconciler } from './reconciler.js';
import { DEFAULT_REPORTS_KEPT } from './report-retention.js';
import { ReportWriter } from './report-writer.js';
import { RoundRecorder } from './round-recorder.js';
import { RoundSchedule } from './round-schedule.js';
import { noCapacityWindowEnds } from './no-capacity-records.js';
import { RunLimits } from './run-limits.js';
import { buildScheduler, type SchedulerRecipe } from './scheduler-recipe.js';
import { SchedulerState } from './scheduler-state.js';
import { CloudOnlyTaskControl, type ControllerLogger } from './seams.js';
import type { RoundCause } from './service.js';
import { reconcilerSettings } from './settings.js';
import { SpotInterruptions } from './spot-interruptions.js';
import type { JobRecord } from './state-store.js';
import { storedArtifacts, type StoredArtifacts } from './stored-artifacts.js';

/**
 * What the parts call on the controller, each time anew: the catalog a price refresh replaced, and the controller's
 * own methods (a round asked for, a job's end), so that whatever reaches the controller reaches them.
 */
export interface ControllerHooks {
  readonly catalog: () => Catalog;
  /** Forwards its arguments as they are given (one or two). */
  readonly requestRound: (reason: string, cause?: RoundCause) => void;
  readonly requestPlacement: () => void;
  readonly jobEnded: (job: JobRecord) => void;
  readonly costs: () => DetailedCostReport;
  readonly safeEvent: (kind: string, message: string) => void;
  /** The passes the loop runs, as the controller runs them. */
  readonly runRound: (reason: string) => Promise<unknown>;
  readonly reconcile: () => Promise<unknown>;
}

/** Each job of the controller, as its own module (controller.ts composes them). */
export interface ControllerParts {
  /** The cloud, absent in a dry run, so no code path can reach it. */
  readonly provider: CloudProvider | undefined;
  readonly schedule: RoundSchedule;
  readonly monitor: LoopMonitor;
  readonly schedulerState: SchedulerState;
  readonly admission: Admission;
  readonly orphans: KeptOrphans;
  /** What the cluster cost (controller-costs.ts). */
  readonly costViews: ControllerCosts;
  readonly artifacts: StoredArtifacts;
  readonly reconciler: Reconciler;
  readonly queueViews: QueueViews;
  readonly predictions: Predictions;
  readonly rounds: RoundRecorder;
  readonly retention: HistoryRetention;
  readonly finishedCheckpoints: FinishedCheckpointRetention;
  readonly reports: ReportWriter;
  readonly interruptions: SpotInterruptions;
  /** Placement between rounds (between-rounds-placement.ts); absent when off or in a dry run. */
  readonly placer: BetweenRoundsPlacer | undefined;
  readonly jobs: JobControl;
  readonly runLimits: RunLimits;
  readonly dependencies: JobDependencies;
  /** When passes run, one at a time (controller-loop.ts). */
  readonly loop: ControllerLoop;
  /** What each pass does (controller-passes.ts). */
  readonly passes: ControllerPasses;
}

/**
 * Build the controller's parts from what it is built from (controller-deps.ts) and wire them to one another: the
 * scheduler from its recipe, admission under the caps, the reconciler, predictions, round recording, retention,
 * reports, spot interruptions, placement between rounds, job control, and the loop with its passes.
 */
export function buildControllerParts(
  deps: ControllerDeps,
  clock: Clock,
  log: ControllerLogger,
  hooks: ControllerHooks,
): ControllerParts {
  const provider = deps.settings.dryRun ? undefined : deps.provider;
  // The end of a capacity-error window brings a round: the jobs it kept waiting may be launched again. Read between
  // passes, outside their error handling: a store that fails here fails the next pass instead (which is reported, and
  // a lost lease ends the controller as such), never the loop.
  const schedule = new RoundSchedule(deps.settings, () => {
    try {
      return noCapacityWindowEnds(deps.store);
    } catch {
      return [];
    }
  });
  const monitor = new LoopMonitor(clock, deps.settings.loopStuckSeconds);
  const spotMarket = deps.spotMarket === true;
  const recipe: SchedulerRecipe | undefined =
    deps.schedulerRecipe ??
    (deps.scheduler === undefined
      ? { kind: 'eva', options: { ...deps.settings.eva, caps: schedulerCaps(deps.settings.caps) } }
      : undefined);
  const fromRecipe = recipe === undefined ? undefined : (catalog: Catalog) => buildScheduler(recipe, catalog);
  const schedulerState = new SchedulerState({
    store: deps.store,
    log,
    scheduler: deps.scheduler ?? buildScheduler(recipe as SchedulerRecipe, deps.catalog),
    schedulerFor: deps.schedulerFor ?? (deps.scheduler === undefined ? fromRecipe : undefined),
    save: deps.saveSchedulerState ?? true,
  });
  // Built in the state the last controller on this store saved: the classes' lags and counters carry on.
  const admissionState = new AdmissionStateKeeper({
    store: deps.store,
    log,
    catalog: deps.catalog,
    settings: {
      caps: deps.settings.caps,
      config: deps.settings.queue,
      admitBy: deps.settings.admitBy,
      spot: spotMarket,
    },
    save: deps.saveSchedulerState ?? true,
  });
  const admission = admissionState.admission;
  const orphans = new KeptOrphans(clock, log, deps.settings.clusterName);
  // Everything built here reads the catalog through this, so a price refresh (applyCatalog) reaches all of it.
  const catalog = hooks.catalog;
  const costViews = new ControllerCosts({
    store: deps.store,
    clock,
    catalog,
    billingTypes: deps.billingTypes,
    objectStore: deps.objectStore,
  });
  const artifacts = storedArtifacts(deps.objectStore, deps.store);
  const billingCatalog = (): Catalog => costViews.billingCatalog();
  const reconciler = new Reconciler({
    store: deps.store,
    catalog,
    // Dry run: the reconciler gets no provider, so no code path can reach the cloud.
    provider: deps.settings.dryRun ? undefined : deps.provider,
    tasks: deps.tasks ?? new CloudOnlyTaskControl(),
    clock,
    faults: deps.faults,
    logger: log,
    settings: reconcilerSettings(deps.settings),
    onJobEnded: (job) => hooks.jobEnded(job),
    onMoveBegun: () => deps.metrics?.countMigrations(1),
    onBarrierIdle: deps.onBarrierIdle,
    requestRound: (reason, cause) => hooks.requestRound(reason, cause),
    onOrphansKept: (instances) => orphans.update(instances),
  });
  const queueViews = new QueueViews({ store: deps.store, admission });
  const engine = (): PredictionEngine | undefined => {
    if (deps.predict === false || recipe === undefined) return undefined;
    if (deps.predict === undefined) return new WorkerThreadPredictionEngine();
    return typeof deps.predict === 'function' ? new InProcessPredictionEngine(deps.predict) : deps.predict;
  };
  const predictions = new Predictions({
    store: deps.store,
    clock,
    log,
    engine: engine(),
    estimator: engine(),
    recipe: recipe ?? { kind: 'eva', options: {} },
    schedulerState,
    admission,
    catalog,
    roundSeconds: deps.settings.roundSeconds,
    // A prediction outside a round starts from the early round the loop may run next.
    nextRoundSeconds: () => schedule.earliestEarlySeconds(),
    horizonSeconds: deps.settings.predictionHorizonSeconds ?? DEFAULT_PREDICTION_HORIZON_SECONDS,
    budgetSeconds: deps.settings.predictionBudgetSeconds ?? DEFAULT_PREDICTION_BUDGET_SECONDS,
  });
  const rounds = new RoundRecorder({
    store: deps.store,
    clock,
    settings: deps.settings,
    log,
    metrics: deps.metrics,
    workers: deps.workers,
    reconciler,
    admission,
    admissionState,
    schedulerState,
    catalog,
    queueViews,
    predictions,
  });
  const retention = new HistoryRetention({
    store: deps.store,
    clock,
    log,
    settings: deps.settings,
  });
  const finishedCheckpoints = new FinishedCheckpointRetention({
    store: deps.store,
    clock,
    log,
    objectStore: deps.objectStore,
    settings: deps.settings,
  });
  const reports = new ReportWriter({
    store: deps.store,
    clock,
    log,
    objectStore: deps.objectStore,
    clusterName: deps.settings.clusterName,
    everySeconds: deps.settings.reportEverySeconds,
    keep: deps.settings.reportsKept ?? DEFAULT_REPORTS_KEPT,
    costs: () => hooks.costs(),
    catalog: billingCatalog,
    safeEvent: (kind, message) => hooks.safeEvent(kind, message),
    lateRecordsWithinSeconds: deps.settings.workerHeartbeatTimeoutSeconds,
  });
  const interruptions = new SpotInterruptions({
    store: deps.store,
    log,
    provider,
    requestRound: (reason, cause) => hooks.requestRound(reason, cause),
    clock,
  });
  deps.workers?.onInterruption?.((instanceId, notice) =>
    interruptions.handle(instanceId, { ...notice, source: 'worker' }),
  );
  const placer =
    deps.settings.placeBetweenRounds === true && !deps.settings.dryRun
      ? new BetweenRoundsPlacer({
          store: deps.store,
          clock,
          catalog,
          admission,
          scheduler: () => schedulerState.scheduler,
          bind: deps.settings.bindBetweenRounds === true,
          workerRegistered: deps.tasks?.workerRegistered?.bind(deps.tasks),
          apply: (jobs) => reconciler.applyBetweenRoundsStarts(jobs),
          log,
        })
      : undefined;
  const jobs = new JobControl({
    store: deps.store,
    // A submission (or a cancel, freeing capacity) may be placed on paid capacity before the round.
    requestRound: (reason) => {
      hooks.requestPlacement();
      hooks.requestRound(reason);
    },
    jobEnded: (job) => hooks.jobEnded(job),
    predictAfterSubmission: () => predictions.afterSubmission(),
    executor: deps.executor,
  });
  const runLimits = new RunLimits({
    store: deps.store,
    clock,
    log,
    fail: (jobId, reason) => jobs.fail(jobId, reason),
  });
  const dependencies = new JobDependencies({
    store: deps.store,
    log,
    fail: (jobId, reason) => jobs.fail(jobId, reason),
  });
  const loop = new ControllerLoop({
    clock,
    settings: deps.settings,
    schedule,
    monitor,
    log,
    runLimits,
    reports,
    placer,
    safeEvent: (kind, message) => hooks.safeEvent(kind, message),
    runRound: (reason) => hooks.runRound(reason),
    reconcile: () => hooks.reconcile(),
  });
  const passes = new ControllerPasses({
    store: deps.store,
    clock,
    settings: deps.settings,
    log,
    workers: deps.workers,
    metrics: deps.metrics,
    provider,
    schedule,
    schedulerState,
    reconciler,
    rounds,
    retention,
    finishedCheckpoints,
    interruptions,
    placer,
    runLimits,
    dependencies,
    serial: (pass, fn) => loop.serial(pass, fn),
  });
  return {
    provider,
    schedule,
    monitor,
    schedulerState,
    admission,
    orphans,
    costViews,
    artifacts,
    reconciler,
    queueViews,
    predictions,
    rounds,
    retention,
    finishedCheckpoints,
    reports,
    interruptions,
    placer,
    jobs,
    runLimits,
    dependencies,
    loop,
    passes,
  };
}
