import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import { ValidationError } from '../core/validation.js';
import type { RunRequest, RunWorkerMessage } from './run-request.js';
import type { RunResult } from '../world/run-result.js';

/** Compiled next to this file (dist/sim/run-worker.js); the CLI runs from dist/. */
const WORKER_URL = new URL('./run-worker.js', import.meta.url);

export interface RunPoolListener {
  onStart?(index: number): void;
  onProgress?(index: number, fraction: number): void;
  onDone?(index: number, result: RunResult): void;
  /** Run `index` failed (`settleInWorkers`; `runInWorkers` rejects with the failure instead). */
  onFailed?(index: number, error: Error): void;
}

/** One run's outcome where every run goes on whatever the others do: its value, or why it failed. */
export type Settled<T> =
  { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: Error };

/** The default: as many workers as runs, at most one per available core. */
export function defaultParallelism(runs: number): number {
  return Math.max(1, Math.min(runs, availableParallelism()));
}

function runOne(
  request: RunRequest,
  index: number,
  listener: RunPoolListener,
  active: Set<Worker>,
): Promise<RunResult> {
  // A run's failure names it as its results do: by its label (a sweep's `eva@vot=2`), else its scheduler.
  const name = request.label ?? request.scheduler;
  return new Promise((resolve, reject) => {
    const worker = new Worker(WORKER_URL, { workerData: request });
    active.add(worker);
    let settled = false;
    const settle = (action: () => void): void => {
      if (settled) return;
      settled = true;
      active.delete(worker);
      action();
      void worker.terminate();
    };
    listener.onStart?.(index);
    worker.on('message', (message: RunWorkerMessage) => {
      if (message.type === 'progress') listener.onProgress?.(index, message.fraction);
      else if (message.type === 'result') settle(() => resolve(message.result));
      else
        settle(() =>
          reject(
            message.validation !== undefined
              ? new ValidationError(
                  // A labelled run (one of bench arms' seeds and arms, a sweep's point) says which it was.
                  request.label === undefined
                    ? message.validation.source
                    : `${request.label}: ${message.validation.source}`,
                  message.validation.problems,
                )
              : new Error(`${name}: ${message.message}`),
          ),
        );
    });
    worker.on('error', (e) => settle(() => reject(new Error(`${name}: ${e.message}`))));
    worker.on('exit', (code) =>
      settle(() => reject(new Error(`${name}: worker exited (code ${code}) without a result`))),
    );
  });
}

/**
 * Call `runOne(index)` for indices 0…count−1 with at most `parallel` under way, in order of index. The first failure
 * stops new calls, awaits `onFailure` (which stops the ones under way) and rejects with it.
 */
export async function runInLanes(
  count: number,
  parallel: number,
  runOne: (index: number) => Promise<void>,
  onFailure: () => Promise<unknown> | void,
): Promise<void> {
  let next = 0;
  let failed = false;
  const lane = async (): Promise<void> => {
    while (!failed && next < count) await runOne(next++);
  };
  try {
    await Promise.all(Array.from({ length: Math.max(1, Math.min(parallel, count)) }, lane));
  } catch (e) {
    failed = true;
    await onFailure();
    throw e;
  }
}

/**
 * Call `runOne(index)` for indices 0…count−1 with at most `parallel` under way, in order of index, each whatever the
 * others do (a failure stops nothing): every outcome, in order of index.
 */
export async function settleInLanes<T>(
  count: number,
  parallel: number,
  runOne: (index: number) => Promise<T>,
): Promise<Settled<T>[]> {
  const outcomes = new Array<Settled<T>>(count);
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < count) {
      const index = next++;
      try {
        outcomes[index] = { ok: true, value: await runOne(index) };
      } catch (e) {
        outcomes[index] = { ok: false, error: e instanceof Error ? e : new Error(String(e)) };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(parallel, count)) }, lane));
  return outcomes;
}

/**
 * Run each request in its own worker thread, at most `parallel` at once; results come back in request order.
 * The first failure rejects and stops the other workers.
 */
export async function runInWorkers(
  requests: readonly RunRequest[],
  parallel: number,
  listener: RunPoolListener = {},
): Promise<RunResult[]> {
  const results: RunResult[] = new Array<RunResult>(requests.length);
  const active = new Set<Worker>();
  await runInLanes(
    requests.length,
    parallel,
    async (index) => {
      const result = await runOne(requests[index] as RunRequest, index, listener, active);
      results[index] = result;
      listener.onDone?.(index, result);
    },
    () => Promise.all([...active].map((w) => w.terminate())),
  );
  return results;
}

/**
 * As `runInWorkers`, but a failed run stops no other: every run's outcome, in request order, for a batch whose other
 * runs are worth having without it (`bench arms` compares the seeds whose runs all ended).
 */
export function settleInWorkers(
  requests: readonly RunRequest[],
  parallel: number,
  listener: RunPoolListener = {},
): Promise<Settled<RunResult>[]> {
  // Each worker ends itself as its run settles: none is left to stop.
  const active = new Set<Worker>();
  return settleInLanes(requests.length, parallel, async (index) => {
    let result: RunResult;
    try {
      result = await runOne(requests[index] as RunRequest, index, listener, active);
    } catch (e) {
      const error = e instanceof Error ? e : new Error(String(e));
      listener.onFailed?.(index, error);
      throw error;
    }
    listener.onDone?.(index, result);
    return result;
  });
}
