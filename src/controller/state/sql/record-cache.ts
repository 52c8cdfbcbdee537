import { LRUCache } from 'lru-cache';
import type { SqlConnection } from './connection.js';

/**
 * Records by id, read once and then served from memory until written: the loop, the API and heartbeats read the same
 * jobs and instances many times a second (every pass looks at every running task's job and instance). A record is
 * kept only when read outside a transaction, since one read inside may still be rolled back; every write of a record
 * through this connection forgets it, and a commit by any other connection (another process writing the database: `dataVersion`,
 * looked at once per turn of the event loop) forgets them all, so a read sees the committed row as
 * of its turn. Records are frozen: readers share them. When full, the record read longest ago makes room: a listing of
 * many finished jobs must not push out the live ones every pass reads.
 */
export class RecordCache<T extends object> {
  private readonly records: LRUCache<string, T>;
  private dataVersion: number | undefined;
  private checkedThisTurn = false;

  constructor(
    private readonly connection: SqlConnection,
    capacity: number,
  ) {
    this.records = new LRUCache<string, T>({ max: capacity });
  }

  get(id: string): T | undefined {
    if (!this.checkedThisTurn) {
      // Once per turn of the event loop: a turn runs to its end anyway, like a read made at its start.
      this.checkedThisTurn = true;
      setImmediate(() => (this.checkedThisTurn = false));
      const version = this.connection.dataVersion();
      if (version !== this.dataVersion) {
        this.records.clear();
        this.dataVersion = version;
      }
    }
    return this.records.get(id);
  }

  /** Keep `record` if it was read outside any transaction; returns it either way. */
  remember(id: string, record: T): T {
    if (this.connection.inTransaction()) return record;
    deepFreeze(record);
    this.records.set(id, record);
    return record;
  }

  forget(id: string): void {
    this.records.delete(id);
  }
}

export function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}
