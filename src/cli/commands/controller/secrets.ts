import { randomBytes } from 'node:crypto';
import { chmodSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { SecretFilePaths } from '../../../controller/backup/backup-documents.js';
import { MIN_TOKEN_LENGTH } from '../../../controller/state/tokens.js';
import { ValidationError } from '../../../core/validation.js';
import { ADMIN_TOKEN_FILE, WORKER_TOKEN_FILE } from '../../local-state.js';

/** The controller's secrets: the admin, worker and metrics tokens, kept owner-only in the state directory. */

export const ADMIN_TOKEN_ENV = 'FLEETWISE_ADMIN_TOKEN';
/** The token `/metrics` asks for with `metricsAuth: token`, instead of the state directory's file. */
export const METRICS_TOKEN_ENV = 'FLEETWISE_METRICS_TOKEN';
const METRICS_TOKEN_FILE = 'metrics-token';

/** Where the state directory keeps its token files (a restore installs them, the backups copy them). */
export type SecretFiles = SecretFilePaths;

/** The token files of the state directory `stateDir`. */
export function secretFilesIn(stateDir: string): SecretFiles {
  return {
    workerToken: join(stateDir, WORKER_TOKEN_FILE),
    adminToken: join(stateDir, ADMIN_TOKEN_FILE),
    metricsToken: join(stateDir, METRICS_TOKEN_FILE),
  };
}

/**
 * Read a secret from the state directory, or create it there; either way it is left readable by the owner only
 * (0600): a file an older run or an operator made 0644 would let any local user act as the admin. A token found there
 * is held to what one from the environment is (tokenProblem): the file is as easy to write by hand, and a short
 * token in it opens the API just the same.
 */
export function ensureSecretFile(path: string): { value: string; created: boolean } {
  try {
    const existing = readFileSync(path, 'utf8').trim();
    if (existing !== '') {
      const problem = tokenProblem(existing);
      if (problem !== undefined)
        throw new ValidationError(path, [`${problem} (delete the file to have a new token generated there)`]);
      chmodSync(path, 0o600);
      return { value: existing, created: false };
    }
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
  }
  const value = randomBytes(32).toString('base64url');
  // An empty file keeps its mode through a write (`mode` applies only to a file created): owner-only first.
  try {
    chmodSync(path, 0o600);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
  }
  writeFileSync(path, `${value}\n`, { mode: 0o600, flag: 'w' });
  return { value, created: true };
}

/** A token, and the file it is kept in (undefined when it comes from the environment). */
export interface TokenSource {
  readonly value: string;
  readonly file: string | undefined;
}

/**
 * What is wrong with a controller token (trimmed), if anything. It is held to what team tokens are (MIN_TOKEN_LENGTH):
 * it opens the whole API, so a short one would be guessed; one with whitespace inside is a pasting mistake no client
 * could send as a bearer token.
 */
function tokenProblem(token: string): string | undefined {
  if (/\s/.test(token)) return 'contains whitespace; give the token alone, on one line';
  if (token.length < MIN_TOKEN_LENGTH)
    return `has ${token.length} character${token.length === 1 ? '' : 's'}; a token needs at least ${MIN_TOKEN_LENGTH}`;
  return undefined;
}

/** Told when a token file is removed (default: a line on stderr). */
export type SecretWarning = (line: string) => void;

const toStderr: SecretWarning = (line) => void process.stderr.write(`${line}\n`);

/**
 * The token the environment variable `envName` gives, else the state directory's token file (made if missing); either
 * is held to tokenProblem. A file holding another token than the environment's is removed, with a warning: it is
 * not the token in force, yet clients of the local controller would send it (and be refused), and the backups would
 * carry it for a restore to install as the token.
 */
function tokenFor(envName: string, env: NodeJS.ProcessEnv, file: string, warn: SecretWarning): TokenSource {
  const envToken = env[envName]?.trim();
  if (envToken === undefined || envToken === '') return { value: ensureSecretFile(file).value, file };
  const problem = tokenProblem(envToken);
  if (problem !== undefined)
    throw new ValidationError(envName, [
      `${problem} (unset it to have one generated in the state directory)`,
    ]);
  let fileToken: string | undefined;
  try {
    fileToken = readIfPresent(file)?.trim();
  } catch (e) {
    // Not the token in force, so no reason to refuse the start: said, and left as it is.
    warn(
      `warning: could not read ${file} (${e instanceof Error ? e.message : String(e)}); ${envName} is used`,
    );
  }
  if (fileToken !== undefined && fileToken !== '' && fileToken !== envToken) {
    rmSync(file, { force: true });
    warn(
      `warning: removed ${file}: it held another token than ${envName}, which this controller takes; ` +
        `give clients the token ${envName} holds`,
    );
  }
  return { value: envToken, file: undefined };
}

function readIfPresent(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw e;
  }
}

/**
 * The admin token: FLEETWISE_ADMIN_TOKEN when set (an older admin-token file that differs is removed, `warn` told),
 * else the state directory's token file (made if missing).
 */
export function adminTokenFor(
  env: NodeJS.ProcessEnv,
  file: string,
  warn: SecretWarning = toStderr,
): TokenSource {
  return tokenFor(ADMIN_TOKEN_ENV, env, file, warn);
}

/**
 * A metrics token given while `/metrics` is open is a token the operator expects to protect it: the scrape would still
 * serve every team's spend to anyone who reaches the API, so the controller does not start on the mismatch.
 */
export function refuseUnusedMetricsToken(env: NodeJS.ProcessEnv, metricsAuth: 'none' | 'token'): void {
  if (metricsAuth === 'none' && (env[METRICS_TOKEN_ENV] ?? '').trim() !== '')
    throw new ValidationError(METRICS_TOKEN_ENV, [
      'set, but /metrics answers without a token (metricsAuth: none, the default): give --metrics-auth token ' +
        '(or metricsAuth: token in the config file) to require it, or unset the variable',
    ]);
}

/**
 * The metrics token: FLEETWISE_METRICS_TOKEN when set (a metrics-token file that differs is removed, `warn` told), else
 * the state directory's token file (made if missing).
 */
export function metricsTokenFor(
  env: NodeJS.ProcessEnv,
  file: string,
  warn: SecretWarning = toStderr,
): TokenSource {
  return tokenFor(METRICS_TOKEN_ENV, env, file, warn);
}
