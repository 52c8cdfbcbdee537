import { accessSync, constants, statfsSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { ValidationError } from '../core/validation.js';

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

/** A file to write: not a directory, in a directory that exists. */
export function checkOutputFile(path: string, flag: string): void {
  if (kindOf(path) === 'directory') throw new ValidationError(flag, [`${path} is a directory, not a file`]);
  const directory = dirname(resolve(path));
  if (kindOf(directory) !== 'directory')
    throw new ValidationError(flag, [`${directory} is not a directory to write ${path} in`]);
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
 * which this process may create files, on a filesystem that holds files. Nothing is created here: a run refused
 * later leaves no empty directory behind.
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
