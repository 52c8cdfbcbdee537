import { statSync } from 'node:fs';
import { isAbsolute, join, relative, resolve, sep } from 'node:path';
import type { Command } from 'commander';
import { z } from 'zod';
import { parseWith, ValidationError } from '../../core/validation.js';
import { isPostgresUrl, redactUrl } from '../../controller/state/postgres/conninfo.js';
import {
  readPostgresStateHistory,
  readSqliteStateHistory,
} from '../../sim/controller-runtime/read-state-history.js';
import { historyTrace, type StateHistory } from '../../sim/controller-runtime/state-history.js';
import type { SerializedColocationTable } from '../../scheduler/colocation-table.js';
import { serializedColocationTableSchema } from '../../scheduler/colocation-table-schema.js';
import { writeFilesAtomically, type OutputFile } from '../atomic-file.js';
import { checkOutputFile, realTarget } from '../output-target.js';
import { colocationTableOutput } from './colocation-table-file.js';
import { DB_FILE } from './controller.js';

/**
 * `fleetwise export-trace`: what really ran on a controller, as a fleetwise JSON trace that `fleetwise simulate
 * --trace FILE` replays (with another scheduler, a cap, a config). Reads the state read-only, so it can run next to
 * a live controller: its SQLite file, or its PostgreSQL database (`--state`, as the controller was given).
 */

interface ExportTraceFlags {
  readonly stateDir?: string;
  readonly state?: string;
  readonly out?: string;
  readonly colocationTable?: string;
}

const flagsSchema = z.object({
  '--state-dir': z.string().min(1, 'a directory').default('.fleetwise'),
  '--state': z
    .string()
    .refine(isPostgresUrl, 'a postgres://user@host:port/database URL, as the controller was given')
    .optional(),
  '--out': z.string().min(1, 'a file').optional(),
  '--colocation-table': z.string().min(1, 'a file').optional(),
});

/** The co-location table in a controller's saved scheduler state, checked as `simulate --colocation-table` reads it. */
function savedColocationTable(history: StateHistory, where: string): SerializedColocationTable {
  const state = history.schedulerState;
  const table =
    typeof state === 'object' && state !== null ? (state as { table?: unknown }).table : undefined;
  if (table === undefined)
    throw new ValidationError('--colocation-table', [
      `${where} holds no learned co-location: the controller plans with a scheduler that learns none, or has not planned yet`,
    ]);
  return parseWith(serializedColocationTableSchema, table, `${where}: the saved co-location table`);
}

/** Whether two paths name one file: the same real path, or (hard links) the same existing inode. */
function sameFile(a: string, b: string): boolean {
  if (realTarget(a) === realTarget(b)) return true;
  try {
    const [x, y] = [statSync(a), statSync(b)];
    return x.dev === y.dev && x.ino === y.ino;
  } catch {
    return false;
  }
}

/**
 * An output inside the state directory this export reads, refused naming `--state-dir`: written there, it could
 * replace the database, its WAL or a token the controller keeps there. `checkOutputFile` refuses any state directory
 * too; this refusal names the one the command was given, and holds even before that directory has a database.
 */
function checkOutsideStateDir(target: string, flag: string, stateDir: string): void {
  const dir = realTarget(stateDir);
  const db = join(dir, DB_FILE);
  const real = realTarget(target);
  const below = relative(dir, real);
  const inside = below === '' || !(below === '..' || below.startsWith(`..${sep}`) || isAbsolute(below));
  if (sameFile(target, db))
    throw new ValidationError(`${flag} / --state-dir`, [
      `${target} is the controller's state database this export reads (${db}): it will not be overwritten`,
    ]);
  if (inside)
    throw new ValidationError(`${flag} / --state-dir`, [
      `${target} is in ${dir}, the controller's state directory this export reads: write it elsewhere`,
    ]);
}

export function runExportTrace(flags: ExportTraceFlags): void {
  const options = parseWith(
    flagsSchema,
    {
      '--state-dir': flags.stateDir,
      '--state': flags.state,
      '--out': flags.out,
      '--colocation-table': flags.colocationTable,
    },
    'fleetwise export-trace',
  );
  const tableFile = options['--colocation-table'];
  const postgresUrl = options['--state'];
  const targets = [
    { file: options['--out'], flag: '--out' },
    { file: tableFile, flag: '--colocation-table' },
  ];
  // Both targets are checked before anything is read or written, so a failed export leaves no half of itself behind.
  for (const { file, flag } of targets) {
    if (file === undefined) continue;
    if (postgresUrl === undefined) checkOutsideStateDir(file, flag, options['--state-dir']);
    checkOutputFile(file, flag);
  }
  // Written together, one file would end up holding only one of them after both were reported written.
  if (options['--out'] !== undefined && tableFile !== undefined && sameFile(options['--out'], tableFile))
    throw new ValidationError('--out / --colocation-table', [
      `${options['--out']} and ${tableFile} are the same file: give the trace and the co-location table a file each`,
    ]);
  const read = { schedulerState: tableFile !== undefined };
  // A PostgreSQL state is where the controller keeps everything when it was given one; its state directory then
  // holds no database, so `--state` wins and the controller's own flags can be passed as they are.
  const source =
    postgresUrl === undefined
      ? { where: join(resolve(options['--state-dir']), DB_FILE), name: options['--state-dir'] }
      : { where: redactUrl(postgresUrl), name: redactUrl(postgresUrl) };
  const history =
    postgresUrl === undefined
      ? readSqliteStateHistory(source.where, read)
      : readPostgresStateHistory(postgresUrl, read);
  const saved =
    tableFile === undefined
      ? undefined
      : { file: tableFile, table: savedColocationTable(history, source.where) };
  const { document, skipped } = historyTrace(history, {
    name: `history of ${source.name}`,
    source: postgresUrl === undefined ? resolve(options['--state-dir']) : source.where,
  });
  const notes = skipped.map((s) => `  ${s.id}: ${s.reason}`);
  if (document.jobs.length === 0)
    throw new ValidationError(source.where, [
      skipped.length === 0
        ? 'no jobs to export: the controller has none'
        : `no job ran or declares expectedDurationSeconds (${skipped.map((s) => `${s.id}: ${s.reason}`).join('; ')})`,
    ]);
  const text = `${JSON.stringify(document, null, 2)}\n`;
  const files: OutputFile[] = [
    ...(options['--out'] === undefined ? [] : [{ path: options['--out'], text, flag: '--out' }]),
    ...(saved === undefined ? [] : [colocationTableOutput(saved.file, saved.table, '--colocation-table')]),
  ];
  // Both or neither, each whole (a full disk leaves the files as they were), and before stdout: a reader of stdout
  // gone ends the process at its next write (main.ts), the table unwritten.
  writeFilesAtomically(files);
  if (options['--out'] === undefined) process.stdout.write(text);
  const measured = document.jobs.filter((j) => j.durationFrom === 'measured').length;
  process.stderr.write(
    `exported ${document.jobs.length} job(s) (${measured} measured, ${document.jobs.length - measured} declared)` +
      `${options['--out'] === undefined ? '' : ` to ${options['--out']}`}` +
      `${tableFile === undefined ? '' : `, and the co-location table the controller learned to ${tableFile}`}` +
      `${skipped.length === 0 ? '' : `; left out:\n${notes.join('\n')}`}\n`,
  );
}

export function registerExportTrace(program: Command): void {
  program
    .command('export-trace')
    .description(
      'write what ran on a controller (its state, read-only) as a fleetwise JSON trace for `fleetwise simulate --trace`',
    )
    .option('--state-dir <dir>', "the controller's state directory (default .fleetwise)")
    .option(
      '--state <url>',
      "the controller's PostgreSQL state (postgres://user@host:port/db; password in PGPASSWORD or ~/.pgpass), read in a read-only transaction",
    )
    .option('--out <file>', 'write the trace here (default: stdout)')
    .option(
      '--colocation-table <file>',
      'also write the co-location table the controller learned, for `fleetwise simulate --colocation-table`',
    )
    .action((options: ExportTraceFlags) => {
      runExportTrace(options);
    });
}
