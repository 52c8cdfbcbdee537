import type { InstancePlacement } from '../core/network.js';
import type { Market } from '../core/market.js';
import type { Catalog } from '../core/catalog.js';
import type { ClusterSnapshot } from '../core/model.js';
import type { SerializedColocationTable } from './colocation-table.js';

/** An instance in a plan: an existing one (by id) or a new one to launch (`isNew`, id `new-<n>`). */
export interface PlannedInstance {
  readonly id: string;
  readonly typeName: string;
  readonly isNew: boolean;
  readonly taskIds: readonly string[];
  /** For a new instance: where to launch it (zone, cluster placement group); unset means anywhere. */
  readonly placement?: InstancePlacement | undefined;
  /** How it is bought (a new one: how to launch it; an existing one: as it was); absent: on demand. */
  readonly market?: Market | undefined;
}

export interface Configuration {
  readonly instances: readonly PlannedInstance[];
}

/** The numbers behind one candidate plan (Eva §4.5). Money in $, rates in $/s. */
export interface CandidateSummary {
  /**
   * full/partial: Eva's two plans; full-standalone: Full Reconfiguration at Eva's standalone prices (packed prices,
   * small rounds); stay: move nothing; consolidate: stay plus Karpenter-style delete/replace moves
   * (src/scheduler/consolidation-candidate.ts); exact: the ILP optimum (small problems, optional); latency: stay, but
   * the jobs whose measured network performance stayed low are placed again (src/scheduler/latency-migration.ts).
   */
  readonly name:
    'full' | 'full-standalone' | 'partial' | 'stay' | 'consolidate' | 'rebalance' | 'exact' | 'latency';
  readonly costPerHour: number;
  readonly instances: number;
  readonly newInstances: number;
  readonly savingPerSecond: number;
  readonly migrationCost: number;
  readonly movedJobs: readonly string[];
  /** Why the candidate was not eligible (a cap it breaks), if so. */
  readonly rejectedBecause?: string | undefined;
  /** Over a cap as packed, it is weighed as cut to the caps: this many newly admitted jobs wait for a later round. */
  readonly leftWaiting?: number | undefined;
  /** $/hour of network-aware jobs' traffic crossing zones in this plan, when any (part of the saving's cost). */
  readonly crossZoneCostPerHour?: number | undefined;
  /**
   * Value of time (EvaOptions.valueOfTimePerJobHour), when weighed: $/hour of the completion time this plan's
   * co-location slowdown adds (Σ over tasks of v·(1 − r)), a cost on top of `savingPerSecond`'s dollars.
   */
  readonly timeCostPerHour?: number | undefined;
  /** Value of time: $ of the completion time moves (downtime, lost work) and waits for new instances add, once. */
  readonly migrationTimeCost?: number | undefined;
}

/** A job a round kept waiting, and what kept it. */
export interface WaitingEntry {
  readonly jobId: string;
  /**
   * Why, for people: the cap's name when the scheduler cut the plan to a cap (`maxCostPerHour`), the queue's line
   * otherwise (`queue small: class-share, position 2`).
   */
  readonly cap: string;
  /**
   * The cap's name alone, one of few (`maxCostPerHour`, `maxInstances`, `quota p maxGpus`, `class small share`…), for
   * counting waits by cap. Absent where `cap` is already that name, and in rounds recorded before it was kept:
   * read it through `waitingCapName` (round/round.ts).
   */
  readonly capName?: string | undefined;
  /**
   * For a job that can never run under the caps: every cap it breaks on its own (`capName` is the first), so that
   * raising one of them is not taken for enough. Absent when it breaks one, or none.
   */
  readonly brokenAlone?: readonly string[] | undefined;
}

/** Why a round's plan was chosen; shown to users by `fleetwise why` and kept in the state store. */
export interface DecisionRecord {
  readonly scheduler: string;
  readonly nowSeconds: number;
  readonly candidates: readonly CandidateSummary[];
  readonly chosen: CandidateSummary['name'] | 'baseline';
  readonly horizonSeconds?: number | undefined;
  /** A move must pay back this many times its migration cost over the horizon (Eva's eq. 1 is 1). */
  readonly paybackMargin?: number | undefined;
  /**
   * The task prices the candidates' savings were figured at (Eva's reservationPrice; absent: not Eva, or a round
   * recorded before it was kept): `standalone`, each task's cheapest instance type alone; `packed`, its dominant
   * share of a packed instance's price ÷ `packingEfficiency`, at most the standalone price (tasks of multi-task jobs
   * at the standalone price).
   */
  readonly prices?: 'standalone' | 'packed' | undefined;
  /** With packed prices: the share of a packed instance's bottleneck capacity they assume is used (θ). */
  readonly packingEfficiency?: number | undefined;
  /** The default value of an hour of a job's completion time, in $, when time was weighed (absent: dollars only). */
  readonly valueOfTimePerJobHour?: number | undefined;
  readonly eventRatePerSecond?: number | undefined;
  readonly fullFraction?: number | undefined;
  readonly reason: string;
  /** Jobs kept off the plan by a cap or the queue (they wait), with why. */
  readonly waiting: readonly WaitingEntry[];
  /** Jobs that could have moved but were kept in place, with why (no-move window, finishing soon). */
  readonly pinned: readonly { readonly jobId: string; readonly why: string }[];
}

export interface Plan {
  readonly configuration: Configuration;
  readonly decision: DecisionRecord;
}

/** One observed normalized throughput per running task (observed / standalone, in (0, 1]). */
export interface ThroughputObservation {
  readonly taskId: string;
  readonly normalizedThroughput: number;
}

/** What a runtime tells a scheduler's plan beside the snapshot. */
export interface PlanContext {
  /**
   * Every job the runtime has that has not ended (queued, held, running, or left out of the snapshot for now), by id.
   * A job leaves the snapshot without finishing (admission holds it back, a preemption sends it back to the queue, it
   * is bound for no instance): what it is not in has ended. Absent: the runtime does not say, and a job missing from
   * the snapshot is taken as ended.
   */
  readonly liveJobIds?: readonly string[] | undefined;
}

/**
 * Every policy (Eva, its ablations, the baselines) implements this, so the simulator and the controller drive
 * them alike. A scheduler may keep state between rounds (the co-location table, event history) but does no I/O.
 */
export interface Scheduler {
  readonly name: string;
  /** Throughputs observed since the last round, with the snapshot they were observed under. */
  observe(snapshot: ClusterSnapshot, observations: readonly ThroughputObservation[]): void;
  plan(snapshot: ClusterSnapshot, context?: PlanContext): Plan;
  /**
   * An independent copy with the same options and learned state, for completion-time predictions (PCS §4: the
   * same scheduler run forward in virtual time). Schedulers without state between rounds may omit it: they are
   * then reused as they are.
   */
  fork?(): Scheduler;
  /**
   * The normalized throughput the scheduler expects for a task (co-location key) next to others: what it has
   * learned (interference included). Predictions use it; schedulers that do not model interference omit it (1).
   */
  expectedRate?(taskKey: string, otherKeys: readonly string[]): number;
  /**
   * What it learned of co-location (Eva §4.4), in the form a scheduler can start from again: the controller shows it,
   * a simulation saves it. Schedulers that learn none omit it.
   */
  learnedColocation?(): SerializedColocationTable;
}

export interface SchedulerContext {
  readonly catalog: Catalog;
}
