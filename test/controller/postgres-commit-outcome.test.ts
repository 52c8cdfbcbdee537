import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { loadCatalogFile, PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import { parseJobSpec } from '../../src/controller/job-spec/parse.js';
import { PostgresStateStore } from '../../src/controller/state/postgres-state-store.js';
import {
  CommitOutcomeUnknownError,
  PostgresConnection,
  PostgresError,
} from '../../src/controller/state/postgres/connection.js';
import { describeWithPostgres, type PostgresServer } from '../helpers/postgres.js';
import { endBackendWhenCommitWaits, holdCommits, waitingCommitUrl } from '../helpers/postgres-commit-wait.js';

/**
 * A PostgreSQL connection lost while a COMMIT is in flight leaves the transaction's outcome unknown: PostgreSQL may
 * have committed it before the loss. The store says so (CommitOutcomeUnknownError, not transient, so nothing retries
 * a write that may be made already) and reconnects for the next call; a COMMIT PostgreSQL answered with a refusal, or
 * a lost COMMIT of a transaction that only read, keeps its usual error.
 */

const RESNET = parseJobSpec(
  readFileSync(join(PROJECT_ROOT, 'examples', 'jobs', 'resnet.yaml'), 'utf8'),
  'resnet.yaml',
  loadCatalogFile(),
);

describeWithPostgres('a PostgreSQL COMMIT whose connection is lost', (pg) => {
  const opened: { close(): void }[] = [];
  afterEach(() => {
    for (const o of opened.splice(0)) o.close();
  });

  it('throws CommitOutcomeUnknownError although the job was committed, and reconnects for the next call', async () => {
    const url = pg.server.createDatabase();
    const database = new URL(url).pathname.slice(1);
    // Migrated before commits wait, so the constructor's own commits go through.
    const store = new PostgresStateStore(waitingCommitUrl(url, 'fleetwise-commit-victim'));
    opened.push(store);
    const held = await holdCommits(pg.server);
    let thrown: unknown;
    try {
      const ender = endBackendWhenCommitWaits(pg.server, 'fleetwise-commit-victim');
      await ender.watching;
      try {
        store.submitJob(RESNET);
      } catch (e) {
        thrown = e;
      }
      await ender.ended;
    } finally {
      await held.release();
    }
    // Not transient: a retry would submit the job a second time.
    expect(thrown).toBeInstanceOf(PostgresError);
    expect((thrown as PostgresError).transient).toBe(false);
    expect(thrown).toBeInstanceOf(CommitOutcomeUnknownError);
    const error = thrown as CommitOutcomeUnknownError;
    expect(error.message).toMatch(
      /^the state database connection was lost while committing: the change may or may not have been saved \(PostgreSQL: server closed the connection/,
    );
    // It was saved: another connection sees it, and so does the store, on a new connection.
    expect(pg.server.sql('SELECT id FROM jobs', database)).toEqual([{ id: 'job-1' }]);
    expect(store.listJobs().map((j) => j.id)).toEqual(['job-1']);
  });

  /** A connection, its backend's pid, and a way to end that backend while the connection is idle in a transaction. */
  const connectionToEnd = (server: PostgresServer): { connection: PostgresConnection; end: () => void } => {
    const connection = new PostgresConnection(server.createDatabase(), () => 0);
    opened.push(connection);
    connection.query('CREATE TABLE notes (text TEXT)');
    const pid = Number(connection.query('SELECT pg_backend_pid() AS pid')[0]?.['pid']);
    return {
      connection,
      end: () => {
        server.sql(`SELECT pg_terminate_backend(${pid})`);
        // Until the backend is gone, so the COMMIT meets a closed connection.
        while (server.sql(`SELECT 1 FROM pg_stat_activity WHERE pid = ${pid}`).length > 0);
      },
    };
  };

  it('says the outcome is unknown for a write transaction whose backend went before its COMMIT', () => {
    const { connection, end } = connectionToEnd(pg.server);
    let thrown: unknown;
    try {
      connection.transaction(() => {
        connection.run('INSERT INTO notes (text) VALUES (?)', 'written');
        end();
      });
    } catch (e) {
      thrown = e;
    }
    expect((thrown as PostgresError).transient).toBe(false);
    expect(thrown).toBeInstanceOf(CommitOutcomeUnknownError);
    // Replaced: the next transaction runs, on a new connection.
    expect(connection.transaction(() => connection.all('SELECT text FROM notes'))).toEqual([]);
  });

  it('keeps a transient error for a transaction that only read', () => {
    const { connection, end } = connectionToEnd(pg.server);
    let thrown: unknown;
    try {
      connection.transaction(() => {
        connection.all('SELECT text FROM notes');
        end();
      });
    } catch (e) {
      thrown = e;
    }
    expect(thrown).toBeInstanceOf(PostgresError);
    expect(thrown).not.toBeInstanceOf(CommitOutcomeUnknownError);
    expect((thrown as PostgresError).transient).toBe(true);
  });

  it('keeps PostgreSQL’s refusal of a COMMIT, which rolled the transaction back', () => {
    const { connection } = connectionToEnd(pg.server);
    connection.query('CREATE TABLE once (n INTEGER UNIQUE DEFERRABLE INITIALLY DEFERRED)');
    let thrown: unknown;
    try {
      connection.transaction(() => {
        connection.run('INSERT INTO once (n) VALUES (1)');
        connection.run('INSERT INTO once (n) VALUES (1)');
      });
    } catch (e) {
      thrown = e;
    }
    expect(thrown).toBeInstanceOf(PostgresError);
    expect(thrown).not.toBeInstanceOf(CommitOutcomeUnknownError);
    expect((thrown as PostgresError).sqlState).toBe('23505');
    expect(connection.all('SELECT n FROM once')).toEqual([]);
  });
});
