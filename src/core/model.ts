import type { FamilyDemand } from './resources.js';
import type { Market } from './market.js';
import type { InstancePlacement, JobNetwork, MeasuredRtt } from './network.js';
import type { SpotPreference } from './spot.js';
import type { FamilyGroupQuota } from './quota-groups.js';

/**
 * The scheduler's view of the cluster: plain data, built each round by the simulator or the controller.
 * Times are seconds on the runtime's clock (virtual or real).
 */
export interface SchedTask {
  readonly id: string;
  readonly jobId: string;
  /**
   * Co-location identity: tasks with the same key interfere alike (Eva reference: `<job name>_<task name>`,
   * e.g. `resnet18[3]_node0`). The co-location throughput table is keyed by it.
   */
  readonly key: string;
  readonly demand: FamilyDemand;
  /** Instance the task is committed to now (running or being started there), if any. */
  readonly instanceId?: string | undefined;
}

/** The largest value of an hour of a job's completion time accepted anywhere, $ (far above any instance's price). */
export const MAX_VALUE_OF_TIME_PER_JOB_HOUR = 10_000;

/** A scheduler's value of an hour of a job's completion time: $, or 'auto' (learned from a target slowdown). */
export type ValueOfTimeSetting = number | 'auto';

export interface SchedJob {
  readonly id: string;
  readonly taskIds: readonly string[];
  /**
   * False while the job is being launched or migrated: its tasks stay where they are committed
   * (Eva reference `_create_initial_config`).
   */
  readonly reconfigurable: boolean;
  readonly arrivalSeconds: number;
  /**
   * When the job last started making progress on its current instances: its init delay after its last task was
   * prepared (image fetched or built, checkpoint restored; until then the job is pinned and this is undefined;
   * `progressStartSeconds`). While it initializes, that time still to come, so its no-move window holds it through its
   * init; undefined for a job not running.
   */
  readonly runningSinceSeconds?: number | undefined;
  /** The job asks not to be moved while it initializes nor for this many seconds after it starts making progress. */
  readonly noMoveSeconds?: number | undefined;
  /**
   * Seconds a move takes the job out of service: max over its tasks of (checkpoint upload + fetch + build)
   * plus the job's init delay (Eva reference `Job.get_migration_cost`).
   */
  readonly migrationDelaySeconds: number;
  /** Time of the job's last durable checkpoint; work since then is lost by a move. Undefined = never ran. */
  readonly lastCheckpointSeconds?: number | undefined;
  /** Expected seconds until the job completes at full throughput, when known (declared or predicted). */
  readonly expectedRemainingSeconds?: number | undefined;
  /** Its latency sensitivity, pattern, root and traffic (latency-aware placement); absent: insensitive, no traffic. */
  readonly network?: JobNetwork | undefined;
  /** Whether it may run on spot capacity; absent: allowed. */
  readonly spot?: SpotPreference | undefined;
  /**
   * The most one spot interruption may delay it (its owner's bound on the ETA slip), seconds: while an interruption
   * would cost it more (spot-cost.ts `interruptionDelaySeconds`), new instances for it are bought on demand.
   */
  readonly spotMaxDelaySeconds?: number | undefined;
  /**
   * How often it checkpoints on its own, in seconds; 0: never (an interruption loses all its work); absent: unknown
   * (the age of its last checkpoint is what an interruption would lose).
   */
  readonly checkpointIntervalSeconds?: number | undefined;
  /** Zones where its spot instances were reclaimed, latest last (a recovery may avoid them). */
  readonly interruptedZones?: readonly string[] | undefined;
  /**
   * What an hour of this job's completion time is worth to its owner, in $ (the job spec's `valueOfTimePerJobHour`);
   * absent: the scheduler's default. A scheduler that weighs time adds this much per hour of delay it causes.
   */
  readonly valueOfTimePerHour?: number | undefined;
}

export type InstanceState = 'launching' | 'running';

export interface SchedInstance {
  readonly id: string;
  readonly typeName: string;
  readonly state: InstanceState;
  /** Tasks committed to this instance. */
  readonly taskIds: readonly string[];
  /** Its zone and placement group, when known. */
  readonly placement?: InstancePlacement | undefined;
  /** How it is bought; absent: on demand. */
  readonly market?: Market | undefined;
  /** EC2 recommended rebalancing it: a spot instance at elevated risk of an interruption. */
  readonly rebalanceRecommended?: boolean | undefined;
}

export interface ClusterSnapshot {
  readonly nowSeconds: number;
  readonly jobs: readonly SchedJob[];
  readonly tasks: readonly SchedTask[];
  readonly instances: readonly SchedInstance[];
  /** Latest measured round trips between instances (latency-aware placement); absent when nothing is measured. */
  readonly measuredRtts?: readonly MeasuredRtt[] | undefined;
  /** The queue layer's caps keep jobs waiting this round (set by the round for the scheduler's observe). */
  readonly capHoldsJobsBack?: boolean | undefined;
  /**
   * Instances that left `instances` lately because the cloud reclaimed them (a spot interruption notice, or the cloud
   * terminated them), as opposed to a drain, a lost worker or a retirement: what the learned rebalance risk counts
   * (scheduler/rebalance-risk.ts). Absent: the source does not tell exits apart, and every instance a plan kept that
   * left counts as reclaimed (the simulator, where a reclaim is the only way such an instance leaves).
   */
  readonly reclaimedInstanceIds?: readonly string[] | undefined;
  /**
   * Instance types the cloud has no capacity for in any zone it may launch in, per market, until the end of its
   * capacity-error window: the round keeps waiting a job that only such types could host (round/capacity-holds.ts).
   * Absent: the cloud refuses nothing (the simulator's engine).
   */
  readonly noCapacity?: readonly NoCapacityOffering[] | undefined;
}

/** An instance type the cloud refused in one market for want of capacity in every zone, until `untilSeconds`. */
export interface NoCapacityOffering {
  readonly typeName: string;
  readonly market: Market;
  readonly untilSeconds: number;
}

/** Hard caps that no plan may exceed (scheduling core, "beyond the paper"). */
export interface Caps {
  readonly maxCostPerHour?: number | undefined;
  readonly maxInstances?: number | undefined;
  readonly maxMigrationsPerRound?: number | undefined;
  /** vCPU/GPU quotas per family group (core/quota-groups.ts), on demand and on spot. */
  readonly quotas?: readonly FamilyGroupQuota[] | undefined;
  /** Family → group overrides, for families `awsQuotaGroup` does not know or accounts set up differently. */
  readonly familyGroups?: Readonly<Record<string, string>> | undefined;
}

/**
 * When a running job makes progress from: its init delay after every task of its current run was prepared. Both
 * runtimes' snapshots date `runningSinceSeconds` by it, a time still to come while the job initializes.
 */
export function progressStartSeconds(preparedAtSeconds: number, initDelaySeconds: number): number {
  return preparedAtSeconds + initDelaySeconds;
}

/**
 * Whether a running job is inside its no-move window (`noMoveSeconds`): through its init, and for that long after it
 * began making progress (like Karpenter's duration-form `do-not-disrupt`).
 */
export function inNoMoveWindow(job: SchedJob, nowSeconds: number): boolean {
  return (
    job.noMoveSeconds !== undefined &&
    job.runningSinceSeconds !== undefined &&
    nowSeconds < job.runningSinceSeconds + job.noMoveSeconds
  );
}

/** When the job began making progress, if it has by now (undefined while it initializes or before it runs). */
export function progressSinceSeconds(job: SchedJob, nowSeconds: number): number | undefined {
  const since = job.runningSinceSeconds;
  return since !== undefined && since <= nowSeconds ? since : undefined;
}
