import type { Scheduler } from '../scheduler/types.js';
import { runForward, type KeyRate, type WorldRunOptions } from '../world/run-forward.js';
import type { PredictedTimes } from '../world/simulation-types.js';

/**
 * Completion-time predictions for the controller (PCS §4): run its world forward in virtual time with the same
 * admission and a fork of its scheduler, the scheduler's learned rates, launch and restore delays, and no future
 * arrivals. The simulator predicts through the same engine path (`SimQueueOptions.predict`).
 */
/**
 * A world, a fork of the scheduler (it plans, observes and learns during the run) and of the admission in use, and
 * how to run forward (`runForward`'s options). `rate` defaults to the scheduler's learned `expectedRate`, else 1.
 */
export type PredictionInput = WorldRunOptions;

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
    shouldStop: input.shouldStop,
  });
}
