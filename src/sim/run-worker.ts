/**
 * Worker-thread entry for one simulated run (spawned by run-pool.ts, one worker per run): it loads the trace,
 * catalog and ground truth from the request itself, runs, and posts progress and the result back.
 */
import { isMainThread, parentPort, workerData } from 'node:worker_threads';
import { errorMessage, executeRun, type RunRequest, type RunWorkerMessage } from './run-request.js';
import { executeControllerRun } from './controller-runtime/execute.js';

/** Post progress at most once per percent: the main thread only redraws a bar. */
const PROGRESS_STEP = 0.01;

async function main(): Promise<void> {
  if (isMainThread || parentPort === null)
    throw new Error('run-worker.js must be started as a worker thread');
  const port = parentPort;
  const post = (message: RunWorkerMessage): void => port.postMessage(message);
  const request = workerData as RunRequest;
  let lastPosted = 0;
  try {
    const onProgress = (fraction: number): void => {
      if (fraction - lastPosted >= PROGRESS_STEP) {
        lastPosted = fraction;
        post({ type: 'progress', fraction });
      }
    };
    const result =
      request.runtime === 'controller'
        ? await executeControllerRun(request, onProgress)
        : executeRun(request, onProgress);
    post({ type: 'progress', fraction: 1 });
    post({ type: 'result', result });
  } catch (e) {
    post(errorMessage(e));
  }
}

void main();
