import type { MarketWorkAtRisk } from './work-at-risk.js';
import type { DecisionRecord } from '../scheduler/types.js';
import type { JobSpec } from './job-spec/spec.js';
import type { OrphanView } from './kept-orphans.js';
import type { InstanceRecord, JobRecord, StateStore, TaskRecord } from './state-store.js';
import type { MonthToDateCosts } from './month-to-date.js';
import type { MonthReportSource } from './stored-month-report.js';

/**
 * How a submitted job is made durable (its spec in the job archive): withdrawn when that fails (a first submission) or
 * left be (the jobs of a resend, made before); whether it is one job of an array submission.
 */
export interface KeepOptions {
  readonly withdraw: boolean;
  readonly ofArray: boolean;
}

/** Runs inside a submission's transaction with the jobs it recorded; throwing rolls the submission back. */
export type SubmissionCommitHook = (jobs: readonly JobRecord[]) => void;

/**
 * What the HTTP API (and so the CLI) asks of the running controller. Reads go straight to the StateStore;
 * actions go through here so the controller can record intents and schedule an early round.
 * Implemented by the controller loop (src/controller/controller.ts); the API server depends only on this.
 */
export interface ControllerService {
  readonly store: StateStore;
  /**
   * Validated spec in, stored job out; triggers an early scheduling round. `inCommit` runs inside the submission's
   * transaction once its job is recorded (the API records an idempotency key there); throwing rolls the job back.
   */
  submit(spec: JobSpec, team: string, inCommit?: SubmissionCommitHook): JobRecord;
  /**
   * An array (`arrayProperties` with a size and no index): its jobs, each the spec with its index, stored together
   * (all or none), ids in index order; triggers an early scheduling round. `inCommit` as for `submit`.
   */
  submitArray(spec: JobSpec, team: string, inCommit?: SubmissionCommitHook): JobRecord[];
  /** Cancel a job (`reason`: what its record says, by default that it was cancelled by request): its tasks are stopped and its instances freed at the next round. */
  cancel(jobId: string, reason?: string): JobRecord;
  /** Cancel jobs together, in one commit (a whole array); those already ended are returned as they are. */
  cancelMany(jobIds: readonly string[], reason: string): JobRecord[];
  /** Move every task off an instance and retire it. */
  drain(instanceId: string): InstanceRecord;
  /** Current cluster: instances (not terminated), tasks placed on them, and the current $/hour. */
  cluster(): ClusterView;
  /** The latest decision records that mention a job (waiting, moved, placed), newest first. */
  why(jobId: string, limit?: number): WhyRecord[];
  /**
   * Cost accounting (per job, team, instance) since a time, in seconds on the store's clock, up to now or, for a
   * period that has ended (`untilSeconds` before now), as it stood at its end: a month's figures, say.
   */
  costs(sinceSeconds?: number, untilSeconds?: number): CostReport;
  /**
   * `costs`, but a whole UTC month that has ended comes from the report stored as it ended (not replayed at today's
   * prices) when there is one, saying where its figures come from. A service without stored reports leaves it out.
   */
  periodCosts?(
    sinceSeconds?: number,
    untilSeconds?: number,
  ): Promise<CostReport & { readonly monthReport?: MonthReportSource }>;
  /**
   * What each of these jobs has cost so far: `costs().byJob`'s figures (0 for a job never charged). A service that
   * has no quicker way leaves it out, and the figures come from `costs()`.
   */
  costsOfJobs?(jobIds: readonly string[]): Map<string, number>;
  /** The current UTC month's bill so far, the fleet's and each team's (for /metrics); absent where not kept. */
  monthToDateCosts?(): MonthToDateCosts;
  /** What losing the instances now would make running tasks redo, by market (for /metrics); absent where not kept. */
  workAtRisk?(): MarketWorkAtRisk[];
  /** Ask for an early round (arrivals, completions, drains; `capacity`: capacity lost or about to be). */
  requestRound(reason: string, cause?: RoundCause): void;
}

/**
 * Why a round is asked for before the period's next: an `event` (a submission, a completion, a drain), or `capacity`
 * lost or about to be (a spot notice or rebalance recommendation, an instance or its worker gone). Without early rounds
 * only the second is planned for at once (ControllerSettings.earlyRounds).
 */
export type RoundCause = 'event' | 'capacity';

export interface ClusterView {
  readonly instances: readonly (InstanceRecord & {
    readonly costPerHour: number;
    readonly taskIds: readonly string[];
  })[];
  readonly tasks: readonly TaskRecord[];
  readonly costPerHour: number;
  /** Instances tagged with the cluster that the state does not know, left running under the keep policy. */
  readonly orphans: readonly OrphanView[];
}

export interface WhyRecord {
  readonly round: number;
  readonly atSeconds: number;
  /**
   * What happened to the job and why, in words ("moved to inst-4 (c7i.xlarge, new) because inst-2 was drained",
   * "kept waiting: class small is at its share of the capped capacity (position 2 in its queue)"); the numbers are
   * in `decision`.
   */
  readonly summary: string;
  readonly decision: DecisionRecord;
}

export interface CostLine {
  readonly id: string;
  readonly cost: number;
}

export interface CostReport {
  readonly generatedAtSeconds: number;
  readonly sinceSeconds: number;
  readonly totalCost: number;
  readonly byJob: readonly (CostLine & { readonly team: string; readonly name: string })[];
  readonly byTeam: readonly CostLine[];
  readonly byInstance: readonly (CostLine & { readonly typeName: string; readonly idleCost: number })[];
  /** Instance time not attributable to any task (booting, empty). */
  readonly idleCost: number;
  /** Cost of instance time spent checkpointing, restoring and re-initializing moved jobs. */
  readonly migrationOverheadCost: number;
}
