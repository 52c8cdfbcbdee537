import { StateStoreFaultError, type JsonValue } from '../../state-store.js';
import type { SqlConnection } from './connection.js';

/**
 * A key-value's JSON text, as every store (the memory store too) keeps it. A value JSON has no text for (undefined, a
 * function) is refused, naming the key, by all alike: stored, it would be no text (NOT NULL in SQLite), the word
 * `undefined` in PostgreSQL (every later read of the key failing), or a missing key in memory.
 */
export function valueJson(key: string, value: JsonValue): string {
  let json: string | undefined;
  try {
    json = JSON.stringify(value);
  } catch (e) {
    throw new StateStoreFaultError(`value of key ${key} cannot be stored as JSON: ${(e as Error).message}`);
  }
  if (json === undefined)
    throw new StateStoreFaultError(
      `value of key ${key} cannot be stored as JSON: ${typeof value} has no JSON form (deleteValue removes a key)`,
    );
  return json;
}

/** Scheduler state kept as JSON under a key (e.g. the co-location table). */
export class KeyValueQueries {
  constructor(private readonly connection: SqlConnection) {}

  getValue(key: string): JsonValue | undefined {
    const row = this.connection.get('SELECT value_json FROM kv WHERE key = ?', key);
    return row === undefined ? undefined : (JSON.parse(String(row['value_json'])) as JsonValue);
  }

  setValue(key: string, value: JsonValue): void {
    const json = valueJson(key, value);
    this.connection.transaction(() =>
      this.connection.run(
        'INSERT INTO kv (key, value_json, updated_at) VALUES (?, ?, ?) ON CONFLICT (key) DO UPDATE SET value_json = excluded.value_json, updated_at = excluded.updated_at',
        key,
        json,
        this.connection.now(),
      ),
    );
  }

  deleteValue(key: string): boolean {
    return this.connection.transaction(() => this.connection.run('DELETE FROM kv WHERE key = ?', key) > 0);
  }
}
