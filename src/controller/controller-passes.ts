import type { CloudProvider } from '../cloud/provider.js';
import { recordUploadersFromEvents } from './artifacts.js';
import type { BetweenRoundsPlacer } from './between-rounds-placement.js';
import type { Clock } from './clock.js';
import type { FinishedCheckpointRetention } from './finished-checkpoint-retention.js';
import type { HistoryRetention } from './history-retention.js';
import type { JobDependencies } from './job-dependencies.js';
import type { SyncSummary } from './reconcile/cloud-sync.js';
import type { ProgressSummary, Reconciler } from './reconciler.js';
import type { RoundMetrics, RoundOutcome, RoundRecorder } from './round-recorder.js';
import type { RoundSchedule } from './round-schedule.js';
import type { RunLimits } from './run-limits.js';
import type { SchedulerState } from './scheduler-state.js';
import type { ControllerLogger } from './seams.js';
import type { ControllerSettings } from './settings.js';
import type { SpotInterruptions } from './spot-interruptions.js';
import type { StateStore } from './state-store.js';
import { replaceSilentWorkers, type WorkerFleet } from './worker-liveness.js';

export interface ControllerPassesDeps {
  readonly store: StateStore;
  readonly clock: Clock;
  readonly settings: ControllerSettings;
  readonly log: ControllerLogger;
  readonly workers: WorkerFleet | undefined;
  readonly metrics: RoundMetrics | undefined;
  /** Absent in a dry run. */
  readonly provider: CloudProvider | undefined;
  readonly schedule: RoundSchedule;
  readonly schedulerState: SchedulerState;
  readonly reconciler: Reconciler;
  readonly rounds: RoundRecorder;
  readonly retention: HistoryRetention;
  readonly finishedCheckpoints: FinishedCheckpointRetention;
  readonly interruptions: SpotInterruptions;
  readonly placer: BetweenRoundsPlacer | undefined;
  readonly runLimits: RunLimits;
  readonly dependencies: JobDependencies;
  /** Runs a pass in the loop's sequence (controller-loop.ts `serial`). */
  readonly serial: <T>(pass: string, fn: () => Promise<T>) => Promise<T>;
}

/**
 * What each pass of the controller's loop does: recovery at start, a reconciliation between rounds, and a scheduling
 * round. Each runs in the loop's sequence (controller-loop.ts), which decides when.
 */
export class ControllerPasses {
  constructor(private readonly deps: ControllerPassesDeps) {}

  /** Crash recovery: pending intents are re-checked against the cloud and carried out (or found done). */
  async recover(): Promise<{ sync?: SyncSummary; progress?: ProgressSummary }> {
    const { store, reconciler, log } = this.deps;
    this.deps.schedulerState.load();
    // Once per state: who uploaded older build contexts, so submissions never read the event log for it.
    recordUploadersFromEvents(store);
    // Before the first round can launch: the pools of the last minutes' spot interruptions stay closed.
    this.deps.interruptions.reclosePools();
    if (this.deps.settings.dryRun) return {};
    return this.deps.serial('recovery', async () => {
      const pending = store.listIntents({ states: ['pending'] }).length;
      const sync = await reconciler.syncWithCloud();
      const progress = await reconciler.progress();
      log.info('recovered state', {
        pendingIntents: pending,
        adopted: sync.adopted.length,
        orphans: sync.orphans.length,
        keptOrphans: sync.kept.length,
        vanished: sync.vanished.length,
      });
      return { sync, progress };
    });
  }

  /** Reconcile with the cloud and carry out effects whose gates opened (between rounds). */
  reconcile(): Promise<{ sync?: SyncSummary; progress?: ProgressSummary }> {
    const { reconciler } = this.deps;
    return this.deps.serial('reconcile', async () => {
      this.deps.workers?.flushProgress?.();
      if (this.deps.settings.dryRun) return {};
      // Limits after the sync and the silent workers: a run that ended unseen (its instance gone, its worker silent)
      // counts until it ended, which only they write down (job.ran-until), not until now.
      this.replaceSilentWorkers();
      const sync = await reconciler.syncWithCloud();
      this.enforceRunLimits();
      this.deps.placer?.placeIfRequested();
      const progress = await reconciler.progress();
      return { sync, progress };
    });
  }

  /** One scheduling round (controller.ts's class comment). */
  runRound(reason: string): Promise<RoundOutcome> {
    const { reconciler, settings, metrics, placer } = this.deps;
    return this.deps.serial('round', async () => {
      const startedMs = performance.now();
      this.deps.schedule.started(this.deps.clock.nowSeconds());
      this.deps.workers?.flushProgress?.();
      let sync: SyncSummary | undefined;
      if (!settings.dryRun) {
        this.replaceSilentWorkers();
        sync = await reconciler.syncWithCloud();
        this.enforceRunLimits(); // after them, as in `reconcile`
        // Placed first, the round's plan sees them placed (as the simulator's round sees its placements).
        placer?.placeIfRequested(true);
        await reconciler.progress();
      }
      // A job whose dependency ended without success can never start: it ends before the plan is made.
      const unreachable = this.deps.dependencies.failUnreachable();
      metrics?.countJobsFailedByRule?.('dependency', unreachable.length);
      const planned = this.deps.rounds.planAndRecord(reason);
      this.deps.retention.afterRound(planned.round);
      this.deps.finishedCheckpoints.afterRound();
      placer?.noteRound(planned.capHoldsJobsBack === true);
      const progress = settings.dryRun ? undefined : await reconciler.progress();
      if (planned.round !== undefined) metrics?.observeRound((performance.now() - startedMs) / 1000);
      return { ...planned, sync, progress };
    });
  }

  private enforceRunLimits(): void {
    // Enforced first: an optional call's arguments are not evaluated when there is no metrics object.
    const stopped = this.deps.runLimits.enforce();
    this.deps.metrics?.countJobsFailedByRule?.('run-limit', stopped.length);
  }

  private replaceSilentWorkers(): void {
    const { workers, provider } = this.deps;
    if (workers === undefined || provider === undefined) return;
    replaceSilentWorkers({
      workers,
      store: this.deps.store,
      log: this.deps.log,
      reconciler: this.deps.reconciler,
    });
  }
}
