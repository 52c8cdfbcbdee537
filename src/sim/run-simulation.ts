import { Admission } from '../queue/admission.js';
import { predictCompletions } from '../predict/predict.js';
import { secondsToHours } from '../core/units.js';
import { percentile } from '../world/metrics.js';
import type { JobOutcome, QueueRunMetrics, RunResult } from '../world/run-result.js';
import { Simulation } from '../world/simulation.js';
import type { Predictor, RunOptions } from '../world/simulation-types.js';
import { p99JctHours, type SimQueueOptions } from './queue-options.js';

/**
 * The simulator's engine runtime (Eva §5–§6): a trace run through the virtual-time world (src/world) with the
 * ground truth's interference, the round the controller runs (src/round), and under caps the queue layer with
 * its completion-time predictions (src/predict).
 */
export type SimulationOptions = Omit<RunOptions, 'admission' | 'predictor'> & {
  /** Queue layer under caps: caps, WFQ config and whether to predict completions (PCS §4). */
  readonly queue?: SimQueueOptions | undefined;
};

export function runSimulation(options: SimulationOptions): RunResult {
  const startedMs = performance.now(); // the one clock read: wall time of the run
  const { queue, ...rest } = options;
  const admission = queue === undefined ? undefined : new Admission(options.catalog, queue);
  const sim = new Simulation({
    ...rest,
    admission,
    predictor: queue?.predict === true ? predictorFor(options) : undefined,
  });
  sim.run();
  const result = sim.result((performance.now() - startedMs) / 1000);
  if (admission === undefined) return result;
  const serviceSeconds = new Map(options.trace.jobs.map((j) => [j.id, j.durationSeconds]));
  return {
    ...result,
    queue: {
      p99JctHours: p99JctHours(result.jobs),
      unfairness: admission.unfairnessPercent(result.jobs, serviceSeconds),
      ...predictionErrors(result.jobs),
      successfulSojournMeanHours: successfulSojournMeanHours(result.jobs),
      preemptions: sim.preemptionCount,
    },
  };
}

/**
 * PCS prediction error of the submission-time predictions (digest §2: Pred_err_j = 100·|JCT_j − ĴCT_j| / ĴCT_j,
 * relative to the predicted JCT), over the jobs that succeeded and have a positive prediction: mean and p99 (nearest
 * rank). Null when there is none. A job that stopped unsuccessfully is left out, as the controller leaves it out
 * (predictions.ts `recordError`): a prediction is of a completion, and such a job never completed.
 */
export function predictionErrors(
  jobs: readonly JobOutcome[],
): Pick<QueueRunMetrics, 'predErrAvg' | 'predErrP99'> {
  const errors: number[] = [];
  for (const j of jobs) {
    if (j.predictedEndSeconds === null || j.jctSeconds === null || !j.successful) continue;
    const predictedJct = j.predictedEndSeconds - j.arrivalSeconds;
    if (!(predictedJct > 0)) continue;
    errors.push((100 * Math.abs(j.jctSeconds - predictedJct)) / predictedJct);
  }
  if (errors.length === 0) return { predErrAvg: null, predErrP99: null };
  return {
    predErrAvg: errors.reduce((a, b) => a + b, 0) / errors.length,
    predErrP99: percentile(errors, 99),
  };
}

/** Mean JCT in hours of the jobs that ended successfully (success paper's metric); null when none did. */
export function successfulSojournMeanHours(jobs: readonly JobOutcome[]): number | null {
  const jcts = jobs.flatMap((j) => (j.successful && j.jctSeconds !== null ? [j.jctSeconds] : []));
  return jcts.length === 0 ? null : secondsToHours(jcts.reduce((a, b) => a + b, 0) / jcts.length);
}

/** Predictions run the world forward with the round's fork and the scheduler's learned (expected) rates. */
function predictorFor(options: SimulationOptions): Predictor {
  return (request) =>
    predictCompletions({
      world: request.world,
      scheduler: request.fork.scheduler,
      admission: request.fork.admission,
      catalog: options.catalog,
      roundSeconds: request.roundSeconds,
      earlyRounds: request.earlyRounds,
      jobIds: request.jobIds,
    });
}
