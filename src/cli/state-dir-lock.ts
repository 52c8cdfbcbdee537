import {
  accessSync,
  constants,
  existsSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join } from 'node:path';
import { CONTROLLER_PID_FILE } from './local-state.js';
import Database from 'better-sqlite3';

/**
 * One controller per state directory: a second one would launch the same plan twice; likewise one worker per work
 * directory, as a second would adopt the same tasks and report for them too. The lock is a pid file naming
 * the holder's pid and its start time (field 22 of /proc/<pid>/stat, in clock ticks since boot). A SIGKILLed
 * controller leaves its file behind, and its pid may then be a zombie its parent has not reaped yet, or, later,
 * another process's: neither holds the lock. Node has no flock, so liveness is decided from /proc.
 *
 * Taking over a stale pid file is a read, a removal and a create: two claimers doing it together could each remove
 * the other's fresh file and both go on. So claimers are serialized by a kernel lock first, one the system drops when
 * its holder dies however it dies: SQLite's (fcntl) lock on a file beside the pid file (`controller.lock`,
 * `worker.lock`), held for the process's life in a transaction never committed. Only its holder reads and replaces
 * the pid file; the pid file still says who holds the directory, to `fleetwise down` and to fleetwise versions that
 * know only the pid file (a live one named there is still refused). The lock file stays: removing it while another
 * claimer has it open would let a third lock a new file and both hold "the" lock. A lock file this process may not
 * write (another user's, read-only, on a read-only mount) can be neither taken nor tested: that is refused, not guessed.
 */

/** The running controller's pid file, in the state directory (`fleetwise down` reads it). */
export const PID_FILE = CONTROLLER_PID_FILE;

/**
 * Controllers sharing a PostgreSQL state may share a state directory too (the lease, not the directory, decides which
 * one acts): each records itself in a file of its own, `controller-<pid>.pid`, for `fleetwise down` to find.
 */
const SHARED_PID_FILE = /^controller-(\d+)\.pid$/;

/** The running worker's pid file, in its work directory. */
export const WORKER_PID_FILE = 'worker.pid';

export interface ProcessInfo {
  /** The one-letter state of /proc/<pid>/stat (R, S, D, Z, X, …). */
  readonly state: string;
  /** Its start time, in clock ticks after boot: a recycled pid has another one. */
  readonly startTime: string;
}

/** What the system says of a pid: undefined when it cannot say (no /proc, or no such process). */
export type ProcessProbe = (pid: number) => ProcessInfo | undefined;

export function procProbe(pid: number): ProcessInfo | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // The command name (field 2) is in parentheses and may itself hold spaces or parentheses: split after the last one.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const state = fields[0];
  const startTime = fields[19];
  return state === undefined || startTime === undefined ? undefined : { state, startTime };
}

/** Whether a signal can reach the pid at all (EPERM: it exists, as another user's). */
function signalable(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * True while `pid` runs: a zombie (or a dead task still listed) does not, nor a process started at another time
 * than `startTime` when that is known. Without /proc, a pid a signal reaches counts as running.
 */
export function processRunning(pid: number, startTime?: string, probe: ProcessProbe = procProbe): boolean {
  if (!signalable(pid)) return false;
  const info = probe(pid);
  if (info === undefined) return true;
  if (info.state === 'Z' || info.state === 'X') return false;
  return startTime === undefined || info.startTime === startTime;
}

interface PidRecord {
  readonly pid: number;
  readonly startTime?: string;
}

/** The pid file's content: `<pid> <start time>`, or a bare pid as controllers before the start time wrote it. */
function readPidFile(path: string): PidRecord | undefined {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw e;
  }
  const [pidText, startTime] = text.trim().split(/\s+/);
  const pid = Number(pidText);
  if (!Number.isInteger(pid) || pid <= 0) return undefined;
  return startTime === undefined || startTime === '' ? { pid } : { pid, startTime };
}

/** The pid of the process holding the directory's lock (`file` in it), if one does. */
function holderOf(path: string, probe: ProcessProbe): number | undefined {
  const record = readPidFile(path);
  if (record === undefined || record.pid === process.pid) return undefined;
  return processRunning(record.pid, record.startTime, probe) ? record.pid : undefined;
}

/** The pid of the controller holding the state directory, if one does. */
export function lockHolder(stateDir: string, probe: ProcessProbe = procProbe): number | undefined {
  return holderOf(join(stateDir, PID_FILE), probe);
}

/** The pids of the controllers sharing a state that recorded themselves in the directory and still run. */
export function sharedControllers(stateDir: string, probe: ProcessProbe = procProbe): number[] {
  return sharedPidFiles(stateDir).flatMap((path) => {
    const holder = holderOf(path, probe);
    return holder === undefined ? [] : [holder];
  });
}

/** The paths of the shared controllers' records in the directory (none when it does not exist). */
function sharedPidFiles(stateDir: string): string[] {
  let names: string[];
  try {
    names = readdirSync(stateDir);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw e;
  }
  return names.filter((name) => SHARED_PID_FILE.test(name)).map((name) => join(stateDir, name));
}

/**
 * Record this process as one of the controllers sharing a state in its directory (not exclusively: others may be
 * there too), and remove the records of those that no longer run. Returns the release, which removes the record; it
 * is also removed when the process exits (a signal's default action or SIGKILL leave it behind: stale, it is ignored).
 */
export function recordSharedController(stateDir: string, probe: ProcessProbe = procProbe): () => void {
  for (const path of sharedPidFiles(stateDir)) {
    const record = readPidFile(path);
    if (
      record !== undefined &&
      record.pid !== process.pid &&
      !processRunning(record.pid, record.startTime, probe)
    )
      rmSync(path, { force: true });
  }
  const path = join(stateDir, `controller-${process.pid}.pid`);
  const own = probe(process.pid)?.startTime;
  writeFileSync(path, `${process.pid}${own === undefined ? '' : ` ${own}`}\n`, { mode: 0o600 });
  const release = (): void => {
    process.removeListener('exit', release);
    if (readPidFile(path)?.pid === process.pid) rmSync(path, { force: true });
  };
  process.on('exit', release);
  return release;
}

/**
 * Take the state directory for this process, or throw naming the controller that holds it. Of controllers starting
 * together one wins, and a stale pid file (its process gone) is taken over. Returns the release, which removes the
 * pid file while it still names this process and drops the kernel lock (as the process's exit does).
 */
export function claimStateDir(stateDir: string, probe: ProcessProbe = procProbe): () => void {
  return claimDirLock(stateDir, PID_FILE, 'controller', probe);
}

/** Take a worker's work directory for this process, or throw naming the worker that holds it (as claimStateDir). */
export function claimWorkDir(workDir: string, probe: ProcessProbe = procProbe): () => void {
  return claimDirLock(workDir, WORKER_PID_FILE, 'worker', probe);
}

/**
 * The connections holding this process's kernel locks: a connection the garbage collector closed would drop its lock
 * while the directory is still in use, so each is kept here until its release.
 */
const heldLocks = new Set<Database.Database>();

/**
 * The lock file can be opened only for reading (another user's, a read-only mode, a read-only file system): this
 * process can neither take its lock nor see whether another holds it.
 */
export class LockFileNotWritableError extends Error {
  constructor(
    readonly lockPath: string,
    /** Why, e.g. `not writable by uid 1000 (EACCES; the file is uid 0's, mode 0644)`. */
    readonly reason: string,
    /** What makes it writable, for the user to do. */
    readonly remedy: string,
    options: ErrorOptions,
  ) {
    super(`cannot lock ${lockPath}: ${reason}: ${remedy}`, options);
  }
}

/** Why this process may not write `lockPath`, and what would let it, for a connection SQLite opened read-only. */
function notWritable(lockPath: string, cause: unknown): LockFileNotWritableError {
  let code = 'SQLite opened it read-only';
  try {
    accessSync(lockPath, constants.W_OK);
  } catch (e) {
    code = (e as NodeJS.ErrnoException).code ?? code;
  }
  if (code === 'EROFS')
    return new LockFileNotWritableError(
      lockPath,
      'not writable (EROFS: its file system is read-only)',
      'use a directory on a writable file system',
      { cause },
    );
  const uid = process.geteuid?.();
  let file: { readonly uid: number; readonly mode: number } | undefined;
  try {
    file = statSync(lockPath);
  } catch {
    // gone meanwhile: said without its owner
  }
  const reason = `not writable by uid ${uid ?? '?'} (${code}${
    file === undefined
      ? ''
      : `; the file is uid ${file.uid}'s, mode ${(file.mode & 0o7777).toString(8).padStart(4, '0')}`
  })`;
  const remedy =
    file === undefined
      ? `run as the owner of ${dirname(lockPath)}, or make the file writable for this user`
      : file.uid === uid
        ? `make it writable (chmod u+w ${lockPath})`
        : `run as its owner (uid ${file.uid}), or make it writable for uid ${uid ?? '?'}`;
  return new LockFileNotWritableError(lockPath, reason, remedy, { cause });
}

/**
 * Take the kernel lock on `lockPath` (created if need be), or undefined when another process, or another claim of
 * this one, holds it; LockFileNotWritableError when this process may not write the file. BEGIN IMMEDIATE takes
 * SQLite's RESERVED lock, which one connection at a time may hold; unlike an EXCLUSIVE lock it never waits for other
 * claimers' SHARED locks, so with no busy timeout a claim held elsewhere is refused at once and of claimers racing
 * exactly one wins. SQLite's unix VFS refuses it to a second connection of the same process too.
 *
 * A file the process may not write, SQLite opens read-only without a word, and there BEGIN IMMEDIATE succeeds taking
 * no lock. A write in the transaction tells, from the connection itself: it is refused on a read-only one, and on a
 * writable one it stays in the page cache, never committed. (Opening the file in Node to check would not do: closing
 * any descriptor of a file drops every fcntl lock this process holds on it.)
 */
function takeKernelLock(lockPath: string): Database.Database | undefined {
  let db: Database.Database | undefined;
  try {
    db = new Database(lockPath, { timeout: 0 });
    // The transaction writes nothing to the file: a journal in memory leaves no `-journal` file beside the lock, even
    // when its holder is killed.
    db.pragma('journal_mode = MEMORY');
    db.exec('BEGIN IMMEDIATE');
    db.pragma('user_version = 0');
  } catch (e) {
    db?.close();
    const code = (e as { code?: unknown }).code;
    if (code === 'SQLITE_BUSY') return undefined;
    if (code === 'SQLITE_READONLY') throw notWritable(lockPath, e);
    throw new Error(`cannot lock ${lockPath}: ${(e as Error).message}`, { cause: e });
  }
  heldLocks.add(db);
  return db;
}

/** The kernel lock's file beside a pid file: `controller.lock` beside `controller.pid`, `worker.lock` beside `worker.pid`. */
export function lockFileOf(dir: string, pidFile: string = PID_FILE): string {
  return join(dir, `${pidFile.replace(/\.pid$/, '')}.lock`);
}

/**
 * Whether a live process holds the directory's kernel lock (`controller.lock`, or `worker.lock` given the worker's pid
 * file), whatever its pid file says: one whose pid file was removed by hand still runs, and still launches. Throws
 * when it cannot tell (the lock file is not writable by this process): "free" would be a guess.
 */
export function dirLockHeld(dir: string, file: string = PID_FILE): boolean {
  const lockPath = lockFileOf(dir, file);
  if (!existsSync(lockPath)) return false;
  let lock: Database.Database | undefined;
  try {
    lock = takeKernelLock(lockPath);
  } catch (e) {
    if (!(e instanceof LockFileNotWritableError)) throw e;
    const kind = file === WORKER_PID_FILE ? 'worker' : 'controller';
    throw new Error(
      `cannot tell whether a ${kind} is using ${dir}: its lock ${lockPath} is ${e.reason}, so this process can ` +
        `neither test nor take it: ${e.remedy}`,
      { cause: e },
    );
  }
  if (lock === undefined) return true;
  heldLocks.delete(lock);
  lock.close();
  return false;
}

/** How long a refused claimer waits for the kernel lock's holder to write its pid file, to name it. */
const HOLDER_NAMED_WITHIN_MS = 1000;

/**
 * The pid of the process holding a kernel lock, from the pid file. The holder is alive (the kernel would have dropped
 * its lock otherwise) but may have just taken the lock, the file still naming the dead process it replaces: that
 * takes it a moment.
 */
function kernelLockHolder(path: string, probe: ProcessProbe): number | undefined {
  const deadline = Date.now() + HOLDER_NAMED_WITHIN_MS;
  for (;;) {
    const record = readPidFile(path);
    if (record !== undefined && processRunning(record.pid, record.startTime, probe)) return record.pid;
    if (Date.now() >= deadline) return undefined;
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 10);
  }
}

function claimDirLock(dir: string, file: string, holderKind: string, probe: ProcessProbe): () => void {
  const path = join(dir, file);
  const lockPath = lockFileOf(dir, file);
  const lock = takeKernelLock(lockPath);
  if (lock === undefined) {
    const holder = kernelLockHolder(path, probe);
    throw new Error(
      `another ${holderKind}${holder === undefined ? '' : ` (pid ${holder})`} is using ${dir}; stop it first ` +
        `(it holds ${lockPath}${holder === undefined ? `: fuser -v ${lockPath} names it` : ''})`,
    );
  }
  const unlock = (): void => {
    heldLocks.delete(lock);
    lock.close();
  };
  try {
    // A holder named in the pid file without the kernel lock is a fleetwise version that knows only the pid file.
    const holder = holderOf(path, probe);
    if (holder !== undefined)
      throw new Error(
        `another ${holderKind} (pid ${holder}) is using ${dir}; stop it first (or remove ${path} if it is not)`,
      );
    const own = probe(process.pid)?.startTime;
    // Replaced in one rename, so that `fleetwise down` never reads it half-written nor finds it missing meanwhile.
    const staged = `${path}.tmp`;
    writeFileSync(staged, `${process.pid}${own === undefined ? '' : ` ${own}`}\n`, { mode: 0o600 });
    renameSync(staged, path);
  } catch (e) {
    unlock();
    throw e;
  }
  let held = true;
  return () => {
    if (!held) return;
    held = false;
    // The pid file goes first, while the lock still keeps the next claimer from writing its own.
    try {
      if (readPidFile(path)?.pid === process.pid) rmSync(path, { force: true });
    } finally {
      unlock();
    }
  };
}
