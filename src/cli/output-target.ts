import {
  accessSync,
  closeSync,
  constants,
  existsSync,
  openSync,
  readlinkSync,
  readSync,
  realpathSync,
  statfsSync,
  statSync,
} from 'node:fs';
import { basename, dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { ValidationError } from '../core/validation.js';
import {
  ADMIN_TOKEN_FILE,
  CONTROLLER_LOCK_FILE,
  CONTROLLER_PID_FILE,
  STATE_DB_FILE,
  WORKER_TOKEN_FILE,
} from './local-state.js';

/**
 * Where a command will write, checked before it does work that may take minutes: a run whose results cannot be
 * written is refused at once, naming the flag, rather than failing at the end with its results lost.
 */

function kindOf(path: string): 'directory' | 'file' | 'missing' {
  try {
    return statSync(path).isDirectory() ? 'directory' : 'file';
  } catch {
    return 'missing';
  }
}

/**
 * Where writing `path` really lands, as the kernel finds it: through symlinks, a dangling one included (writing through
 * it creates its target), of the file or else of its directory (a file not written yet). A link is followed before a
 * `..` after it (`link/../x` is x beside the link's target), so the path is never normalized as text first (Node's
 * `resolve`, and its own `realpathSync`, would take `link/..` for the directory holding the link): libc's realpath
 * resolves it.
 */
export function realTarget(path: string): string {
  let at = isAbsolute(path) ? path : `${process.cwd()}${sep}${path}`;
  // Bounded as the kernel bounds a chain of links: a loop ends here, and its write fails later with ELOOP.
  for (let hops = 0; hops < 40; hops += 1) {
    try {
      return realpathSync.native(at);
    } catch {
      // missing, or a link to something missing: followed below
    }
    let parent: string;
    try {
      parent = realpathSync.native(dirname(at));
    } catch {
      return resolve(at);
    }
    const here = join(parent, basename(at));
    let link: string;
    try {
      link = readlinkSync(here);
    } catch {
      return here;
    }
    at = isAbsolute(link) ? link : `${parent}${sep}${link}`;
  }
  return resolve(at);
}

/** The first 16 bytes of every SQLite database file, the controller's state among them. */
const SQLITE_HEADER = Buffer.from('SQLite format 3\0', 'latin1');

/** Whether `path` is an existing regular file holding a SQLite database; only a regular file is read (a FIFO blocks). */
function isSqliteDatabase(path: string): boolean {
  let fd: number | undefined;
  try {
    if (!statSync(path).isFile()) return false;
    fd = openSync(path, 'r');
    const head = Buffer.alloc(SQLITE_HEADER.length);
    return readSync(fd, head, 0, head.length, 0) === head.length && head.equals(SQLITE_HEADER);
  } catch {
    return false; // unreadable: nothing to tell from, and the write is checked where it happens
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/** Files only a controller writes in its state directory. */
const CONTROLLER_FILES = [CONTROLLER_PID_FILE, CONTROLLER_LOCK_FILE, ADMIN_TOKEN_FILE, WORKER_TOKEN_FILE];

/**
 * The fleetwise state directory a file written to `real` (a real path) would land in, and the file that marks it:
 * its own directory when that holds the state database or a controller's files, else the nearest directory above
 * holding a controller's files (its object store, instance directories). A `state.db` alone marks only the file's
 * own directory: other programs name their databases so too, and one in a home directory must not refuse every file
 * below it.
 */
function enclosingStateDirectory(real: string): { readonly dir: string; readonly mark: string } | undefined {
  let dir = dirname(real);
  let marks = [STATE_DB_FILE, ...CONTROLLER_FILES];
  for (;;) {
    const mark = marks.find((name) => existsSync(join(dir, name)));
    if (mark !== undefined) return { dir, mark };
    const parent = dirname(dir);
    if (parent === dir) return undefined;
    dir = parent;
    marks = CONTROLLER_FILES;
  }
}

/**
 * A file to write: not a directory, in a directory that exists, and never a controller's state. Writing JSON over
 * the state database (or beside it, over its WAL, its tokens) loses that state for good and keeps the controller
 * from starting again; a SQLite database is refused whatever its name and however it is reached (a symlink, a hard
 * link), and so is every path in a state directory.
 */
export function checkOutputFile(path: string, flag: string): void {
  if (kindOf(path) === 'directory') throw new ValidationError(flag, [`${path} is a directory, not a file`]);
  const directory = dirname(resolve(path));
  if (kindOf(directory) !== 'directory')
    throw new ValidationError(flag, [`${directory} is not a directory to write ${path} in`]);
  const real = realTarget(path);
  const shown = real === resolve(path) ? path : `${path} (${real})`;
  if (isSqliteDatabase(path))
    throw new ValidationError(flag, [
      `${shown} is a SQLite database, which looks like a controller's state database: it will not be overwritten; write elsewhere`,
    ]);
  const stateDir = enclosingStateDirectory(real);
  if (stateDir !== undefined)
    throw new ValidationError(flag, [
      `${shown} is in ${stateDir.dir}, a fleetwise controller's state directory (it holds ${stateDir.mark}): ` +
        'write it elsewhere',
    ]);
}

/**
 * Kernel pseudo-filesystems by statfs type: they hold no reports, and Node's recursive mkdir under /proc never
 * returns (it spins at full CPU), so a path on one is refused rather than tried.
 */
const PSEUDO_FILESYSTEMS = new Map<number, string>([
  [0x9fa0, 'procfs'],
  [0x62656572, 'sysfs'],
  [0x27e0eb, 'cgroup'],
  [0x63677270, 'cgroup2'],
  [0x64626720, 'debugfs'],
  [0x74726163, 'tracefs'],
  [0x73636673, 'securityfs'],
]);

/**
 * A directory to write files into: one that exists, or can be made (its nearest existing ancestor a directory), in
 * which this process may create files, on a filesystem that holds files, and not in a controller's state directory.
 * Nothing is created here: a run refused later leaves no empty directory behind.
 */
export function checkOutputDirectory(path: string, flag: string): void {
  const target = resolve(path);
  let at = target;
  for (;;) {
    const kind = kindOf(at);
    if (kind === 'directory') break;
    if (kind === 'file')
      throw new ValidationError(flag, [
        at === target ? `${path} is a file, not a directory` : `${at} is a file: cannot make ${path}`,
      ]);
    const parent = dirname(at);
    if (parent === at) return;
    at = parent;
  }
  const cannot = at === target ? '' : `: cannot make ${path}`;
  // Reports beside a controller's state would be taken for its files (and `down` would find a state directory in a
  // report directory); the nearest existing directory is resolved as the kernel does, the rest is yet to be made.
  const real = join(realpathSync.native(at), relative(at, target));
  const stateDir = enclosingStateDirectory(join(real, '.report'));
  if (stateDir !== undefined)
    throw new ValidationError(flag, [
      `${real === target ? path : `${path} (${real})`} is ${stateDir.dir === real ? '' : 'in '}${stateDir.dir}, ` +
        `a fleetwise controller's state directory (it holds ${stateDir.mark}): write reports elsewhere`,
    ]);
  const pseudo = PSEUDO_FILESYSTEMS.get(Number(statfsSync(at).type));
  if (pseudo !== undefined)
    throw new ValidationError(flag, [
      `${at} is on ${pseudo}, a kernel filesystem that holds no files${cannot}`,
    ]);
  try {
    // Write to add entries, search to reach them; a read-only mount fails here even for root.
    accessSync(at, constants.W_OK | constants.X_OK);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code ?? 'denied';
    throw new ValidationError(flag, [`${at} is not writable (${code})${cannot}`]);
  }
}
