import { Worker } from 'node:worker_threads';
import type { PredictionRun } from './eta-predictions.js';
import { PredictionEngineClosedError, type PredictionEngine } from './prediction-engine.js';
import type { PredictionJob } from './prediction-job.js';

/** The worker's entry, compiled next to this file (dist/controller/prediction-worker.js). */
export const PREDICTION_WORKER_URL = new URL('./prediction-worker.js', import.meta.url);

/** What the controller's thread posts to the prediction worker, and what comes back. */
export interface PredictionWorkerRequest {
  readonly id: number;
  readonly job: PredictionJob;
}
export type PredictionWorkerReply =
  { readonly id: number; readonly run: PredictionRun } | { readonly id: number; readonly error: string };

export interface WorkerEngineOptions {
  /** The worker's entry module; default PREDICTION_WORKER_URL. */
  readonly url?: URL;
  /** The worker's V8 old-generation limit: a runaway prediction ends its worker, not the controller. */
  readonly maxHeapMb?: number;
}

interface Waiting {
  readonly job: PredictionJob;
  readonly resolve: (run: PredictionRun) => void;
  readonly reject: (error: Error) => void;
}

interface Running extends Waiting {
  readonly id: number;
  readonly timer: NodeJS.Timeout;
}

/**
 * Predictions in a worker thread (node:worker_threads), one at a time, in the order asked. The thread is started on
 * the first prediction and kept; if it dies (a crash, its heap limit) the next prediction starts another. A run's
 * time budget is kept inside the simulation (it polls the clock between steps); should a single step overrun it
 * anyway, the run is abandoned at twice its budget plus 5 s and the thread terminated, which stops JavaScript
 * mid-loop. `close` terminates the thread the same way, so a prediction never delays a controller's shutdown.
 */
export class WorkerThreadPredictionEngine implements PredictionEngine {
  private readonly url: URL;
  private readonly maxHeapMb: number;
  private worker: Worker | undefined;
  private readonly queue: Waiting[] = [];
  private current: Running | undefined;
  private nextId = 1;
  private closed = false;

  constructor(options: WorkerEngineOptions = {}) {
    this.url = options.url ?? PREDICTION_WORKER_URL;
    this.maxHeapMb = options.maxHeapMb ?? 512;
  }

  run(job: PredictionJob): Promise<PredictionRun> {
    if (this.closed) return Promise.reject(new PredictionEngineClosedError());
    return new Promise((resolve, reject) => {
      this.queue.push({ job, resolve, reject });
      this.pump();
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const waiting of this.queue.splice(0)) waiting.reject(new PredictionEngineClosedError());
    this.settle(new PredictionEngineClosedError());
    const worker = this.worker;
    this.worker = undefined;
    await worker?.terminate();
  }

  private pump(): void {
    if (this.closed || this.current !== undefined) return;
    const next = this.queue.shift();
    if (next === undefined) return;
    const id = this.nextId++;
    const limitMs = 2 * next.job.budgetMs + 5000;
    const timer = setTimeout(() => {
      this.settle(new Error(`the prediction ran past ${limitMs} ms; its worker thread was stopped`));
      this.stopWorker();
      this.pump();
    }, limitMs);
    timer.unref();
    this.current = { ...next, id, timer };
    try {
      const request: PredictionWorkerRequest = { id, job: next.job };
      this.workerThread().postMessage(request);
    } catch (e) {
      this.settle(e instanceof Error ? e : new Error(String(e)));
      this.pump();
    }
  }

  private workerThread(): Worker {
    if (this.worker !== undefined) return this.worker;
    const worker = new Worker(this.url, { resourceLimits: { maxOldGenerationSizeMb: this.maxHeapMb } });
    // An idle prediction thread never keeps the process alive.
    worker.unref();
    worker.on('message', (reply: PredictionWorkerReply) => {
      if (this.current?.id !== reply.id) return;
      this.settle('run' in reply ? reply.run : new Error(reply.error));
      this.pump();
    });
    const gone = (why: string): void => {
      if (this.worker !== worker) return;
      this.worker = undefined;
      this.settle(new Error(`the prediction worker thread ${why}`));
      this.pump();
    };
    worker.on('error', (e) => gone(`failed: ${e.message}`));
    worker.on('exit', (code) => gone(`exited (code ${code})`));
    this.worker = worker;
    return worker;
  }

  private stopWorker(): void {
    const worker = this.worker;
    this.worker = undefined;
    void worker?.terminate();
  }

  /** End the current run with its result or error. */
  private settle(outcome: PredictionRun | Error): void {
    const current = this.current;
    if (current === undefined) return;
    this.current = undefined;
    clearTimeout(current.timer);
    if (outcome instanceof Error) current.reject(outcome);
    else current.resolve(outcome);
  }
}
