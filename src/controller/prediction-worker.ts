/**
 * Worker-thread entry of the controller's completion-time predictions (started by prediction-worker-engine.ts): it
 * runs each prediction job it is sent with the simulator (src/predict) and posts the ETAs back, so the controller's
 * own thread (its API and its loop) never runs a prediction.
 */
import { isMainThread, parentPort } from 'node:worker_threads';
import { predictCompletions } from '../predict/predict.js';
import { runPredictionJob } from './prediction-job.js';
import type { PredictionWorkerReply, PredictionWorkerRequest } from './prediction-worker-engine.js';

if (isMainThread || parentPort === null)
  throw new Error('prediction-worker.js must be started as a worker thread');
const port = parentPort;
port.on('message', (request: PredictionWorkerRequest) => {
  let reply: PredictionWorkerReply;
  try {
    reply = { id: request.id, run: runPredictionJob(predictCompletions, request.job) };
  } catch (e) {
    reply = { id: request.id, error: e instanceof Error ? e.message : String(e) };
  }
  port.postMessage(reply);
});
