import { writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Command } from 'commander';
import { z } from 'zod';
import { parseWith, ValidationError } from '../../core/validation.js';
import {
  historyTrace,
  readStateHistory,
  type StateHistory,
} from '../../sim/controller-runtime/state-history.js';
import type { SerializedColocationTable } from '../../scheduler/colocation-table.js';
import { serializedColocationTableSchema } from '../../scheduler/colocation-table-schema.js';
import { writeColocationTableFile } from './colocation-table-file.js';
import { DB_FILE } from './controller.js';

/**
 * `fleetwise export-trace`: what really ran on a controller, as a fleetwise JSON trace that `fleetwise simulate
 * --trace FILE` replays (with another scheduler, a cap, a config). Reads the state read-only, so it can run next to
 * a live controller.
 */

interface ExportTraceFlags {
  readonly stateDir?: string;
  readonly out?: string;
  readonly colocationTable?: string;
}

const flagsSchema = z.object({
  '--state-dir': z.string().min(1, 'a directory').default('.fleetwise'),
  '--out': z.string().min(1, 'a file').optional(),
  '--colocation-table': z.string().min(1, 'a file').optional(),
});

/** The co-location table in a controller's saved scheduler state, checked as `simulate --colocation-table` reads it. */
function savedColocationTable(history: StateHistory, dbPath: string): SerializedColocationTable {
  const state = history.schedulerState;
  const table =
    typeof state === 'object' && state !== null ? (state as { table?: unknown }).table : undefined;
  if (table === undefined)
    throw new ValidationError('--colocation-table', [
      `${dbPath} holds no learned co-location: the controller plans with a scheduler that learns none, or has not planned yet`,
    ]);
  return parseWith(serializedColocationTableSchema, table, `${dbPath}: the saved co-location table`);
}

export function runExportTrace(flags: ExportTraceFlags): void {
  const options = parseWith(
    flagsSchema,
    { '--state-dir': flags.stateDir, '--out': flags.out, '--colocation-table': flags.colocationTable },
    'fleetwise export-trace',
  );
  const stateDir = resolve(options['--state-dir']);
  const dbPath = join(stateDir, DB_FILE);
  const tableFile = options['--colocation-table'];
  const history = readStateHistory(dbPath, { schedulerState: tableFile !== undefined });
  // Checked before anything is written, so a failed export leaves no half of itself behind.
  const saved =
    tableFile === undefined ? undefined : { file: tableFile, table: savedColocationTable(history, dbPath) };
  const { document, skipped } = historyTrace(history, {
    name: `history of ${options['--state-dir']}`,
    source: stateDir,
  });
  const notes = skipped.map((s) => `  ${s.id}: ${s.reason}`);
  if (document.jobs.length === 0)
    throw new ValidationError(dbPath, [
      skipped.length === 0
        ? 'no jobs to export: the controller has none'
        : `no job ran or declares expectedDurationSeconds (${skipped.map((s) => `${s.id}: ${s.reason}`).join('; ')})`,
    ]);
  const text = `${JSON.stringify(document, null, 2)}\n`;
  if (options['--out'] === undefined) process.stdout.write(text);
  else writeFileSync(options['--out'], text);
  if (saved !== undefined) writeColocationTableFile(saved.file, saved.table, '--colocation-table');
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
    .option('--out <file>', 'write the trace here (default: stdout)')
    .option(
      '--colocation-table <file>',
      'also write the co-location table the controller learned, for `fleetwise simulate --colocation-table`',
    )
    .action((options: ExportTraceFlags) => {
      runExportTrace(options);
    });
}
