import { spawn } from 'node:child_process';
import { WORKER_MAIN as WORKER_MAIN_PATH } from '../../../cloud/local/worker-spawner.js';
import type { StateStore } from '../../../controller/state-store.js';
import { SERVER_ENV, TOKEN_ENV } from '../../client-connection.js';

/** `--submit`: the quick start's job specs, submitted once the API answers. */

/**
 * The quick start's convenience: submit job specs once the API answers (as `fleetwise submit` would), but only
 * into an empty state: a restart (every `npm start`) must not queue the example again.
 */
export async function submitOnStart(options: {
  readonly files: readonly string[];
  readonly apiUrl: string;
  readonly adminToken: string;
  readonly store: StateStore;
}): Promise<void> {
  const { files: toSubmit, store } = options;
  const existing = store.countJobs();
  if (existing > 0)
    process.stdout.write(
      `not submitting ${toSubmit.join(', ')}: the state already has ${existing} job(s) (fleetwise jobs lists them)\n`,
    );
  else
    for (const file of toSubmit) {
      const command = submitChildCommand(file, options.apiUrl, options.adminToken, process.env);
      const child = spawn(command.executable, command.args, {
        env: command.env,
        stdio: ['ignore', 'inherit', 'inherit'],
      });
      await new Promise((resolve) => child.once('exit', resolve));
    }
}

/**
 * How `--submit` runs `fleetwise submit` for one file. The admin token travels in the child's environment, which
 * only its owner can read, never in its arguments, which every local user sees (`ps`, /proc/<pid>/cmdline).
 */
export function submitChildCommand(
  file: string,
  serverUrl: string,
  adminToken: string,
  parentEnv: NodeJS.ProcessEnv,
): { readonly executable: string; readonly args: readonly string[]; readonly env: NodeJS.ProcessEnv } {
  return {
    executable: process.execPath,
    args: [WORKER_MAIN_PATH, 'submit', file],
    env: { ...parentEnv, [SERVER_ENV]: serverUrl, [TOKEN_ENV]: adminToken },
  };
}
