import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MemoryStateStore } from '../../src/controller/memory-state-store.js';
import { PostgresStateStore } from '../../src/controller/state/postgres-state-store.js';
import { SqliteStateStore } from '../../src/controller/state/sqlite-state-store.js';
import type { RoundInput, StateStore } from '../../src/controller/state-store.js';
import { sqlDatabasesForFile } from '../helpers/postgres.js';

/**
 * Reads and prunes by a number no record carries, a fraction or one past the safe integers (StateStore contract, all
 * three stores): an id finds nothing, a sequence bound reads as its floor, a count past the safe integers is no bound.
 * PostgreSQL's BIGINT refuses such a number and SQLite's LIMIT a non-integer one, where the memory store simply
 * answered; all three answer alike.
 */

// A scratch directory and one PostgreSQL server for the file; each store gets a database file or schema of its own.
const databases = sqlDatabasesForFile('unsafe-numbers');

const STORES: readonly (readonly [string, () => StateStore])[] = [
  ['MemoryStateStore', () => new MemoryStateStore({ nowSeconds: () => 1000, storeId: 'test' })],
  ['SqliteStateStore', () => new SqliteStateStore(databases.sqlitePath(), { nowSeconds: () => 1000 })],
  [
    'PostgresStateStore',
    () => {
      return new PostgresStateStore(databases.postgresUrl(), { nowSeconds: () => 1000 });
    },
  ],
];

const ROUND: RoundInput = {
  configuration: { instances: [] },
  decision: {
    scheduler: 'eva',
    nowSeconds: 1000,
    candidates: [],
    chosen: 'partial',
    reason: 'a round',
    waiting: [],
    pinned: [],
  },
};

/** Not a record's number: fractions, and numbers past the safe integers either way. */
const NO_RECORD_NUMBERS = [1.5, 0.5, 2 ** 53, 1e20, -1e20, Number.MAX_VALUE];
/** Past the safe integers: as good as no limit. */
const HUGE = [1e20, 2 ** 63, Number.MAX_VALUE, Number.POSITIVE_INFINITY];

describe.each(STORES)('%s: reads by a number no record carries', (_name, make) => {
  let store: StateStore;
  beforeEach(() => {
    store = make();
  });
  afterEach(() => store.close());

  it('finds no intent and no round by a fraction or a number past the safe integers', () => {
    const intent = store.recordIntent({ kind: 'terminate', payload: { instanceId: 'inst-1' } });
    const round = store.recordRound(ROUND);
    for (const n of NO_RECORD_NUMBERS) {
      expect(store.getIntent(n), `getIntent(${n})`).toBeUndefined();
      expect(store.getRound(n), `getRound(${n})`).toBeUndefined();
    }
    expect(store.getIntent(1)).toEqual(intent);
    expect(store.getRound(1)).toEqual(round);
  });

  it('lists the events after a fractional or huge sequence number as after its floor', () => {
    for (let i = 0; i < 5; i++) store.appendEvent({ kind: 'note', message: `n${i}` });
    const seqs = (afterSeq: number, newestFirst = false): number[] =>
      store.listEvents({ afterSeq, newestFirst }).map((e) => e.seq);
    expect(seqs(1.5)).toEqual([2, 3, 4, 5]);
    expect(seqs(4.999)).toEqual([5]);
    expect(seqs(-0.5)).toEqual([1, 2, 3, 4, 5]);
    expect(seqs(2.5, true)).toEqual([5, 4, 3]);
    expect(seqs(1e20)).toEqual([]);
    expect(seqs(-1e20)).toEqual([1, 2, 3, 4, 5]);
  });

  it('takes a limit past the safe integers as no limit, and a fractional one as its floor, in every list', () => {
    for (let i = 0; i < 3; i++) store.appendEvent({ kind: 'note' });
    store.recordRound(ROUND);
    store.recordRound(ROUND);
    for (const limit of HUGE) {
      expect(store.listEvents({ limit }), `listEvents limit ${limit}`).toHaveLength(3);
      expect(store.listEvents({ limit, newestFirst: true, kind: 'note' })).toHaveLength(3);
      expect(store.listJobs({ limit }), `listJobs limit ${limit}`).toEqual([]);
      expect(store.listRounds(limit), `listRounds ${limit}`).toHaveLength(2);
    }
    expect(store.listEvents({ limit: 2.7 }).map((e) => e.seq)).toEqual([1, 2]);
    expect(store.listRounds(1.5).map((r) => r.round)).toEqual([2]);
  });

  it('prunes by a count past the safe integers as by no count', () => {
    for (let i = 0; i < 3; i++) store.appendEvent({ kind: 'note' });
    for (let i = 0; i < 3; i++) store.recordRound(ROUND);
    const intent = store.recordIntent({ kind: 'terminate', payload: { instanceId: 'inst-1' } });
    store.completeIntent(intent.id);
    expect(store.pruneRounds(1e20)).toBe(0);
    expect(store.pruneRounds(1.5)).toBe(2);
    expect(store.listRounds().map((r) => r.round)).toEqual([3]);
    expect(store.pruneEvents('note', 2000, 1e20)).toBe(3);
    expect(store.pruneFinishedIntents(2000, 1e20)).toBe(1);
    expect(store.listIntents()).toEqual([]);
  });
});
