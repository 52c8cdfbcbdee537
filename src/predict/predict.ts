import type { Catalog } from '../core/catalog.js';
import type { Admission } from '../queue/admission.js';
import type { Scheduler } from '../scheduler/types.js';
import { runForward, type KeyRate } from '../world/run-forward.js';
import type { PredictedTimes } from '../world/simulation-types.js';
import type { SimWorld } from '../world/world.js';

/**
 * Completion-time predictions for the controller (PCS §4): run its world forward in virtual time with the same
 * admission and a fork of its scheduler, the scheduler's learned rates, launch and restore delays, and no future
 * arrivals. The simulator predicts through the same engine path (`SimQueueOptions.predict`).
 */
export interface PredictionInput {
  readonly world: SimWorld;
  /** A fork of the controller's scheduler (`Scheduler.fork`): the run plans, observes and learns with it. */
  readonly scheduler: Scheduler;
  readonly catalog: Catalog;
  /** Expected normalized throughput by co-location keys; default: the scheduler's `expectedRate`, else 1. */
  readonly rate?: ((taskKey: string, otherKeys: readonly string[]) => number) | undefined;
  /** A fork of the admission in use (`Admission.fork`): the run replays the queue layer from its state. */
  readonly admission?: Admission | undefined;
  readonly roundSeconds?: number | undefined;
  /** Also plan right after each completion (the controller's early rounds). */
  readonly earlyRounds?: boolean | undefined;
  /** Jobs to predict (the run stops once they finished); default every job of the world. */
  readonly jobIds?: readonly string[] | undefined;
  readonly maxSimulatedSeconds?: number | undefined;
}

export type PredictedJobTimes = PredictedTimes;

/**
 * The rates a scheduler expects (`Scheduler.expectedRate`), frozen now: read from a fork, since the prediction run's
 * own fork learns as it goes. Undefined for schedulers that do not model interference.
 */
export function frozenExpectedRates(scheduler: Scheduler): KeyRate | undefined {
  const model = scheduler.fork?.() ?? scheduler;
  return model.expectedRate?.bind(model);
}

export function predictCompletions(input: PredictionInput): ReadonlyMap<string, PredictedJobTimes> {
  return runForward({
    world: input.world,
    scheduler: input.scheduler,
    catalog: input.catalog,
    rate: input.rate ?? frozenExpectedRates(input.scheduler),
    admission: input.admission,
    roundSeconds: input.roundSeconds,
    earlyRounds: input.earlyRounds,
    jobIds: input.jobIds,
    maxSimulatedSeconds: input.maxSimulatedSeconds,
  });
}
