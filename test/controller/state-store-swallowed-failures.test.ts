import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { loadCatalogFile, PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import { parseJobSpec } from '../../src/controller/job-spec/parse.js';
import { MemoryStateStore } from '../../src/controller/memory-state-store.js';
import { PostgresError } from '../../src/controller/state/postgres/connection.js';
import { PostgresStateStore } from '../../src/controller/state/postgres-state-store.js';
import { SqliteStateStore } from '../../src/controller/state/sqlite-state-store.js';
import type { StateStore } from '../../src/controller/state-store.js';
import { sqlDatabasesForFile } from '../helpers/postgres.js';

/**
 * A transaction whose function catches a store's error and goes on (StateStore contract, all three stores). SQLite
 * and the memory store go on with the transaction and commit its other writes; PostgreSQL aborts a transaction at its
 * first failed statement, so there the transaction throws, naming that statement, and nothing of it is written. Either
 * way, what `afterCommit` announces is there to read: it runs exactly when the writes were made.
 */

const RESNET = parseJobSpec(
  readFileSync(join(PROJECT_ROOT, 'examples', 'jobs', 'resnet.yaml'), 'utf8'),
  'resnet.yaml',
  loadCatalogFile(),
);

// A scratch directory and one PostgreSQL server for the file; each store gets a database file or schema of its own.
const databases = sqlDatabasesForFile('swallowed');

/** A store, and a read of it that fails with a store error: in the database itself where there is one. */
interface Opened {
  readonly store: StateStore;
  readonly failingRead: () => unknown;
  readonly close: () => void;
}

/** The SQL stores' reads of the key-values fail once their table is gone (renamed by another connection). */
const KV_READ = 'SELECT value_json FROM kv WHERE key = ?';

const STORES: readonly (readonly [string, () => Opened, 'commits' | 'throws'])[] = [
  [
    'MemoryStateStore',
    () => {
      const store = new MemoryStateStore({ nowSeconds: () => 1000, storeId: 'test' });
      return {
        store,
        failingRead: () => store.listJobs({ afterId: 'no-such-job' }),
        close: () => store.close(),
      };
    },
    'commits',
  ],
  [
    'SqliteStateStore',
    () => {
      const path = databases.sqlitePath();
      const store = new SqliteStateStore(path, { nowSeconds: () => 1000 });
      const other = new Database(path);
      other.exec('ALTER TABLE kv RENAME TO kv_away');
      other.close();
      return { store, failingRead: () => store.getValue('k'), close: () => store.close() };
    },
    'commits',
  ],
  [
    'PostgresStateStore',
    () => {
      const url = databases.postgresUrl();
      const store = new PostgresStateStore(url, { nowSeconds: () => 1000 });
      const schema = /search_path=(\w+)/.exec(new URL(url).searchParams.get('options') ?? '')?.[1];
      if (schema === undefined) throw new Error(`no search_path in ${url}`);
      databases.server.sql(`ALTER TABLE ${schema}.kv RENAME TO kv_away`);
      return { store, failingRead: () => store.getValue('k'), close: () => store.close() };
    },
    'throws',
  ],
];

const escaped = (text: string): string => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

describe.each(STORES)('%s: a store error caught inside a transaction', (_name, open, outcome) => {
  let opened: Opened;
  afterEach(() => opened.close());

  /** Notes in the event log, oldest first. */
  const notes = (store: StateStore): string[] =>
    store.listEvents({ kind: 'note' }).map((e) => e.message ?? '');

  it('commits the other writes or throws; afterCommit runs exactly when they are there to read', () => {
    opened = open();
    const { store, failingRead } = opened;
    let readFailed = false;
    let announced = false;
    let thrown: unknown;
    try {
      store.transaction(() => {
        store.submitJob(RESNET);
        store.appendEvent({ kind: 'note', message: 'before the failed read' });
        try {
          failingRead();
        } catch {
          readFailed = true;
        }
        store.afterCommit(() => {
          announced = true;
        });
      });
    } catch (e) {
      thrown = e;
    }
    expect(readFailed).toBe(true);
    const written = store.getJob('job-1') !== undefined && notes(store).length === 1;
    expect(announced).toBe(written);
    expect(thrown === undefined).toBe(written);
    if (outcome === 'commits') expect(written).toBe(true);
    else {
      expect(written).toBe(false);
      expect(store.listJobs()).toEqual([]);
      expect(thrown).toBeInstanceOf(PostgresError);
      expect((thrown as Error).message).toMatch(
        new RegExp(
          `transaction failed at \`${escaped(KV_READ)}\` \\(PostgreSQL: relation "kv" does not exist`,
        ),
      );
    }
    // The store is sound afterwards: the next transaction commits.
    store.transaction(() => store.submitJob(RESNET));
    expect(store.listJobs()).toHaveLength(written ? 2 : 1);
  });

  it('refuses a write after the caught failure where the transaction is lost, naming the failed read', () => {
    opened = open();
    const { store, failingRead } = opened;
    let thrown: unknown;
    try {
      store.transaction(() => {
        try {
          failingRead();
        } catch {
          // caught, and the transaction goes on
        }
        store.submitJob(RESNET);
      });
    } catch (e) {
      thrown = e;
    }
    expect(thrown === undefined).toBe(store.getJob('job-1') !== undefined);
    if (outcome === 'commits') expect(thrown).toBeUndefined();
    else
      expect((thrown as Error).message).toMatch(
        new RegExp(
          `the transaction had failed at \`${escaped(KV_READ)}\`: PostgreSQL: relation "kv" does not exist`,
        ),
      );
  });

  it('in a nested transaction: it commits with the outer one, or throws and the outer one commits without it', () => {
    opened = open();
    const { store, failingRead } = opened;
    let readFailed = false;
    let innerAnnounced = false;
    let outerAnnounced = false;
    let innerThrown: unknown;
    store.transaction(() => {
      store.submitJob(RESNET);
      try {
        store.transaction(() => {
          store.appendEvent({ kind: 'note', message: 'inner' });
          try {
            failingRead();
          } catch {
            readFailed = true;
          }
          store.afterCommit(() => {
            innerAnnounced = true;
          });
        });
      } catch (e) {
        innerThrown = e;
      }
      store.appendEvent({ kind: 'note', message: 'outer' });
      store.afterCommit(() => {
        outerAnnounced = true;
      });
    });
    expect(readFailed).toBe(true);
    expect(outerAnnounced).toBe(true);
    expect(store.getJob('job-1')).toBeDefined();
    const innerWritten = notes(store).includes('inner');
    expect(innerAnnounced).toBe(innerWritten);
    expect(innerThrown === undefined).toBe(innerWritten);
    if (outcome === 'commits') expect(notes(store)).toEqual(['inner', 'outer']);
    else {
      expect(notes(store)).toEqual(['outer']);
      expect((innerThrown as Error).message).toMatch(
        new RegExp(
          `transaction failed at \`${escaped(KV_READ)}\` \\(PostgreSQL: relation "kv" does not exist`,
        ),
      );
    }
  });
});
