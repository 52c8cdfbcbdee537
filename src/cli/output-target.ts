import { statSync } from 'node:fs';
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

/** A directory to write files into: one that exists, or can be made (its nearest existing ancestor a directory). */
export function checkOutputDirectory(path: string, flag: string): void {
  let at = resolve(path);
  for (;;) {
    const kind = kindOf(at);
    if (kind === 'directory') return;
    if (kind === 'file')
      throw new ValidationError(flag, [
        at === resolve(path) ? `${path} is a file, not a directory` : `${at} is a file: cannot make ${path}`,
      ]);
    const parent = dirname(at);
    if (parent === at) return;
    at = parent;
  }
}
