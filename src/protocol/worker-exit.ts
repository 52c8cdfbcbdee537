import { join } from 'node:path';
import { z } from 'zod';
import { readJsonRecord, writeJsonRecord } from './json-record.js';

/**
 * Where, in its work directory (a local instance's directory), a worker that gave up records when it exited: in local
 * mode no controller saw it go, and the local provider ends its instance then rather than when a controller next
 * notices. The worker writes it (worker/agent.ts), the local provider and local stops read it.
 */
export const WORKER_EXIT_FILE = 'worker-exit.json';

/** What a worker recorded of its exit. */
export interface WorkerExit {
  readonly exitedAtMs: number;
  /** gave-up: no controller answered for its give-up time; it checkpointed and stopped its tasks first. */
  readonly reason: 'gave-up';
}

const workerExitSchema = z.object({ exitedAtMs: z.number().finite(), reason: z.literal('gave-up') });

/**
 * The exit the instance's worker recorded; undefined while it has recorded none, or when the record cannot be read
 * (empty after a power loss, another version's shape): it only dates an end, and an instance without it ends when its
 * worker is found gone, so one bad file never stops a controller from starting or listing its instances.
 */
export function readWorkerExit(instanceDir: string): WorkerExit | undefined {
  try {
    return readJsonRecord(join(instanceDir, WORKER_EXIT_FILE), workerExitSchema);
  } catch {
    return undefined;
  }
}

/** Record a worker's exit in its work directory, atomically (temporary file + rename): a reader never finds half. */
export function writeWorkerExit(workDir: string, exit: WorkerExit): void {
  writeJsonRecord(join(workDir, WORKER_EXIT_FILE), exit);
}
