import type { PredictionFork } from '../round/round.js';
import type { PredictedTimes, Predictor } from './simulation-types.js';
import { exportWorld } from './world-io.js';
import type { WorldState } from './world-state.js';

/** Submission-time predictions (PCS §4) of a run's jobs, per job id; null where the prediction run could not tell. */
export class SubmissionPredictions {
  private readonly byJob = new Map<string, PredictedTimes>();

  constructor(
    private readonly predictor: Predictor,
    private readonly roundSeconds: number,
    private readonly earlyRounds: boolean,
  ) {}

  /**
   * Arrived jobs without a prediction yet (PCS §4: a job is predicted when a round first sees it; a job held for
   * its dependencies too, as the controller predicts it at submission).
   */
  unpredictedJobs(state: WorldState): string[] {
    return [...state.liveJobs.values(), ...state.heldJobs.values()]
      .filter((j) => !this.byJob.has(j.spec.id))
      .map((j) => j.spec.id);
  }

  /**
   * Predict the completion of `fresh` jobs: run a copy of the world forward from this round with the round's fork
   * of the admission and the scheduler, the scheduler's expected (learned) rates instead of the ground truth, and no
   * future arrivals. The copy replays this round, so the world is exported before its actions are applied.
   */
  predict(state: WorldState, fresh: readonly string[], fork: PredictionFork, early: boolean): void {
    const times = this.predictor({
      world: exportWorld(state, early),
      fork,
      jobIds: fresh,
      roundSeconds: this.roundSeconds,
      earlyRounds: this.earlyRounds,
    });
    for (const id of fresh) this.byJob.set(id, times.get(id) ?? { startSeconds: null, endSeconds: null });
  }

  /** The job's prediction (undefined: none was made). */
  of(jobId: string): PredictedTimes | undefined {
    return this.byJob.get(jobId);
  }
}
