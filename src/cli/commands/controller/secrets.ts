import { randomBytes } from 'node:crypto';
import { chmodSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ADMIN_TOKEN_FILE } from '../../local-state.js';

/** The controller's secrets: the admin and worker tokens, kept owner-only in the state directory. */

export const ADMIN_TOKEN_ENV = 'FLEETWISE_ADMIN_TOKEN';
const WORKER_TOKEN_FILE = 'worker-token';

/** Where the state directory keeps its token files (a restore installs them, the backups copy them). */
export interface SecretFiles {
  readonly workerToken: string;
  readonly adminToken: string;
}

/** The token files of the state directory `stateDir`. */
export function secretFilesIn(stateDir: string): SecretFiles {
  return {
    workerToken: join(stateDir, WORKER_TOKEN_FILE),
    adminToken: join(stateDir, ADMIN_TOKEN_FILE),
  };
}

/**
 * Read a secret from the state directory, or create it there; either way it is left readable by the owner only
 * (0600): a file an older run or an operator made 0644 would let any local user act as the admin.
 */
export function ensureSecretFile(path: string): { value: string; created: boolean } {
  try {
    const existing = readFileSync(path, 'utf8').trim();
    if (existing !== '') {
      chmodSync(path, 0o600);
      return { value: existing, created: false };
    }
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
  }
  const value = randomBytes(32).toString('base64url');
  writeFileSync(path, `${value}\n`, { mode: 0o600, flag: 'w' });
  return { value, created: true };
}

/** The admin token, and the file it is kept in (undefined when it comes from the environment). */
export interface AdminToken {
  readonly value: string;
  readonly file: string | undefined;
}

/** The admin token: FLEETWISE_ADMIN_TOKEN when set, else the state directory's token file (made if missing). */
export function adminTokenFor(env: NodeJS.ProcessEnv, file: string): AdminToken {
  const envToken = env[ADMIN_TOKEN_ENV]?.trim();
  return envToken !== undefined && envToken !== ''
    ? { value: envToken, file: undefined }
    : { value: ensureSecretFile(file).value, file };
}
