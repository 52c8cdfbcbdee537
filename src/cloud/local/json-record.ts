import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import type { z } from 'zod';
import { parseWith, ValidationError } from '../../core/validation.js';

/**
 * Small JSON records one process leaves in a directory for another to read (a local worker's engine, its exit): read
 * checked against their schema, written whole.
 */

/** The record at `path` as `schema` reads it; undefined when there is none. Not JSON, or not its shape: named. */
export function readJsonRecord<S extends z.ZodType>(path: string, schema: S): z.output<S> | undefined {
  // Looked for first: callers ask of many directories that have none, and a failed read costs an exception each.
  if (!existsSync(path)) return undefined;
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw e;
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw new ValidationError(path, [`not valid JSON: ${(e as Error).message}`]);
  }
  return parseWith(schema, value, path);
}

/** Write a record atomically (a temporary file renamed over it), owner-only: a reader never finds half of one. */
export function writeJsonRecord(path: string, value: unknown): void {
  const temp = `${path}.${process.pid}.tmp`;
  writeFileSync(temp, `${JSON.stringify(value)}\n`, { mode: 0o600 });
  renameSync(temp, path);
}
