import { statSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { parseWith, ValidationError } from '../../core/validation.js';
import type { SerializedColocationTable } from '../../scheduler/colocation-table.js';
import { serializedColocationTableSchema } from '../../scheduler/colocation-table-schema.js';
import { readYamlOrJsonFile } from '../flag-file.js';

/** `--colocation-table FILE`: a learned co-location table, checked field by field. */
export function readColocationTableFile(path: string): SerializedColocationTable {
  return parseWith(serializedColocationTableSchema, readYamlOrJsonFile(path, '--colocation-table'), path);
}

/** Refuses a path to write a table to whose directory is missing, before a run that may take minutes. */
export function checkColocationTableTarget(path: string, flag = '--save-colocation-table'): void {
  const directory = dirname(resolve(path));
  let isDirectory = false;
  try {
    isDirectory = statSync(directory).isDirectory();
  } catch {
    // Reported below: missing or unreadable alike.
  }
  if (!isDirectory) throw new ValidationError(flag, [`${directory} is not a directory to write ${path} in`]);
}

/** Writes a learned table as `readColocationTableFile` reads it; `flag` names the file in an error. */
export function writeColocationTableFile(
  path: string,
  table: SerializedColocationTable | undefined,
  flag = '--save-colocation-table',
): void {
  if (table === undefined) throw new Error('the Eva run returned no co-location table to save');
  try {
    writeFileSync(path, `${JSON.stringify(table, null, 1)}\n`, 'utf8');
  } catch (e) {
    throw new ValidationError(flag, [`cannot write ${path}: ${(e as Error).message}`]);
  }
}
