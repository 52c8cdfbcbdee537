import type { PredictFn, PredictionRun } from './eta-predictions.js';
import { runPredictionJob, type PredictionJob } from './prediction-job.js';

/**
 * Where completion-time predictions run. Production runs them in a worker thread (prediction-worker-engine.ts), so
 * no prediction, however large the cluster or odd the job spec, holds up the API or the controller's loop; tests may
 * run an injected prediction function in this thread instead (InProcessPredictionEngine).
 */
export interface PredictionEngine {
  /** Run one prediction; rejects when it fails or the engine is closed while it runs. */
  run(job: PredictionJob): Promise<PredictionRun>;
  /** Stop: a prediction still running is abandoned (its promise rejects). */
  close(): Promise<void>;
}

export class PredictionEngineClosedError extends Error {
  constructor() {
    super('the prediction engine is closed');
    this.name = 'PredictionEngineClosedError';
  }
}

/**
 * Runs the prediction in this thread, after the caller's turn of the event loop (never inside a request or a
 * round). For tests and injected prediction functions: a run here still blocks this thread for its (bounded) time.
 */
export class InProcessPredictionEngine implements PredictionEngine {
  private closed = false;

  constructor(private readonly predict: PredictFn) {}

  run(job: PredictionJob): Promise<PredictionRun> {
    return new Promise((resolve, reject) => {
      setImmediate(() => {
        if (this.closed) return reject(new PredictionEngineClosedError());
        try {
          resolve(runPredictionJob(this.predict, job));
        } catch (e) {
          reject(e instanceof Error ? e : new Error(String(e)));
        }
      });
    });
  }

  close(): Promise<void> {
    this.closed = true;
    return Promise.resolve();
  }
}
