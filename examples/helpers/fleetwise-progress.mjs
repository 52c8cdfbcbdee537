// fleetwise task helpers for Node, in the spirit of Eva's iterator wrapper (EuroSys '25 §5).
//
//   import { progress, saveCheckpoint, restoring, checkpointDir, stopRequested } from './fleetwise-progress.mjs';
//   for await (const batch of progress(batches, { start: resumedIterations })) { ...; if (stopRequested()) ... }
//
// Contract (README "Checkpoints"): write state into FLEETWISE_CHECKPOINT_DIR, then the COMPLETE marker; do not touch
// the directory while COMPLETE exists (the worker deletes it once the upload is durable). Exit after the checkpoint
// signal (SIGTERM by default). FLEETWISE_RESTORE=1 means the directory holds the restored checkpoint.
import { appendFileSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

let stop = false;
process.on('SIGTERM', () => {
  stop = true;
});

export const stopRequested = () => stop;
export const checkpointDir = () => process.env.FLEETWISE_CHECKPOINT_DIR ?? './checkpoint';
export const restoring = () => process.env.FLEETWISE_RESTORE === '1';

/** Append "<unix seconds> <iterations completed>" (one write per line; the worker tolerates a partial last line). */
export function report(iterations) {
  const path = process.env.FLEETWISE_PROGRESS_FILE;
  if (path) appendFileSync(path, `${Math.floor(Date.now() / 1000)} ${iterations}\n`);
}

/** Yield from an (async) iterable, reporting the cumulative count at most every `everySeconds`. */
export async function* progress(iterable, { start = 0, everySeconds = 1 } = {}) {
  let n = start;
  let last = 0;
  for await (const item of iterable) {
    yield item;
    n += 1;
    if (Date.now() / 1000 - last >= everySeconds) {
      report(n);
      last = Date.now() / 1000;
    }
  }
  report(n);
}

/** Call write(dir) and mark the checkpoint complete; false if the previous one is still being uploaded. */
export async function saveCheckpoint(write, { waitSeconds = 30 } = {}) {
  const dir = checkpointDir();
  mkdirSync(dir, { recursive: true });
  const marker = join(dir, 'COMPLETE');
  const deadline = Date.now() + waitSeconds * 1000;
  while (existsSync(marker) && Date.now() < deadline) await sleep(100);
  if (existsSync(marker)) return false;
  await write(dir);
  writeFileSync(marker, '');
  return true;
}
