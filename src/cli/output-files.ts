import { mkdirSync } from 'node:fs';
import { failureReason, OutputFileError, writeFilesAtomically, type OutputFile } from './atomic-file.js';

/** A directory a command writes files into (`--out DIR`), made if missing; `flag` names it in an error. */
export interface OutputDirectory {
  readonly path: string;
  readonly flag: string;
}

/**
 * Write a command's files into its directories, made first: each file whole, all of them or none
 * (`writeFilesAtomically`). The failure, naming the flag and the path, is returned rather than thrown, so that the
 * command still prints its result (minutes of runs are not lost with their files) and then fails with it.
 */
export function writeOutputFiles(
  files: readonly OutputFile[],
  directories: readonly OutputDirectory[] = [],
): OutputFileError | undefined {
  if (files.length === 0) return undefined;
  for (const dir of directories)
    try {
      mkdirSync(dir.path, { recursive: true });
    } catch (e) {
      const none = files.length === 1 ? 'nothing was written' : 'none of the files was written';
      return new OutputFileError(dir.flag, dir.path, `${failureReason(e)}; ${none}`, { cause: e });
    }
  try {
    writeFilesAtomically(files);
  } catch (e) {
    if (e instanceof OutputFileError) return e;
    throw e;
  }
  return undefined;
}
