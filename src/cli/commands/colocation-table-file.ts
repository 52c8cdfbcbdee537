import { ValidationError } from '../../core/validation.js';
import { parseFileWith } from '../../controller/settings-file-fields.js';
import type { SerializedColocationTable } from '../../scheduler/colocation-table.js';
import { serializedColocationTableSchema } from '../../scheduler/colocation-table-schema.js';
import type { RunRequest } from '../../sim/run-request.js';
import type { RunResult } from '../../world/run-result.js';
import { writeFilesAtomically, type OutputFile } from '../atomic-file.js';
import { readFlagFileWithLines } from '../flag-file.js';
import { checkOutputFile, realTarget } from '../output-target.js';
import { REPORT_FILES } from '../../sim/report/write.js';
import { join } from 'node:path';

/**
 * `--colocation-table FILE`: a learned co-location table, checked field by field, each problem with its line (a table
 * runs to thousands of lines: `entries.317.mean (line 2215)` finds what `entries.317.mean` leaves to counting).
 */
export function readColocationTableFile(path: string): SerializedColocationTable {
  return parseFileWith(serializedColocationTableSchema, readFlagFileWithLines(path, '--colocation-table'));
}

/**
 * What a simulate command's `--colocation-table` and `--save-colocation-table` ask of its runs, checked before any
 * runs: only Eva learns co-location, and a table is saved from exactly one Eva run.
 */
export function colocationTableRequest(
  flags: {
    readonly colocationTable?: string | undefined;
    readonly saveColocationTable?: string | undefined;
    /** The report directory (`--out`), whose files the table may not be. */
    readonly out?: string | undefined;
  },
  evaRuns: number,
): Pick<RunRequest, 'evaLearnedColocation' | 'returnLearnedColocation'> {
  if (flags.colocationTable !== undefined && evaRuns === 0)
    throw new ValidationError('--colocation-table', ['only Eva learns co-location: add an eva scheduler']);
  if (flags.saveColocationTable !== undefined) {
    if (evaRuns !== 1)
      throw new ValidationError('--save-colocation-table', [
        `saves the table of exactly one Eva run; this command makes ${evaRuns}`,
      ]);
    checkOutputFile(flags.saveColocationTable, '--save-colocation-table');
    const table = realTarget(flags.saveColocationTable);
    const out = flags.out;
    const clash =
      out === undefined
        ? undefined
        : Object.values(REPORT_FILES).find((f) => realTarget(join(out, f)) === table);
    if (clash !== undefined)
      throw new ValidationError('--save-colocation-table', [
        `${flags.saveColocationTable} is --out's ${clash}: give the table a path of its own`,
      ]);
  }
  return {
    evaLearnedColocation:
      flags.colocationTable === undefined ? undefined : readColocationTableFile(flags.colocationTable),
    returnLearnedColocation: flags.saveColocationTable !== undefined,
  };
}

/** `--save-colocation-table FILE`: the table the command's one Eva run learned (`colocationTableRequest`), to write. */
export function learnedColocationFile(path: string, results: readonly RunResult[]): OutputFile {
  const learned = results.find((r) => r.learnedColocation !== undefined)?.learnedColocation;
  if (learned === undefined) throw new Error('the Eva run returned no co-location table to save');
  return colocationTableOutput(path, learned);
}

/** A learned table as `readColocationTableFile` reads it, to write to `path`; `flag` names the file in an error. */
export function colocationTableOutput(
  path: string,
  table: SerializedColocationTable,
  flag = '--save-colocation-table',
): OutputFile {
  return { path, text: `${JSON.stringify(table, null, 1)}\n`, flag };
}

/**
 * Writes a learned table as `readColocationTableFile` reads it, whole or not at all: a failure (a full disk) leaves
 * the file as it was and is an OutputFileError naming `flag` and the path (exit 1, not invalid input).
 */
export function writeColocationTableFile(
  path: string,
  table: SerializedColocationTable,
  flag = '--save-colocation-table',
): void {
  writeFilesAtomically([colocationTableOutput(path, table, flag)]);
}
