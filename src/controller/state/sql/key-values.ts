import type { JsonValue } from '../../state-store.js';
import type { SqlConnection } from './connection.js';

/** Scheduler state kept as JSON under a key (e.g. the co-location table). */
export class KeyValueQueries {
  constructor(private readonly connection: SqlConnection) {}

  getValue(key: string): JsonValue | undefined {
    const row = this.connection.get('SELECT value_json FROM kv WHERE key = ?', key);
    return row === undefined ? undefined : (JSON.parse(String(row['value_json'])) as JsonValue);
  }

  setValue(key: string, value: JsonValue): void {
    const json = JSON.stringify(value);
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
