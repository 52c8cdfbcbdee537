import { join } from 'node:path';
import { WORKER_EXIT_FILE, workerExitSchema, type WorkerExit } from '../../protocol/worker-exit.js';
import { readJsonRecord } from './json-record.js';

/**
 * The exit a local instance's worker recorded (protocol/worker-exit.ts); undefined while it has recorded none, or
 * when the record cannot be read (empty after a power loss, another version's shape): it only dates an end, and an
 * instance without it ends when its worker is found gone, so one bad file never stops a controller from starting or
 * listing its instances.
 */
export function readWorkerExit(instanceDir: string): WorkerExit | undefined {
  try {
    return readJsonRecord(join(instanceDir, WORKER_EXIT_FILE), workerExitSchema);
  } catch {
    return undefined;
  }
}
