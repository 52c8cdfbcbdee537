import { describe, expect, it } from 'vitest';
import type { SqlConnection } from '../../src/controller/state/sql/connection.js';
import { RecordCache } from '../../src/controller/state/sql/record-cache.js';

/** The two things the cache asks of its connection; the rest is never called here. */
function connection(state: { version: number; inTransaction: boolean }): SqlConnection {
  const unused = (): never => {
    throw new Error('not used by the record cache');
  };
  return {
    now: () => 0,
    transaction: unused,
    run: unused,
    get: unused,
    all: unused,
    nextNumber: unused,
    numberUsed: unused,
    dataVersion: () => state.version,
    inTransaction: () => state.inTransaction,
  };
}

describe('RecordCache', () => {
  it('when full, lets go of the record read longest ago, not the one kept first', () => {
    const cache = new RecordCache<{ id: string }>(connection({ version: 1, inTransaction: false }), 2);
    // As the store reads: a miss, then the row read and kept.
    expect(cache.get('live')).toBeUndefined();
    cache.remember('live', { id: 'live' });
    cache.remember('finished-1', { id: 'finished-1' });
    // The live record is read again (every pass does), then a listing reads finished ones.
    expect(cache.get('live')).toEqual({ id: 'live' });
    cache.remember('finished-2', { id: 'finished-2' });
    expect(cache.get('live')).toEqual({ id: 'live' });
    expect(cache.get('finished-1')).toBeUndefined();
    expect(cache.get('finished-2')).toEqual({ id: 'finished-2' });
  });

  it('keeps nothing read inside a transaction, freezes what it keeps, and forgets it on write', () => {
    const state = { version: 1, inTransaction: true };
    const cache = new RecordCache<{ id: string }>(connection(state), 10);
    expect(cache.get('a')).toBeUndefined();
    cache.remember('a', { id: 'a' });
    expect(cache.get('a')).toBeUndefined();
    state.inTransaction = false;
    const kept = cache.remember('a', { id: 'a' });
    expect(Object.isFrozen(kept)).toBe(true);
    expect(cache.get('a')).toBe(kept);
    cache.forget('a');
    expect(cache.get('a')).toBeUndefined();
  });
});
