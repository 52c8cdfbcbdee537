import type { JsonValue } from '../../state-store.js';
import { valueJson } from '../sql/key-values.js';
import type { MemoryTransactions, Transact } from './transactions.js';

/**
 * The memory store's key-values, as JSON text, as the SQL stores keep them: one native serialization per write (the
 * scheduler's learned state is written after every round), and a reader gets its own copy to do with as it likes.
 */
export class MemoryKeyValues {
  private readonly values = new Map<string, string>();

  constructor(
    private readonly tx: MemoryTransactions,
    private readonly transaction: Transact,
  ) {}

  getValue(key: string): JsonValue | undefined {
    const text = this.values.get(key);
    return text === undefined ? undefined : (JSON.parse(text) as JsonValue);
  }

  setValue(key: string, value: JsonValue): void {
    const text = valueJson(key, value);
    this.transaction(() => this.tx.put(this.values, key, text));
  }

  deleteValue(key: string): boolean {
    return this.transaction(() => {
      const had = this.values.has(key);
      if (had) this.tx.put(this.values, key, undefined);
      return had;
    });
  }
}
