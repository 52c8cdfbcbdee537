import { queueViews } from '../queue/admission-views.js';
import type { Catalog } from '../core/catalog.js';
import { type Admission, type PreemptionVictim, type QueueDecision } from '../queue/admission.js';
import { runRound, waitingCapName, type PlannedRound } from '../round/round.js';
import type { Action, ConfigurationDiff } from '../scheduler/actions.js';
import { plannedPricePerHour } from '../scheduler/market-choice.js';
import type { Configuration, DecisionRecord, WaitingEntry } from '../scheduler/types.js';
import { admissionInfo } from './admission-info.js';
import type { AdmissionStateKeeper } from './admission-state.js';
import type { Clock } from './clock.js';
import { instanceBilledPricePerHour } from './instance-market.js';
import type { SyncSummary } from './reconcile/cloud-sync.js';
import type { Predictions } from './predictions.js';
import type { QueueViews } from './queue-views.js';
import type { ProgressSummary, Reconciler } from './reconciler.js';
import type { SchedulerState } from './scheduler-state.js';
import type { ControllerLogger } from './seams.js';
import type { ControllerSettings } from './settings.js';
import { buildSnapshot, liveJobIdsOf, readSnapshotInputs } from './snapshot.js';
import type { JsonValue, StateStore } from './state-store.js';
import type { WorkerFleet } from './worker-liveness.js';

/** A rule of a job's spec by which the controller ends it as failed. */
export type JobRule = 'run-limit' | 'dependency';

/** Counters the loop feeds (the API's Prometheus ControllerMetrics has this shape). */
export interface RoundMetrics {
  observeRound(durationSeconds: number): void;
  countMigrations(jobs?: number): void;
  countCapHit(cap: string, times?: number): void;
  countJobsFailedByRule?(rule: JobRule, jobs: number): void;
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
  /** Admission kept a job out for the caps (round.ts): placement between rounds acts until the next round. */
  readonly capHoldsJobsBack?: boolean | undefined;
}

export interface RoundRecorderDeps {
  readonly store: StateStore;
  readonly clock: Clock;
  readonly settings: ControllerSettings;
  readonly log: ControllerLogger;
  readonly metrics: RoundMetrics | undefined;
  readonly workers: WorkerFleet | undefined;
  readonly reconciler: Reconciler;
  readonly admission: Admission;
  /** Saves the admission's state after each round (admission-state.ts). */
  readonly admissionState: Pick<AdmissionStateKeeper, 'save'>;
  readonly schedulerState: SchedulerState;
  /** The current catalog (a price refresh replaces it). */
  readonly catalog: () => Catalog;
  readonly queueViews: QueueViews;
  readonly predictions: Predictions;
}

/**
 * A scheduling round as the controller records it: the round itself (round/round.ts) on a snapshot of the store, then
 * the plan recorded and turned into intents (reconciler.ts), or recorded unapplied (dry run, a broken cap), the
 * queue views and preemptions written, a prediction run when due, and the admission's state and the scheduler's
 * learned state saved.
 */
export class RoundRecorder {
  /**
   * The jobs the latest round kept waiting, planned or not (in memory). A round with nothing to plan records no round,
   * so the recorded round alone would keep showing waits that round ended, and none it began.
   */
  private latestWaits: readonly WaitingEntry[] | undefined;

  constructor(private readonly deps: RoundRecorderDeps) {}

  /** The jobs the latest round of this process kept waiting; undefined before its first round. */
  latestWaiting(): readonly WaitingEntry[] | undefined {
    return this.latestWaits;
  }

  /** Snapshot → the round (round/round.ts) → record → intents, synchronously (no other write can interleave). */
  planAndRecord(reason: string): Omit<RoundOutcome, 'sync' | 'progress'> {
    this.deps.schedulerState.load();
    const now = this.deps.clock.nowSeconds();
    const inputs = readSnapshotInputs(this.deps.store, now, this.deps.workers?.roundRtts?.());
    const snapshot = buildSnapshot(inputs);
    // Taken before the round plans, so the prediction replays this round (round.ts forkForPrediction, as data).
    const fork = this.deps.predictions.due(inputs) ? this.deps.predictions.captureFork() : undefined;
    const outcome = runRound({
      snapshot,
      jobInfo: admissionInfo(inputs, snapshot, this.deps.store),
      admission: this.deps.admission,
      scheduler: this.deps.schedulerState.scheduler,
      // Normalized throughputs reported by workers since the last round teach the co-location table.
      observations: this.deps.workers?.takeObservations() ?? [],
      liveJobIds: liveJobIdsOf(inputs),
      catalog: this.deps.catalog(),
      carriedOut: !this.deps.settings.dryRun,
    });
    const queue = outcome.queue;
    // Computed once: what the API shows and what the predictions' basis counts.
    const views = queueViews(queue, this.deps.admission);
    const planned = outcome.planned;
    if (planned === undefined) {
      // Kept waiting all the same (a job over a cap alone, on an idle cluster): counted as a planned round counts it.
      this.latestWaits = outcome.idleWaits ?? [];
      for (const w of this.latestWaits) this.deps.metrics?.countCapHit(waitingCapName(w));
      this.deps.queueViews.record(views, undefined);
      // Nothing to plan (only jobs the caps never admit, no instance) is still a world to predict: a job back in the
      // queue that can no longer fit keeps no ETA of the fleet it ran on.
      if (fork !== undefined) this.deps.predictions.afterRound(inputs, fork, now, views);
      // Admission decided all the same: its lags and counters moved.
      this.deps.admissionState.save();
      return { actions: [], launched: new Map(), queue, capHoldsJobsBack: outcome.capHoldsJobsBack };
    }
    const { plan, victims, capViolation } = planned;
    // Every job a cap or the queue kept waiting this round, under the cap's name (the queue's line names a position).
    this.latestWaits = plan.decision.waiting;
    for (const w of plan.decision.waiting) this.deps.metrics?.countCapHit(waitingCapName(w));
    const result =
      this.deps.settings.dryRun || capViolation !== undefined
        ? this.recordUnapplied(planned, reason)
        : this.apply(planned, reason);
    this.deps.queueViews.record(views, plan.decision, result.notApplied === undefined ? victims : []);
    if (fork !== undefined) this.deps.predictions.afterRound(inputs, fork, now, views);
    // After the plan is recorded: a saved preemption in progress always has its stop in the store.
    this.deps.admissionState.save();
    this.deps.schedulerState.save();
    return { ...result, capHoldsJobsBack: outcome.capHoldsJobsBack };
  }

  /** A dry run, or a plan over a cap (the safety rail under the scheduler): recorded, never carried out. */
  private recordUnapplied(planned: PlannedRound, reason: string): Omit<RoundOutcome, 'sync' | 'progress'> {
    const { plan, diff, capViolation } = planned;
    const notApplied = capViolation === undefined ? 'dry run' : `plan breaks a cap: ${capViolation}`;
    const round = this.deps.store.transaction(() => {
      const recorded = this.deps.store.recordRound({
        configuration: plan.configuration,
        decision: plan.decision,
      });
      this.deps.store.appendEvent({
        kind: capViolation === undefined ? 'round.dry-run' : 'round.rejected',
        message: `round ${recorded.round} (${reason}): ${notApplied}; would do ${describeActions(diff)}`,
        data: { round: recorded.round, actions: diff.actions.map(actionJson) },
      });
      return recorded;
    });
    if (capViolation !== undefined) {
      this.deps.log.error(`round ${round.round}: ${notApplied}`);
      this.deps.metrics?.countCapHit(capViolation.split(':')[0] ?? 'cap');
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
    const applied = this.deps.reconciler.applyPlan(plan, diff, () => this.recordPreemptions(victims));
    this.deps.log.info(
      `round ${applied.round} (${reason}): ${plan.decision.chosen}; ${describeActions(diff)}`,
      { costPerHour: planCostPerHour(plan.configuration, this.deps.catalog(), this.deps.store) },
    );
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
    this.deps.store.transaction(() => {
      for (const v of victims) {
        this.deps.store.appendEvent({
          kind: 'queue.preempted',
          jobId: v.jobId,
          message: `job ${v.jobId} checkpointed back to the queue: ${v.reason}`,
          data: { classId: v.classId, forClassId: v.forClassId },
        });
      }
    });
  }
}

/**
 * What the plan's fleet costs, $/hour: each instance at its own market's price, as the cluster view and /metrics bill
 * it (an existing one as it was bought, a new one as the plan buys it). Not the chosen candidate's `costPerHour`: in a
 * round where some job may use spot, candidates price every instance at spot and add rebalance risk premiums, a
 * valuation for choosing between plans that no bill shows.
 */
export function planCostPerHour(configuration: Configuration, catalog: Catalog, store: StateStore): number {
  const known = new Set(catalog.types.map((t) => t.name));
  return configuration.instances.reduce((sum, i) => {
    const record = i.isNew ? undefined : store.getInstance(i.id);
    if (record !== undefined) return sum + instanceBilledPricePerHour(catalog, store, record);
    return sum + (known.has(i.typeName) ? plannedPricePerHour(catalog, i) : 0);
  }, 0);
}

function describeActions(diff: ConfigurationDiff): string {
  const count = (kind: Action['kind']): number => diff.actions.filter((a) => a.kind === kind).length;
  return `${count('launch-instance')} launch(es), ${count('start-task')} task start(s), ${count('checkpoint-stop')} checkpoint-stop(s), ${count('terminate-instance')} termination(s)`;
}

function actionJson(action: Action): JsonValue {
  return JSON.parse(JSON.stringify(action)) as JsonValue;
}
