import { MemoryEventLog } from './event-log.js';
import type { EventFilter, EventInput, EventRecord } from '../../state-store.js';
import { checkEvent, frozenCopy, type Change } from '../lifecycle.js';
import { checkQueryBound, checkStorable, type MemoryTransactions, type Transact } from './transactions.js';

/**
 * The memory store's event log (event-log.ts indexes it), and the one way the other tables write a changed
 * record: the record and the event its change emits, in the same transaction.
 */
export class MemoryEvents {
  private readonly log = new MemoryEventLog();

  constructor(
    private readonly tx: MemoryTransactions,
    private readonly transaction: Transact,
  ) {}

  appendEvent(event: EventInput): EventRecord {
    checkEvent(event);
    return this.transaction(() => this.emit(event, this.tx.now()));
  }

  listEvents(filter: EventFilter = {}): EventRecord[] {
    checkQueryBound(filter.afterSeq, 'an event number');
    if (Number.isNaN(filter.limit)) checkQueryBound(filter.limit, 'an event list limit');
    return this.log.list(filter);
  }

  pruneEvents(kind: string, beforeSeconds: number, limit: number): number {
    return this.transaction(() => {
      const { removed, undo } = this.log.prune(kind, beforeSeconds, limit);
      this.tx.onRollback(undo);
      return removed;
    });
  }

  emit(event: EventInput, atSeconds: number): EventRecord {
    checkStorable(atSeconds, 'an event time');
    const record = frozenCopy({
      ...withoutUndefined(event),
      seq: this.tx.next('event'),
      atSeconds,
    }) as EventRecord;
    this.tx.onRollback(this.log.append(record));
    return record;
  }

  /** Store a changed record, frozen, and emit its event; an unchanged record (the very one stored) is left be. */
  applyChange<K, R>(
    map: Map<K, R & { readonly id: K }>,
    change: Change<R & { readonly id: K }>,
  ): R & { readonly id: K } {
    if (map.get(change.record.id) === change.record) return change.record;
    const record = Object.freeze(withoutUndefined(change.record));
    this.tx.put(map, record.id, record);
    if (change.event !== undefined) this.emit(change.event, change.atSeconds ?? this.tx.now());
    return record;
  }
}

/** The record without its undefined fields, as SQLite's JSON gives it back; itself when it has none (most writes). */
function withoutUndefined<T extends object>(value: T): T {
  if (!Object.values(value).includes(undefined)) return value;
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as T;
}
