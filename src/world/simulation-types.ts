import type { BindOrLaunchChoice } from '../scheduler/expected-start.js';
import type { Catalog } from '../core/catalog.js';
import type { Admission } from '../queue/admission.js';
import type { PredictionFork } from '../round/round.js';
import type { Scheduler } from '../scheduler/types.js';
import type { GroundTruth } from './ground-truth.js';
import type { NetworkConfig } from './network-config.js';
import type { TaskRate } from './progress.js';
import type { SpotSimulation } from './spot-world.js';
import type { Trace } from './trace.js';
import type { SimWorld } from './world.js';

/** What a simulation run is given and what it reports while it runs (src/world/simulation.ts). */

export interface SimulationProgress {
  readonly nowSeconds: number;
  readonly finishedJobs: number;
  readonly totalJobs: number;
  readonly costSoFar: number;
}

/** What happened, for tests, debugging and verbose output (`RunOptions.onEvent`). */
export type SimLogKind =
  | 'arrival'
  /** A job held for its dependencies joins the queue (the last of them finished). */
  | 'released'
  | 'round'
  | 'instance-launch'
  | 'instantiated'
  | 'worker-started'
  | 'registered'
  | 'terminate-issued'
  | 'terminated'
  | 'start-issued'
  | 'launched'
  | 'job-active'
  | 'checkpoint-issued'
  | 'killed'
  | 'uploaded'
  | 'completion'
  | 'placed-between-rounds';

export interface SimLogEntry {
  readonly timeSeconds: number;
  readonly kind: SimLogKind;
  readonly jobId?: string;
  readonly taskId?: string;
  readonly instanceId?: string;
  /** Instance type for `instance-launch`. */
  readonly typeName?: string;
  /** For `placed-between-rounds` onto an instance still coming up: the bind-or-launch choice that allowed it. */
  readonly bindChoice?: BindOrLaunchChoice;
}

/** The parts of Murmuration's placement a run uses (digest §7.5 arms); each off by default. */
export interface StartOptions {
  /** Start a multi-task job's tasks so they are ready together (round/co-start.ts). */
  readonly coStart?: boolean | undefined;
  /** Place waiting jobs on paid capacity at arrivals and completions (round/between-rounds.ts). */
  readonly placeBetweenRounds?: boolean | undefined;
  /** Placement between rounds may bind to instances still coming up instead of waiting for a launch. */
  readonly bind?: boolean | undefined;
}

export interface RunOptions {
  readonly trace: Trace;
  readonly scheduler: Scheduler;
  readonly catalog: Catalog;
  readonly groundTruth: GroundTruth;
  /** Scheduling period (Eva: 300 s). */
  readonly roundSeconds?: number;
  /**
   * Also run a round right after each job arrival and completion (ARCHITECTURE.md: rounds run on the period and
   * early on arrivals and completions). Off by default: Eva's reference simulator only runs periodic rounds.
   */
  readonly earlyRounds?: boolean;
  /** Called after every scheduling round (throttle in the caller). */
  readonly onProgress?: (progress: SimulationProgress) => void;
  /** Safety stop for schedulers that never place some job; default: last arrival + 30 days + 10 × the longest job. */
  readonly maxSimulatedSeconds?: number;
  /** Bound on the series' length for reports (default 2,000). */
  readonly maxSeriesPoints?: number;
  /** Called for every lifecycle step, in simulated-time order. */
  readonly onEvent?: (entry: SimLogEntry) => void;
  /**
   * The queue layer of every round (src/queue/admission.ts): under caps, only the jobs holding capacity and the
   * waiting jobs it lets in reach the scheduler. Omitted: every live job does (Eva's behaviour).
   */
  readonly admission?: Admission | undefined;
  /**
   * Completion-time predictions (PCS §4, src/predict): asked for every job a round sees for the first time, with
   * the world as it is before that round's actions and the round's fork of admission and scheduler.
   */
  readonly predictor?: Predictor | undefined;
  /**
   * The simulated network (zones, round trips, noise, congestion episodes) and the seed of its draws. Default: the
   * default network (network-config.ts) with seed 0. The run reports network metrics (RunResult.network) when this is
   * given or some job declares a network.
   */
  readonly network?: { readonly config: NetworkConfig; readonly seed: number } | undefined;
  /** Co-start, placement between rounds and binding (all off when absent); given, the run reports its starts. */
  readonly starts?: StartOptions | undefined;
  /**
   * Spot interruptions at the catalog's rates (spot-world.ts); the run then reports RunResult.spot. Without it no
   * instance is ever reclaimed (spot instances a plan asks for are still billed at spot prices).
   */
  readonly spot?: SpotSimulation | undefined;
  /** Every job checkpoints on its own this often (seconds; 0: never), whatever its trace says. */
  readonly checkpointIntervalSeconds?: number | undefined;
  /**
   * Make before break (round/gates.ts `moveStopGate`): a job moving to instances still coming up keeps working until
   * they are ready, then checkpoints. Off by default: Eva's reference stops a moving job at once.
   */
  readonly makeBeforeBreak?: boolean | undefined;
}

/** A prediction request: run `world` forward with the fork until `jobIds` finished; their start and end times. */
export interface PredictionRequest {
  readonly world: SimWorld;
  readonly fork: PredictionFork;
  readonly jobIds: readonly string[];
  readonly roundSeconds: number;
  readonly earlyRounds: boolean;
}

export interface PredictedTimes {
  /** When the job first makes progress (null: it had not by the end of the run). */
  readonly startSeconds: number | null;
  /** When it finishes (null: not within the run's limit). */
  readonly endSeconds: number | null;
}

export type Predictor = (request: PredictionRequest) => ReadonlyMap<string, PredictedTimes>;

/** How a prediction run starts: from a world, with the scheduler's expected rates and a copy of the queue state. */
export interface ForkSetup {
  readonly world: SimWorld;
  /** The scheduler's expected rates (the prediction's model of interference). */
  readonly rateOf: TaskRate;
  /** The copy of the queue state (undefined: every job admitted). */
  readonly admission: Admission | undefined;
  /** Stop once these jobs have finished. */
  readonly targets: ReadonlySet<string>;
  /**
   * Asked before each step with the simulated time reached: true stops the run there, as the time limit does
   * (unfinished targets stay null). A caller's time budget; the engine itself reads no clock.
   */
  readonly shouldStop?: ((simulatedSeconds: number) => boolean) | undefined;
}
