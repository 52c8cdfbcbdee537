import { renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { WORKER_EXIT_FILE, type WorkerExit } from '../protocol/worker-exit.js';
import type { AgentLogger } from './agent-options.js';

/** The worker's record of why it exited (protocol/worker-exit.ts), kept in its work directory for the local provider. */

function exitFile(workDir: string): string {
  return join(workDir, WORKER_EXIT_FILE);
}

/** Remove an earlier worker's exit on this directory: it is not this one's, and would end the instance while it runs. */
export function forgetWorkerExit(workDir: string, log: AgentLogger): void {
  try {
    rmSync(exitFile(workDir), { force: true });
  } catch (e) {
    log.warn(`could not remove the exit record ${exitFile(workDir)}: ${(e as Error).message}`);
  }
}

export function recordWorkerExit(workDir: string, reason: WorkerExit['reason'], log: AgentLogger): void {
  try {
    // Whole or not at all (temporary file, then rename): the local provider never reads half a record.
    const exit: WorkerExit = { exitedAtMs: Date.now(), reason };
    const temp = `${exitFile(workDir)}.${process.pid}.tmp`;
    writeFileSync(temp, `${JSON.stringify(exit)}\n`, { mode: 0o600 });
    renameSync(temp, exitFile(workDir));
  } catch (e) {
    log.warn(
      `could not record this exit in ${exitFile(workDir)} (${(e as Error).message}): a local instance is billed ` +
        'until its controller notices the worker is gone',
    );
  }
}
