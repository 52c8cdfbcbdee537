import { randomBytes } from 'node:crypto';
import {
  closeSync,
  constants,
  copyFileSync,
  fchmodSync,
  fchownSync,
  fsyncSync,
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
    options?: ErrorOptions,
  ) {
    super(`${flag}: cannot write ${path}: ${reason}`, options);
    this.name = 'OutputFileError';
  }
}

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
  /** Replaced by a rename, or (a device, a FIFO, a file mounted over) written in place. */
  readonly how: 'replace' | 'in place';
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
 * How `file` is written, and its new text staged beside it when it is replaced. A device or a FIFO is found by the
 * path itself, as the kernel opens it: `/dev/stdout` on a pipe leads to no path a rename could reach.
 */
function stage(file: OutputFile, token: string): Staged {
  const found = statOrUndefined(file.path);
  if (found !== undefined && !found.isFile())
    return { file, how: 'in place', target: file.path, before: undefined };
  const target = realTarget(file.path);
  const s: Staged = { file, how: 'replace', target, before: found };
  s.temp = besideName(target, token, 'tmp');
  writeTemp(s.temp, file.text, found);
  return s;
}

/**
 * Write `text` to a new file `temp`, synced, with the mode and owner of the file it replaces; a failure removes it.
 */
function writeTemp(temp: string, text: string, before: Stats | undefined): void {
  const fd = openSync(temp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o666);
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

/** Carry out one staged write: the rename, or the write in place. */
function commit(s: Staged): void {
  if (s.how === 'replace') {
    try {
      renameSync(s.temp as string, s.target);
      s.renamed = true;
      s.temp = undefined;
      return;
    } catch (e) {
      // A file mounted over (a container's bind-mounted file) cannot be replaced, only written.
      if ((e as NodeJS.ErrnoException).code !== 'EBUSY') throw e;
    }
  }
  const fd = openSync(s.target, 'w');
  s.touched = true;
  try {
    writeFileSync(fd, s.file.text, 'utf8');
  } finally {
    closeSync(fd);
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
 * Put the renamed files back as they were, the last first; says what could not be, with where its previous content
 * is (then kept).
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
 * as a plain write would: a device or a FIFO (`/dev/stdout`), or a file mounted over (which rename refuses with
 * EBUSY); these go first, and cannot be put back. Throws an OutputFileError naming the first file that failed.
 */
export function writeFilesAtomically(files: readonly OutputFile[]): void {
  const token = randomBytes(6).toString('hex');
  const staged: Staged[] = [];
  let failed: { readonly file: OutputFile; readonly error: unknown } | undefined;
  for (const file of files) {
    try {
      staged.push(stage(file, token));
    } catch (e) {
      failed = { file, error: e };
      break;
    }
  }
  const order = [...staged.filter((s) => s.how === 'in place'), ...staged.filter((s) => s.how === 'replace')];
  // A backup of each existing target that a later rename could fail after.
  if (failed === undefined)
    for (const s of order.slice(0, -1)) {
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
  if (failed === undefined)
    for (const s of order) {
      try {
        commit(s);
      } catch (e) {
        failed = { file: s.file, error: e };
        unrestored = undo(staged);
        break;
      }
    }
  for (const s of staged) {
    removeQuietly(s.temp);
    removeQuietly(s.backup);
  }
  if (failed === undefined) return;
  throw new OutputFileError(
    failed.file.flag,
    failed.file.path,
    `${failureReason(failed.error)}; ${outcome(staged, failed.file, unrestored, files.length)}`,
    { cause: failed.error },
  );
}
