import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { ValidationError } from '../core/validation.js';

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

/** The exit the instance's worker recorded; undefined while it has recorded none. */
export function readWorkerExit(instanceDir: string): WorkerExit | undefined {
  const path = join(instanceDir, WORKER_EXIT_FILE);
  // Looked for first: list() asks of every instance without a pid, and a failed read costs an exception each.
  if (!existsSync(path)) return undefined;
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw e;
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw new ValidationError(path, [`not valid JSON: ${(e as Error).message}`]);
  }
  const parsed = workerExitSchema.safeParse(value);
  if (!parsed.success)
    throw new ValidationError(
      path,
      parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`),
    );
  return parsed.data;
}

/** Record a worker's exit in its work directory, atomically (temporary file + rename): a reader never finds half. */
export function writeWorkerExit(workDir: string, exit: WorkerExit): void {
  const path = join(workDir, WORKER_EXIT_FILE);
  const temp = `${path}.${process.pid}.tmp`;
  writeFileSync(temp, `${JSON.stringify(exit)}\n`, { mode: 0o600 });
  renameSync(temp, path);
}
