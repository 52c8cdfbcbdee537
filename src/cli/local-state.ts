import { existsSync, readFileSync, statSync, type Stats } from 'node:fs';
import { dirname, join, resolve } from 'node:path';

/**
 * What `fleetwise controller --provider local` leaves in its state directory for the client: the admin token and the
 * API's address. With them the client commands work in a checkout running `npm start` without any exported variable.
 */

/** The local mode's default state directory (relative to where the controller was started). */
export const LOCAL_STATE_DIR = '.fleetwise';
/** The local mode's default API address. */
export const LOCAL_DEFAULT_LISTEN = '127.0.0.1:7070';
export const ADMIN_TOKEN_FILE = 'admin-token';
/**
 * What else a controller keeps in its state directory, named in this module that loads nothing else so that checking a
 * path (`output-target.ts`) needs no controller module: its SQLite state, its pid file (its kernel lock is beside it,
 * `controller.lock`) and the cluster's worker token.
 */
export const STATE_DB_FILE = 'state.db';
export const CONTROLLER_PID_FILE = 'controller.pid';
export const CONTROLLER_LOCK_FILE = 'controller.lock';
export const WORKER_TOKEN_FILE = 'worker-token';
/** The local provider's record of the instances it launched (its journal beside it, instance-file.ts). */
export const LOCAL_INSTANCES_FILE = 'local-instances.json';
/** The API's URL as bound (`http://127.0.0.1:7070`), written once the controller listens. */
export const API_URL_FILE = 'api-url';

export interface LocalController {
  /** The state directory found, e.g. /home/me/fleetwise/.fleetwise. */
  readonly stateDir: string;
  /** From `api-url`; the local default when the file is missing (a controller that has not listened yet). */
  readonly server: string;
  /** From `admin-token`; undefined when the file is missing or empty. */
  readonly token: string | undefined;
}

function readTrimmed(path: string): string | undefined {
  try {
    const text = readFileSync(path, 'utf8').trim();
    return text === '' ? undefined : text;
  } catch {
    return undefined;
  }
}

/**
 * Why the client may not trust a state directory it found, or undefined when it may: one another user owns (a
 * `/tmp/.fleetwise` or a cloned repository's) or can write to could send the client's commands, specs and build
 * contexts to any address, and show it any answer. Its files are checked as well as the directory. Where there are no user ids (Windows),
 * nothing is checked.
 */
export function untrustedReason(
  stateDir: string,
  uid: number | undefined = process.getuid?.(),
): string | undefined {
  if (uid === undefined) return undefined;
  for (const path of [stateDir, join(stateDir, ADMIN_TOKEN_FILE), join(stateDir, API_URL_FILE)]) {
    let stats: Stats;
    try {
      stats = statSync(path);
    } catch {
      continue; // a file not there is not read
    }
    if (stats.uid !== uid) return `${path} is owned by uid ${stats.uid}, not by you (uid ${uid})`;
    if ((stats.mode & 0o022) !== 0)
      return `${path} is writable by ${(stats.mode & 0o002) !== 0 ? 'other users' : 'its group'}`;
  }
  return undefined;
}

/**
 * The nearest `.fleetwise/` in `cwd` or a parent directory (as git finds `.git/`), so the client works from any
 * subdirectory of the checkout; undefined when there is none. One another user could have written is passed over,
 * told to `warn` and added to `ignored` (so an error can say why none was used).
 */
export function findLocalController(
  cwd: string = process.cwd(),
  warn: (line: string) => void = (line) => void process.stderr.write(`${line}\n`),
  ignored: string[] = [],
): LocalController | undefined {
  let dir = resolve(cwd);
  for (;;) {
    const stateDir = join(dir, LOCAL_STATE_DIR);
    if (existsSync(join(stateDir, ADMIN_TOKEN_FILE)) || existsSync(join(stateDir, API_URL_FILE))) {
      const untrusted = untrustedReason(stateDir);
      if (untrusted === undefined)
        return {
          stateDir,
          server: readTrimmed(join(stateDir, API_URL_FILE)) ?? `http://${LOCAL_DEFAULT_LISTEN}`,
          token: readTrimmed(join(stateDir, ADMIN_TOKEN_FILE)),
        };
      warn(`fleetwise: warning: ignoring the local controller state ${stateDir}: ${untrusted}`);
      ignored.push(`${stateDir} (${untrusted})`);
    }
    const parent = dirname(dir);
    if (parent === dir) return undefined;
    dir = parent;
  }
}
