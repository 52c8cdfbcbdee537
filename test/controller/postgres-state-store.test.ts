import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, afterEach, expect, it } from 'vitest';
import { loadCatalogFile, PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import { parseJobSpec } from '../../src/controller/job-spec/parse.js';
import { PostgresStateStore } from '../../src/controller/state/postgres-state-store.js';
import {
  boundedConninfo,
  isPostgresUrl,
  redactUrl,
  type ConnectionBounds,
} from '../../src/controller/state/postgres/conninfo.js';
import { PostgresConnection, PostgresError } from '../../src/controller/state/postgres/connection.js';
import { MIGRATION_LOCK } from '../../src/controller/state/postgres/migrate.js';
import { LATEST_POSTGRES_SCHEMA_VERSION, POSTGRES_ONLY } from '../../src/controller/state/postgres/schema.js';
import { SqliteStateStore } from '../../src/controller/state/sqlite-state-store.js';
import type { Param } from '../../src/controller/state/sql/connection.js';
import { SchemaVersionError, StateStoreFaultError } from '../../src/controller/state-store.js';
import { freePort } from '../helpers/test-ports.js';
import { describeWithPostgres, findPostgresBin } from '../helpers/postgres.js';

/**
 * What the PostgreSQL store does beyond the StateStore contract (state-store.test.ts runs that against it): its schema
 * stays the SQLite schema's twin, a database is shared and reopened, foreign or newer schemas are refused, every wait
 * is bounded, and a connection the server dropped is replaced.
 */

const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-pg-store-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** Short bounds for tests that wait on them. */
const TIGHT: ConnectionBounds = {
  connectTimeoutSeconds: 2,
  statementTimeoutMs: 1000,
  lockTimeoutMs: 500,
  idleInTransactionTimeoutMs: 10_000,
  tcpUserTimeoutMs: 2000,
};

const RESNET = parseJobSpec(
  readFileSync(join(PROJECT_ROOT, 'examples', 'jobs', 'resnet.yaml'), 'utf8'),
  'resnet.yaml',
  loadCatalogFile(),
);

it('connects with bounded waits, keeping what the URL says, and never shows a password', () => {
  const url = new URL(boundedConninfo('postgresql://ops:s3cret@db.internal:5433/fleet?connect_timeout=9'));
  expect(url.searchParams.get('connect_timeout')).toBe('9');
  expect(url.searchParams.get('tcp_user_timeout')).toBe('4000');
  expect(url.searchParams.get('keepalives')).toBe('1');
  expect(url.searchParams.get('options')).toBe(
    '-c statement_timeout=4000 -c lock_timeout=2000 -c idle_in_transaction_session_timeout=2500',
  );
  // libpq reads %20 as a space, not URLSearchParams' `+`.
  expect(url.search).toContain('options=-c%20statement_timeout%3D4000%20-c%20lock_timeout');
  const kept = new URL(
    boundedConninfo('postgres://db/fleet?options=-c%20statement_timeout%3D500%20-c%20lock_timeout%3D0'),
  );
  expect(kept.searchParams.get('options')).toBe(
    '-c statement_timeout=500 -c lock_timeout=0 -c idle_in_transaction_session_timeout=2500',
  );
  expect(redactUrl('postgresql://ops:s3cret@db.internal:5433/fleet')).toBe(
    'postgresql://ops:***@db.internal:5433/fleet',
  );
  expect(isPostgresUrl('postgres://db/fleet')).toBe(true);
  expect(isPostgresUrl('mysql://db/fleet')).toBe(false);
  expect(isPostgresUrl('state.db')).toBe(false);
  expect(() => boundedConninfo('mysql://ops:s3cret@db/fleet')).toThrow(
    'mysql://ops:***@db/fleet: expected a postgres:// or postgresql:// URL',
  );
});

it('fails to connect within its connect timeout, naming the server without the password', async () => {
  const port = await freePort();
  const started = Date.now();
  expect(() => new PostgresStateStore(`postgresql://ops:s3cret@127.0.0.1:${port}/fleet`)).toThrow(
    new RegExp(
      `cannot connect to PostgreSQL at postgresql://ops:\\*\\*\\*@127\\.0\\.0\\.1:${port}/fleet: .*refused`,
    ),
  );
  expect(Date.now() - started).toBeLessThan(5000);
});

describeWithPostgres('PostgresStateStore on a real server', (pg) => {
  const opened: PostgresStateStore[] = [];
  const open = (url: string): PostgresStateStore => {
    const store = new PostgresStateStore(url);
    opened.push(store);
    return store;
  };
  afterEach(() => {
    for (const s of opened.splice(0)) s.close();
  });

  it('has the SQLite schema’s tables and columns, plus only its documented own', () => {
    // SqliteStateStore migrates the file it opens; read the result back with a plain handle.
    const path = join(scratch, 'schema.db');
    new SqliteStateStore(path).close();
    const db = new Database(path, { readonly: true });
    const sqliteColumns = new Map<string, string[]>();
    for (const table of db
      .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
      .pluck()
      .all() as string[])
      sqliteColumns.set(
        table,
        (db.prepare('SELECT name FROM pragma_table_info(?)').pluck().all(table) as string[]).sort(),
      );
    db.close();

    const url = pg.server.createDatabase();
    open(url);
    const database = new URL(url).pathname.slice(1);
    const pgColumns = new Map<string, string[]>();
    for (const row of pg.server.sql(
      "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = 'public' ORDER BY 1, 2",
      database,
    )) {
      const table = String(row['table_name']);
      pgColumns.set(table, [...(pgColumns.get(table) ?? []), String(row['column_name'])]);
    }
    const own: Record<string, readonly string[]> = POSTGRES_ONLY.columns;
    const comparable = new Map(
      [...pgColumns]
        .filter(([table]) => !(POSTGRES_ONLY.tables as readonly string[]).includes(table))
        .map(([table, columns]) => [table, columns.filter((c) => !(own[table] ?? []).includes(c)).sort()]),
    );
    expect(Object.fromEntries(comparable)).toEqual(Object.fromEntries(sqliteColumns));
  });

  it('is shared by the stores on one database and reopened with its data, numbering and id', () => {
    const url = pg.server.createSchema();
    const a = open(url);
    const b = open(url);
    expect(a.schemaVersion).toBe(LATEST_POSTGRES_SCHEMA_VERSION);
    expect(b.storeId).toBe(a.storeId);
    const job = a.submitJob(RESNET);
    expect(b.getJob(job.id)?.spec).toEqual(RESNET);
    expect(b.submitJob(RESNET).id).toBe('job-2');
    a.close();
    const again = open(url);
    expect(again.storeId).toBe(b.storeId);
    expect(again.listJobs().map((j) => j.id)).toEqual(['job-1', 'job-2']);
    expect(again.listEvents().map((e) => e.seq)).toEqual([1, 2]);
    expect(again.createInstance({ typeName: 'c7i.large' }).launchToken).toMatch(
      new RegExp(`^${a.storeId}-inst-1-\\d+$`),
    );
  });

  it('refuses a schema that holds other tables, and one written by a newer fleetwise', () => {
    const foreign = pg.server.createDatabase();
    pg.server.sql('CREATE TABLE customers (id int)', new URL(foreign).pathname.slice(1));
    expect(() => open(foreign)).toThrow(
      /is not a fleetwise state database \(its schema has tables customers\)/,
    );

    const newer = pg.server.createDatabase();
    open(newer).close();
    pg.server.sql(
      `INSERT INTO schema_migrations (version, description, applied_at) VALUES (${LATEST_POSTGRES_SCHEMA_VERSION + 1}, 'future', 0)`,
      new URL(newer).pathname.slice(1),
    );
    expect(() => open(newer)).toThrow(SchemaVersionError);
    expect(() => open(newer)).toThrow(
      `database schema version ${LATEST_POSTGRES_SCHEMA_VERSION + 1} is newer than this fleetwise supports`,
    );
  });

  it('replaces a connection the server dropped, before the next read or transaction', () => {
    const url = pg.server.createDatabase();
    const store = open(url);
    store.submitJob(RESNET);
    const database = new URL(url).pathname.slice(1);
    const killed = pg.server.sql(
      `SELECT pg_terminate_backend(pid) AS gone FROM pg_stat_activity WHERE datname = '${database}' AND application_name = 'fleetwise'`,
    );
    expect(killed.map((r) => r['gone'])).toEqual([true]);
    expect(store.getJob('job-1')?.state).toBe('queued');
    pg.server.sql(
      `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '${database}' AND application_name = 'fleetwise'`,
    );
    expect(store.setJobState('job-1', 'starting').state).toBe('starting');
  });

  it('refuses an undefined or non-finite parameter by name, rather than storing its text', () => {
    const connection = new PostgresConnection(pg.server.createSchema(), () => 0);
    try {
      connection.query('CREATE TABLE notes (body TEXT, n DOUBLE PRECISION)');
      // The type rules these out; a caller's value at run time need not follow it.
      const insert = (body: unknown, n: unknown): number =>
        connection.run('INSERT INTO notes (body, n) VALUES (?, ?)', body as Param, n as Param);
      expect(() => insert(undefined, 1)).toThrow(StateStoreFaultError);
      // Quoting the statement as its caller wrote it, as the SQLite store does.
      expect(() => insert(undefined, 1)).toThrow(
        /cannot store undefined as notes\.body \(parameter 1 of `INSERT INTO notes \(body, n\) VALUES \(\?, \?\)`\)/,
      );
      for (const n of [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY])
        expect(() => insert('x', n)).toThrow(`cannot store ${String(n)} as notes.n (parameter 2 of`);
      // The store's own `$n` statements (schema, lease) name theirs too.
      expect(() =>
        connection.query('UPDATE notes SET body = $2 WHERE n = $1', [Number.NaN as Param, 'y']),
      ).toThrow('cannot store NaN as notes.n (parameter 1 of `UPDATE notes SET body = $2 WHERE n = $1`)');
      expect(insert('kept', 1.5)).toBe(1);
      expect(connection.all('SELECT body FROM notes')).toEqual([{ body: 'kept' }]);
    } finally {
      connection.close();
    }
  });

  it('migrates past its statement and lock timeouts: waiting for another controller’s migrations is not a stuck query', async () => {
    const url = pg.server.createDatabase();
    const database = new URL(url).pathname.slice(1);
    // Another controller migrating the same database: it holds the migration lock for 1.5 s, in another process
    // (opening a store blocks this one).
    const holder = spawn(join(findPostgresBin() ?? '', 'psql'), [
      url,
      '-c',
      `BEGIN; SELECT pg_advisory_xact_lock(${MIGRATION_LOCK}); SELECT pg_sleep(1.5); COMMIT;`,
    ]);
    const held = new Promise<number | null>((resolve) => holder.on('close', resolve));
    const lockHeld = (): boolean =>
      pg.server.sql(
        `SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND granted`,
        database,
      )[0]?.['n'] === '1';
    for (let i = 0; i < 100 && !lockHeld(); i += 1) await new Promise((r) => setTimeout(r, 20));
    expect(lockHeld()).toBe(true);
    const started = Date.now();
    // Lock waits are bounded too, and the advisory lock is one.
    const store = new PostgresStateStore(url, {
      bounds: { ...TIGHT, statementTimeoutMs: 200, lockTimeoutMs: 100 },
    });
    opened.push(store);
    expect(Date.now() - started).toBeGreaterThan(500);
    expect(store.schemaVersion).toBe(LATEST_POSTGRES_SCHEMA_VERSION);
    expect(await held).toBe(0);
    expect(store.submitJob(RESNET).id).toBe('job-1');
  });

  it('bounds a write stuck behind a lock by its lock timeout, and rolls it back', () => {
    const url = pg.server.createDatabase();
    // The statement timeout far past the lock timeout: which of the two ended the wait shows, however busy the host.
    const bounds = { ...TIGHT, statementTimeoutMs: 10_000, lockTimeoutMs: 200 };
    const store = new PostgresStateStore(url, { bounds });
    opened.push(store);
    store.submitJob(RESNET);
    const database = new URL(url).pathname.slice(1);
    pg.server.sql('BEGIN', database);
    pg.server.sql("SELECT * FROM jobs WHERE id = 'job-1' FOR UPDATE", database);
    const started = performance.now();
    try {
      let error: unknown;
      try {
        store.setJobState('job-1', 'starting');
      } catch (e) {
        error = e;
      }
      const waitedMs = performance.now() - started;
      // It waited for the lock, and gave up at its lock timeout, long before the statement timeout.
      expect(waitedMs).toBeGreaterThanOrEqual(bounds.lockTimeoutMs);
      expect(waitedMs).toBeLessThan(bounds.statementTimeoutMs);
      expect(error).toBeInstanceOf(PostgresError);
      expect((error as PostgresError).sqlState).toBe('55P03');
      expect((error as PostgresError).message).toMatch(/lock timeout/);
      expect((error as PostgresError).transient).toBe(true);
    } finally {
      pg.server.sql('ROLLBACK', database);
    }
    expect(store.getJob('job-1')?.state).toBe('queued');
    expect(store.listEvents().map((e) => e.kind)).toEqual(['job.submitted']);
    expect(store.setJobState('job-1', 'starting').state).toBe('starting');
  });

  it('ends a session left idle inside a write transaction (a frozen controller), freeing the counters row for the others', async () => {
    const url = pg.server.createDatabase();
    const store = new PostgresStateStore(url, { bounds: { ...TIGHT, lockTimeoutMs: 300 } });
    opened.push(store);
    // A controller paused (SIGSTOP, a VM pause) half-way through a submission: it numbered a job and went quiet.
    const frozen = new PostgresConnection(url, () => 0, { ...TIGHT, idleInTransactionTimeoutMs: 300 });
    try {
      const pid = String(frozen.query('SELECT pg_backend_pid() AS pid')[0]?.['pid']);
      frozen.query('BEGIN');
      frozen.query("UPDATE counters SET value = value + 1 WHERE name = 'jobs'");
      const idleAt = Date.now();
      const alive = (): boolean =>
        pg.server.sql(`SELECT count(*) AS n FROM pg_stat_activity WHERE pid = ${pid}`)[0]?.['n'] === '1';
      while (alive() && Date.now() - idleAt < 3000) await new Promise((r) => setTimeout(r, 20));
      expect(alive()).toBe(false);
      expect(Date.now() - idleAt).toBeLessThan(300 + 1000);
      // The lock went with the session: the next submission numbers its job at once.
      expect(store.submitJob(RESNET).id).toBe('job-1');
      // The frozen controller, resumed, finds its transaction gone, not committed.
      let error: unknown;
      try {
        frozen.query('COMMIT');
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(PostgresError);
      expect((error as PostgresError).transient).toBe(true);
      expect(store.getJob('job-2')).toBeUndefined();
    } finally {
      frozen.close();
    }
  });
});
