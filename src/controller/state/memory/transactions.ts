import { StateStoreError, StateStoreFaultError } from '../../state-store.js';

export type Counter = 'job' | 'instance' | 'intent' | 'round' | 'event';

/**
 * Runs a function as one transaction of the store. The tables are handed the store's own `transaction`, not
 * `MemoryTransactions.run`, so a store that wraps its transactions wraps every write.
 */
export type Transact = <T>(fn: () => T) => T;

/**
 * The memory store's transactions: an undo journal that a failed transaction unwinds, the hooks that run once the
 * outermost one commits, the counters that number records (given back on a rollback, as SQL's are), and the clock.
 */
export class MemoryTransactions {
  private readonly counters = new Map<Counter, number>();
  /** Undo actions of the open transaction, newest last; undefined outside a transaction. */
  private journal: (() => void)[] | undefined;
  /** What `afterCommit` was asked to run once the open outermost transaction commits. */
  private committed: (() => void)[] = [];
  private closed = false;

  constructor(readonly now: () => number) {}

  run<T>(fn: () => T): T {
    this.checkOpen();
    const outer = this.journal === undefined;
    const journal = this.journal ?? [];
    this.journal = journal;
    const mark = journal.length;
    const hooks = this.committed;
    const hookMark = hooks.length;
    let result: T;
    try {
      result = fn();
      if (result instanceof Promise) throw new StateStoreError('a transaction function must not be async');
    } catch (e) {
      while (journal.length > mark) (journal.pop() as () => void)();
      hooks.length = hookMark;
      throw e;
    } finally {
      if (outer) this.journal = undefined;
    }
    if (outer) {
      // Committed by now, as the SQL stores' hooks run after COMMIT: a hook that throws passes its error on and
      // skips the hooks after it, but undoes none of the transaction's writes.
      this.committed = [];
      for (const hook of hooks) hook();
    }
    return result;
  }

  afterCommit(fn: () => void): void {
    if (this.journal === undefined) fn();
    else this.committed.push(fn);
  }

  close(): void {
    this.closed = true;
  }

  /**
   * Set (or with `undefined`, delete) a map entry, journaling the previous value. A record holding a number that is
   * not finite is refused, as the SQL stores refuse it (sql/parameter-check.ts): a simulation must fail where a
   * controller on SQLite or PostgreSQL would.
   */
  put<K, V>(map: Map<K, V>, key: K, value: V | undefined): void {
    const journal = this.journal;
    if (journal === undefined) throw new Error('internal: write outside a transaction');
    checkStorable(value, String(key));
    const had = map.has(key);
    const previous = map.get(key);
    journal.push(() => (had ? map.set(key, previous as V) : map.delete(key)));
    if (value === undefined) map.delete(key);
    else map.set(key, value);
  }

  /** Journal an undo action of a write made outside the maps `put` keeps (the event log's). */
  onRollback(undo: () => void): void {
    const journal = this.journal;
    if (journal === undefined) throw new Error('internal: write outside a transaction');
    journal.push(undo);
  }

  /** Move a counter up to `n` (a kept id), so it is never given again; returns `n`. */
  claim(counter: Counter, n: number): number {
    const journal = this.journal;
    if (journal === undefined) throw new Error('internal: counter outside a transaction');
    checkStorable(n, `the ${counter} counter`);
    const before = this.counters.get(counter) ?? 0;
    if (n > before) {
      this.counters.set(counter, n);
      journal.push(() => this.counters.set(counter, before));
    }
    return n;
  }

  next(counter: Counter): number {
    const journal = this.journal;
    if (journal === undefined) throw new Error('internal: counter outside a transaction');
    const n = (this.counters.get(counter) ?? 0) + 1;
    this.counters.set(counter, n);
    journal.push(() => this.counters.set(counter, n - 1));
    return n;
  }

  private checkOpen(): void {
    if (this.closed) throw new StateStoreError('the state store is closed');
  }
}

/** Refuse a value a record must have that is missing, or a number that is not finite. */
export function checkRequired(value: unknown, what: string): void {
  if (value === undefined)
    throw new StateStoreFaultError(
      `cannot store undefined as ${what}: the state keeps finite numbers, text and null`,
    );
  checkStorable(value, what);
}

/** Refuse to read by a bound that is not a finite number, rather than answer that nothing (or everything) matched. */
export function checkQueryBound(value: number | undefined, what: string): void {
  if (value !== undefined && !Number.isFinite(value))
    throw new StateStoreFaultError(
      `cannot query by ${String(value)} as ${what}: the state keeps finite numbers, text and null`,
    );
}

/** Refuse a number that is not finite, alone or as one of a record's own fields (`what` names the record). */
export function checkStorable(value: unknown, what: string): void {
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw unstorable(value, what);
    return;
  }
  if (typeof value !== 'object' || value === null) return;
  for (const [field, v] of Object.entries(value))
    if (typeof v === 'number' && !Number.isFinite(v)) throw unstorable(v, `${field} of ${what}`);
}

function unstorable(value: number, what: string): StateStoreFaultError {
  return new StateStoreFaultError(
    `cannot store ${String(value)} as ${what}: the state keeps finite numbers, text and null`,
  );
}
