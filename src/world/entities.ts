import type { InstanceType } from '../core/catalog.js';
import type { InstancePlacement } from '../core/network.js';
import type { Market } from '../core/market.js';
import { demandOn, type Resources } from '../core/resources.js';
import {
  expectedRemainingSeconds,
  toDistribution,
  type StageDistribution,
  type SuccessSpec,
} from '../queue/success.js';
import type { TraceJob, TraceTask } from './trace.js';

/**
 * The simulator's mutable world: jobs, tasks and instances with the state machines of Eva's simulator and
 * master (research digest §1, §7). Only the engine mutates them; schedulers see ClusterSnapshots.
 */

/**
 * queued → launching (start issued: holds capacity; fetch + build) → running (launched: interferes) →
 * killing (checkpoint issued; still running for kill_delay) → uploading (stopped, checkpoint upload; still
 * holds capacity) → stopped (capacity freed) → launching … ; `done` once the job finished.
 */
export type TaskState = 'queued' | 'launching' | 'running' | 'killing' | 'uploading' | 'stopped' | 'done';

/**
 * pending (not arrived) → [held (arrived, waiting for its dependencies to finish) →] queued → migrating (being
 * launched or moved: pinned) → executing (all tasks launched: reconfigurable, progressing after init_delay) →
 * finished. Eva reference `JobStatus`, plus `held` for `dependsOn`.
 */
export type JobStatus = 'pending' | 'held' | 'queued' | 'migrating' | 'executing' | 'finished';

export type InstanceLifecycle =
  'instantiating' | 'starting-worker' | 'registering' | 'running' | 'terminating' | 'terminated';

export interface SimTask {
  readonly id: string;
  readonly job: SimJob;
  readonly spec: TraceTask;
  /** Co-location key `<job name>_<task name>` (digest §2). */
  readonly key: string;
  state: TaskState;
  /** Where the plan committed it (the snapshot's instanceId). */
  committed: SimInstance | undefined;
  /** Whose capacity it holds (from the start being issued until its checkpoint is uploaded or the job ends). */
  occupying: SimInstance | undefined;
  /** A start-task action waits for its gates. */
  pendingStart: boolean;
  /** Ground-truth normalized throughput on its instance, while active. */
  rate: number;
  /** A co-start wake-up already scheduled for it at this time. */
  wakeAtSeconds?: number | undefined;
  /** When it finished launching (prepared) in its current start, until its job's release is counted. */
  readySeconds?: number | undefined;
}

export interface SimJob {
  readonly index: number;
  readonly spec: TraceJob;
  readonly tasks: SimTask[];
  /** The tasks' ids, in order (shared by every snapshot). */
  readonly taskIds: string[];
  /** max over tasks of (fetch + build + upload) + init (digest §2 "Migration cost"). */
  readonly migrationDelaySeconds: number;
  status: JobStatus;
  /** Checkpointed to go back to the queue (not to move). */
  requeueAfterStop: boolean;
  /** Making progress (init_delay has passed since all its tasks launched). */
  active: boolean;
  activeSinceSeconds: number | undefined;
  /**
   * When its current run makes progress from (core/model.ts `progressStartSeconds`): set once its tasks are all
   * launched, still to come while it initializes.
   */
  progressFromSeconds: number | undefined;
  /** Invalidates a pending JobBecomesActive event (a kill cancels it, as in the reference). */
  activationToken: number;
  completedIterations: number;
  /** Time up to which completedIterations is integrated. */
  integratedToSeconds: number;
  /** Iterations per second now (0 unless active). */
  throughput: number;
  /** Invalidates a scheduled completion event whenever the rate changes. */
  version: number;
  startSeconds: number | null;
  endSeconds: number | null;
  migrations: number;
  /** Index of its root task (the network declaration's root, else 0). */
  readonly rootIndex: number;
  /** Its ground-truth latency factor P_job now (1 unless latency-sensitive and spread out). */
  latencyFactor: number;
  /** $/hour its traffic across zones costs now (while active). */
  crossZoneCostPerHour: number;
  /** ∫ P_job dt and ∫ dt over the time it made progress: its time-average application performance (NoMora §6.1). */
  performanceSeconds: number;
  activeSeconds: number;
  /** $ its traffic across zones has cost so far. */
  crossZoneCost: number;
  /** When a start was first committed for it (a plan's or a placement between rounds). */
  firstPlacedSeconds?: number | undefined;
  /** Seconds between its own periodic checkpoints while it makes progress; 0: it never checkpoints on its own. */
  checkpointIntervalSeconds: number;
  /** Iterations its last durable checkpoint holds (what a reclaimed instance sends it back to). */
  checkpointIterations: number;
  /** Its spot instances reclaimed under it, and the standalone seconds of work it lost to them. */
  interruptions: number;
  lostWorkSeconds: number;
  /** Zones where an instance of it was reclaimed, latest last. */
  interruptedZones: string[];
}

export interface SimInstance {
  readonly id: string;
  readonly type: InstanceType;
  lifecycle: InstanceLifecycle;
  /** False once the plan dropped it: it takes no new tasks and terminates when empty. */
  assignable: boolean;
  readonly committed: Set<SimTask>;
  readonly occupants: Set<SimTask>;
  /** Σ demand (on this family) of the occupants. */
  used: [number, number, number];
  /** Images built on it (Eva's simulator keeps them for the instance's lifetime). */
  readonly images: Set<string>;
  billedFromSeconds: number | undefined;
  /** When it is expected to register (its launch plus the type's delays); undefined until launched. */
  readyAtSeconds?: number | undefined;
  /** Its zone and cluster placement group (where the simulated cloud put it). */
  placement: InstancePlacement | undefined;
  /** How it was bought, and its $/hour there (spot: its pool's price). */
  readonly market: Market;
  readonly pricePerHour: number;
  /** EC2 recommended rebalancing it (the simulated spot market's early warning, spot-world.ts). */
  rebalanceRecommended?: boolean | undefined;
}

export function taskDemandOn(task: SimTask, instance: SimInstance): Resources {
  const d = demandOn(task.spec.demand, instance.type.family);
  if (d === undefined) throw new Error(`task ${task.id} cannot run on family ${instance.type.family}`);
  return d;
}

/** Whether the task is running on its instance (counts for interference): launched and not yet killed. */
export function isActive(task: SimTask): boolean {
  return task.state === 'running' || task.state === 'killing';
}

export function isReconfigurable(job: SimJob): boolean {
  return job.status === 'queued' || job.status === 'executing';
}

/** Iterations still to run (never negative). */
export function remainingIterations(job: SimJob): number {
  return Math.max(0, job.spec.totalIterations - job.completedIterations);
}

/**
 * Bring a job's completed iterations up to `nowSeconds` at its current (constant since the last call) throughput,
 * with the time-average of its latency factor and the cost of its traffic across zones.
 */
export function integrateProgress(job: SimJob, nowSeconds: number): void {
  if (job.throughput > 0) {
    const dt = nowSeconds - job.integratedToSeconds;
    job.completedIterations += job.throughput * dt;
    job.performanceSeconds += job.latencyFactor * dt;
    job.activeSeconds += dt;
    job.crossZoneCost += (job.crossZoneCostPerHour * dt) / 3600;
  }
  job.integratedToSeconds = nowSeconds;
}

/** min over the job's tasks of their ground-truth rates (data-parallel straggler model, digest §1). */
export function jobRate(job: SimJob): number {
  let r = Infinity;
  for (const t of job.tasks) r = Math.min(r, t.rate);
  return r === Infinity ? 0 : r;
}

/** Declared models are fixed per trace job: their distributions are computed once (asked every round). */
const distributions = new WeakMap<SuccessSpec, StageDistribution>();
function distributionOf(spec: SuccessSpec): StageDistribution {
  let d = distributions.get(spec);
  if (d === undefined) {
    d = toDistribution(spec);
    distributions.set(spec, d);
  }
  return d;
}

/** What the system knows of a job with a declared success model: its distribution and stages passed. */
export interface SuccessProgress {
  readonly distribution: StageDistribution;
  readonly stagesDone: number;
  /** SERPT's expected remaining seconds at full throughput, given the stages survived and work since. */
  readonly expectedRemainingSeconds: number;
}

/**
 * The declared model seen from the job's progress, or undefined for a job without one. The true (drawn) size is
 * not used: a scheduler only knows the distribution and how far the job got (success paper §2).
 */
export function successProgress(job: SimJob): SuccessProgress | undefined {
  if (job.spec.success === undefined) return undefined;
  const distribution = distributionOf(job.spec.success);
  const attained = job.completedIterations / job.spec.fullThroughput;
  const xs = distribution.checkpointsSeconds;
  let stagesDone = 0;
  // A checkpoint counts as passed once reached (tolerance: progress is integrated in floating point).
  while (stagesDone < xs.length - 1 && (xs[stagesDone] as number) <= attained + 1e-6) stagesDone += 1;
  const sinceCheckpoint = attained - (stagesDone === 0 ? 0 : (xs[stagesDone - 1] as number));
  return {
    distribution,
    stagesDone,
    expectedRemainingSeconds: Math.max(
      0,
      expectedRemainingSeconds(distribution, stagesDone) - sinceCheckpoint,
    ),
  };
}
