import type { Catalog } from '../core/catalog.js';
import type { CloudProvider } from '../cloud/provider.js';
import type { ObjectStore } from '../storage/object-store.js';
import type { JobArchive } from './backup/job-archive.js';
import type { Clock } from './clock.js';
import type { BarrierIdleHook } from './co-start-records.js';
import type { PredictFn } from './eta-predictions.js';
import type { ExecutorKind } from './execution-check.js';
import type { FaultInjector } from './faults.js';
import type { BillingTypes } from './instance-market.js';
import type { PredictionEngine } from './prediction-engine.js';
import type { RoundMetrics } from './round-recorder.js';
import type { SchedulerRecipe } from './scheduler-recipe.js';
import type { ControllerScheduler } from './scheduler-state.js';
import type { ControllerLogger, TaskControl } from './seams.js';
import type { ControllerSettings } from './settings.js';
import type { StateStore } from './state-store.js';
import type { WorkerFleet } from './worker-liveness.js';

/** What a Controller (controller.ts) is built from: its store, catalog, edges (cloud, tasks, object store) and settings. */
export interface ControllerDeps {
  readonly store: StateStore;
  readonly catalog: Catalog;
  /** Types only ended instances ran that the catalog lacks: billed in reports, never planned (instance-market.ts). */
  readonly billingTypes?: BillingTypes | undefined;
  /** Required unless `settings.dryRun`; a dry run never touches it. */
  readonly provider?: CloudProvider | undefined;
  readonly tasks?: TaskControl;
  readonly clock?: Clock;
  /** Where cost reports go; without one, reports are only computed on demand. */
  readonly objectStore?: ObjectStore | undefined;
  /**
   * Every accepted job's spec and end in the object store (backup/job-archive.ts), so a restore from a backup
   * rebuilds what the backup missed; without one, submissions are answered without it.
   */
  readonly jobArchive?: JobArchive | undefined;
  readonly settings: ControllerSettings;
  readonly faults?: FaultInjector | undefined;
  readonly logger?: ControllerLogger | undefined;
  /** Defaults to the scheduler `schedulerRecipe` describes. */
  readonly scheduler?: ControllerScheduler;
  /**
   * How to build the scheduler (plain data): the controller builds its own from it when `scheduler` is not given,
   * and predictions rebuild it in their worker thread. Defaults to Eva with the settings' options and caps. An
   * injected `scheduler` without its recipe gets no predictions.
   */
  readonly schedulerRecipe?: SchedulerRecipe | undefined;
  /**
   * Builds the scheduler for a repriced catalog (applyCatalog). Defaults to Eva with the configured caps when
   * `scheduler` is not given; with an injected scheduler and no factory, a new catalog leaves the scheduler as it is.
   */
  readonly schedulerFor?: ((catalog: Catalog) => ControllerScheduler) | undefined;
  /**
   * The cloud sells spot and the scheduler buys it (EC2; not local mode): admission then sizes a job that may go on
   * spot at spot prices and against the spot quota groups, as the plan will buy it (AdmissionSettings.spot).
   */
  readonly spotMarket?: boolean | undefined;
  readonly metrics?: RoundMetrics | undefined;
  /**
   * Holds at the co-start barrier that ended without a release (a timeout, a drained or lost instance, the job's end):
   * what they newly cost, as they end. A measured start reports its own holds (worker-task-control.ts
   * `onStartMeasured`), so each hold is reported once.
   */
  readonly onBarrierIdle?: BarrierIdleHook | undefined;
  /** Workers (worker-task-control.ts): throughput observations, and silent workers whose instance is replaced. */
  readonly workers?: WorkerFleet | undefined;
  /**
   * Completion-time predictions (PCS §4, eta-world.ts): by default in a worker thread running the simulator's
   * `predictCompletions` (prediction-worker-engine.ts); a prediction function to run in this thread instead (tests),
   * another engine, or false to turn them off.
   */
  readonly predict?: PredictFn | PredictionEngine | false | undefined;
  /**
   * False: the scheduler's learned state and the admission's queue state are not saved after each round. For a
   * controller that is never started again on its store (the simulator's runtime), where nothing would read them back
   * and writing them took a seventh of a run.
   */
  readonly saveSchedulerState?: boolean | undefined;
  /**
   * How the workers run tasks, when known: submissions are then checked against it (execution-check.ts: warnings for
   * an image the process executor ignores, refusals for what cannot run). Unknown (tests, the simulator) checks nothing.
   */
  readonly executor?: ExecutorKind | undefined;
}
