import { randomBytes } from 'node:crypto';
import {
  closeSync,
  constants,
  copyFileSync,
  fchmodSync,
  fchownSync,
  fsyncSync,
  ftruncateSync,
  linkSync,
  openSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
  type Stats,
} from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { realTarget } from './output-target.js';

/**
 * The files a command writes where its user said (a trace, a table, a report, a catalog), each whole or not at all,
 * and those of one command all or none: each is written to a temporary file beside it, and only once every one is
 * written are they renamed into place. A failure (a full disk, a file that cannot be replaced) leaves every file as
 * it was and no temporary file behind, and names the flag and the path.
 *
 * What a rename cannot replace is written in place, as a plain write would: a device or a FIFO, a file mounted over,
 * and a file its user may write in a directory where they may create nothing (a shared directory root owns). Such a
 * write is not whole: one failing midway leaves that file cut short, and one done cannot be put back. So these are
 * written last, once every renamed file is in place: a failure before them leaves them as they were, and one of them
 * failing puts the renamed files back. Where the user may neither create a file nor write the one there, the error
 * names the directory, which is what they must change.
 */

export interface OutputFile {
  /** As the user gave it: errors name it. Written through a symlink, as a plain write would. */
  readonly path: string;
  readonly text: string;
  /** The flag that named it (`--out`), for errors. */
  readonly flag: string;
}

/** A file that could not be written: the disk's or the system's failure (exit 1), not the command's input. */
export class OutputFileError extends Error {
  constructor(
    readonly flag: string,
    readonly path: string,
    reason: string,
    options?: OutputFileErrorOptions,
  ) {
    const what = options?.directory === undefined ? `write ${path}` : `create a file in ${options.directory}`;
    super(`${flag}: cannot ${what}: ${reason}`, options);
    this.name = 'OutputFileError';
  }
}

export interface OutputFileErrorOptions extends ErrorOptions {
  /** The directory the file could not be created in, when that is what failed: the error names it, not the file. */
  readonly directory?: string;
}

/** No file could be created in `directory`, and the target could not be written in place instead. */
class DirectoryRefusal extends Error {
  constructor(
    readonly directory: string,
    readonly error: unknown,
  ) {
    super(failureReason(error));
  }
}

/**
 * Why creating a file may fail where an existing file beside it can still be written: permission, an immutable
 * directory, a read-only mount (a file mounted writable over it).
 */
const CREATE_REFUSALS = new Set(['EACCES', 'EPERM', 'EROFS']);

/**
 * Why a write failed, without the path Node's message ends with: that is the hidden temporary file, which the user
 * never named (`ENOSPC: no space left on device`).
 */
export function failureReason(e: unknown): string {
  if (!(e instanceof Error)) return String(e);
  const { syscall } = e as NodeJS.ErrnoException;
  const cut = syscall === undefined ? -1 : e.message.indexOf(`, ${syscall}`);
  return cut === -1 ? e.message : e.message.slice(0, cut);
}

interface Staged {
  readonly file: OutputFile;
  /**
   * Replaced by a rename, or written in place: a device, a FIFO, a file in a directory where no file can be created,
   * or (found when its rename is refused) a file mounted over.
   */
  how: 'replace' | 'in place';
  /** Where the write really lands (symlinks followed). */
  readonly target: string;
  /** The target before this write, if it was a regular file. */
  readonly before: Stats | undefined;
  /** The new text beside the target, until renamed onto it. */
  temp?: string;
  /** The target's previous content (a hard link, else a copy), kept until every file is in place. */
  backup?: string;
  renamed?: boolean;
  /** Opened for a write in place: the target is no longer what it was. */
  touched?: boolean;
  /** The target, open from staging on when written in place for want of a directory to create a file in. */
  fd?: number;
}

function statOrUndefined(path: string): Stats | undefined {
  try {
    return statSync(path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw e;
  }
}

/** A name beside `target` for this write's temporary or backup file: hidden, unique, and saying whose it is. */
function besideName(target: string, token: string, suffix: string): string {
  // Cut so the name stays under the 255 bytes a directory entry allows, whatever the characters.
  return join(dirname(target), `.${basename(target).slice(0, 64)}.${token}.${suffix}`);
}

/**
 * The regular file at `path` opened for writing, neither created nor truncated yet, if this process may write it.
 * Opened rather than asked with access(2), which answers for the real user, not the effective one that writes.
 */
function openForWriting(path: string): number | undefined {
  try {
    return openSync(path, constants.O_WRONLY);
  } catch {
    return undefined;
  }
}

/**
 * How `file` is written, and its new text staged beside it when it is replaced. A device or a FIFO is found by the
 * path itself, as the kernel opens it: `/dev/stdout` on a pipe leads to no path a rename could reach. An existing
 * file its user may write, in a directory where they may create no file, is written in place, as a plain write
 * would; when neither can be written, the directory is what the user must change, so a DirectoryRefusal names it.
 */
function stage(file: OutputFile, token: string): Staged {
  const found = statOrUndefined(file.path);
  if (found !== undefined && !found.isFile())
    return { file, how: 'in place', target: file.path, before: undefined };
  const target = realTarget(file.path);
  const temp = besideName(target, token, 'tmp');
  let fd: number;
  try {
    fd = openSync(temp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o666);
  } catch (e) {
    if (!CREATE_REFUSALS.has((e as NodeJS.ErrnoException).code ?? '')) throw e;
    const fd = found === undefined ? undefined : openForWriting(target);
    if (fd !== undefined) return { file, how: 'in place', target, before: found, fd };
    throw new DirectoryRefusal(dirname(target), e);
  }
  writeTemp(fd, temp, file.text, found);
  return { file, how: 'replace', target, before: found, temp };
}

/**
 * Write `text` to `temp`, newly created and open as `fd`, synced, with the mode and owner of the file it replaces;
 * a failure removes it.
 */
function writeTemp(fd: number, temp: string, text: string, before: Stats | undefined): void {
  let written = false;
  try {
    if (before !== undefined) {
      fchmodSync(fd, before.mode & 0o7777);
      try {
        fchownSync(fd, before.uid, before.gid);
      } catch {
        // Only root may give a file away; anyone else's replacement is their own, as a copy would be.
      }
    }
    writeFileSync(fd, text, 'utf8');
    // Synced before the rename: after a power loss the rename alone may land with an empty file behind it.
    fsyncSync(fd);
    written = true;
  } finally {
    closeSync(fd);
    if (!written) removeQuietly(temp);
  }
}

/** Keep the target's present content under `backup`, to put back if a later file of the set cannot be. */
function keepBackup(target: string, backup: string): void {
  try {
    linkSync(target, backup);
  } catch {
    // A filesystem without hard links: a copy (a clone where the filesystem can).
    copyFileSync(target, backup, constants.COPYFILE_EXCL | constants.COPYFILE_FICLONE);
  }
}

/** Rename a staged file into place; one mounted over (a container's bind-mounted file) is left to write in place. */
function rename(s: Staged): void {
  try {
    renameSync(s.temp as string, s.target);
    s.renamed = true;
    s.temp = undefined;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EBUSY') throw e;
    s.how = 'in place';
  }
}

/** Write a file in place: truncated, then written, so a failure midway leaves it cut short. */
function writeInPlace(s: Staged): void {
  const opened = s.fd;
  s.fd = undefined;
  const fd = opened ?? openSync(s.target, 'w');
  s.touched = true;
  try {
    if (opened !== undefined) ftruncateSync(fd);
    writeFileSync(fd, s.file.text, 'utf8');
  } finally {
    closeSync(fd);
  }
}

interface Failure {
  readonly file: OutputFile;
  readonly error: unknown;
}

/** Rename every staged file into place, then write those written in place; the first failure stops it. */
function commitAll(staged: readonly Staged[]): Failure | undefined {
  for (const s of staged.filter((r) => r.how === 'replace'))
    try {
      rename(s);
    } catch (e) {
      return { file: s.file, error: e };
    }
  // Filtered after the renames: a file mounted over is found by its rename, and joins these.
  for (const s of staged.filter((r) => r.how === 'in place'))
    try {
      writeInPlace(s);
    } catch (e) {
      return { file: s.file, error: e };
    }
  return undefined;
}

/** Close a file opened to write in place and not written: nothing of it changed. */
function closeQuietly(fd: number | undefined): void {
  if (fd === undefined) return;
  try {
    closeSync(fd);
  } catch {
    // Nothing was written through it.
  }
}

function removeQuietly(path: string | undefined): void {
  if (path === undefined) return;
  try {
    rmSync(path, { force: true });
  } catch {
    // Left behind; nothing else to do about it.
  }
}

/**
 * Put the renamed files back as they were, the last first (a new one removed); says what could not be, with where
 * its previous content is (then kept).
 */
function undo(staged: readonly Staged[]): string[] {
  const unrestored: string[] = [];
  for (const s of [...staged].reverse()) {
    if (s.renamed !== true) continue;
    try {
      if (s.backup === undefined) rmSync(s.target, { force: true });
      else renameSync(s.backup, s.target);
    } catch (e) {
      unrestored.push(
        `${s.file.path} could not be put back (${failureReason(e)})` +
          (s.backup === undefined ? '' : `: its previous content is in ${s.backup}`),
      );
    }
    s.backup = undefined;
  }
  return unrestored;
}

/** What a failed write left, for its error. */
function outcome(
  staged: readonly Staged[],
  failed: OutputFile,
  unrestored: readonly string[],
  count: number,
): string {
  const touched = staged
    .filter((s) => s.touched === true)
    .map((s) =>
      s.file === failed
        ? `${s.file.path} is written in place and may be cut short`
        : `${s.file.path} was written in place`,
    );
  if (unrestored.length + touched.length > 0) return [...touched, ...unrestored].join('; ');
  return count === 1 ? 'nothing was written' : 'none of the files was written';
}

/**
 * Write every file whole, or none: see the module's comment. A target a rename cannot replace is written in place,
 * as a plain write would: a device or a FIFO (`/dev/stdout`), a file mounted over (which rename refuses with EBUSY),
 * or a file in a directory where no file can be created; these go last, and cannot be put back. Throws an
 * OutputFileError naming the first file that failed.
 */
export function writeFilesAtomically(files: readonly OutputFile[]): void {
  const token = randomBytes(6).toString('hex');
  const staged: Staged[] = [];
  let failed: Failure | undefined;
  for (const [index, file] of files.entries()) {
    try {
      // Each file its own temporary name, even two given the same target (refused just below).
      const next = stage(file, `${token}-${index}`);
      staged.push(next);
      const same = staged.find((s) => s !== next && s.target === next.target);
      if (same !== undefined)
        throw new Error(`it is also ${same.file.flag}'s file ${same.file.path}: give each file its own path`);
    } catch (e) {
      failed = { file, error: e };
      break;
    }
  }
  // A backup of each existing target a rename replaces, when another file's write could fail after it: any file of
  // a set may turn out mounted over, and so be written after every rename.
  if (failed === undefined && staged.length > 1)
    for (const s of staged) {
      if (s.how === 'in place' || s.before === undefined) continue;
      const backup = besideName(s.target, token, 'bak');
      try {
        keepBackup(s.target, backup);
        s.backup = backup;
      } catch (e) {
        removeQuietly(backup);
        failed = { file: s.file, error: e };
        break;
      }
    }
  let unrestored: string[] = [];
  if (failed === undefined) {
    failed = commitAll(staged);
    if (failed !== undefined) unrestored = undo(staged);
  }
  for (const s of staged) {
    closeQuietly(s.fd);
    removeQuietly(s.temp);
    removeQuietly(s.backup);
  }
  if (failed === undefined) return;
  const refusal = failed.error instanceof DirectoryRefusal ? failed.error : undefined;
  const error = refusal?.error ?? failed.error;
  throw new OutputFileError(
    failed.file.flag,
    failed.file.path,
    `${failureReason(error)}; ${outcome(staged, failed.file, unrestored, files.length)}`,
    { cause: error, directory: refusal?.directory },
  );
}
