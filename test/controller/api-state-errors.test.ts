import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, expect, it, vi } from 'vitest';
import { loadCatalogFile, PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import { parseJobSpec } from '../../src/controller/job-spec/parse.js';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import { PostgresStateStore } from '../../src/controller/state/postgres-state-store.js';
import { PostgresConnection } from '../../src/controller/state/postgres/connection.js';
import { describeWithPostgres } from '../helpers/postgres.js';
import { endBackendWhenCommitWaits, holdCommits, waitingCommitUrl } from '../helpers/postgres-commit-wait.js';
import { freePort } from '../helpers/test-ports.js';
import { ADMIN_TOKEN, FakeControllerService } from './api-fake-service.js';

/**
 * What an API client is told when the PostgreSQL state fails a request, over a real socket: a passing condition (a
 * lock or statement timeout, a database it cannot reach) is 503 with a Retry-After, which clients retry; a fault of
 * the store (a read-only server, a constraint its own statement broke) is 500, logged with its SQLSTATE for the
 * operator, as SQLite's faults are; only a conflict the request caused is 409. A connection lost while the request's
 * write commits is a 500 without Retry-After that says the write may have been made, since retrying it blindly could
 * make it twice.
 */

const RESNET = parseJobSpec(
  readFileSync(join(PROJECT_ROOT, 'examples', 'jobs', 'resnet.yaml'), 'utf8'),
  'resnet.yaml',
  loadCatalogFile(),
);

describeWithPostgres('API answers to PostgreSQL state errors', (pg) => {
  const service = new FakeControllerService();
  let server: ApiServer;
  let store: PostgresStateStore;
  let database: string;
  const logged: Record<string, unknown>[] = [];

  beforeAll(async () => {
    const url = pg.server.createDatabase();
    database = new URL(url).pathname.slice(1);
    store = new PostgresStateStore(url, {
      bounds: {
        connectTimeoutSeconds: 2,
        statementTimeoutMs: 1000,
        lockTimeoutMs: 200,
        idleInTransactionTimeoutMs: 10_000,
        tcpUserTimeoutMs: 2000,
      },
    });
    const log = pino(
      { level: 'info' },
      {
        write: (line: string) => logged.push(JSON.parse(line) as Record<string, unknown>),
      },
    );
    server = await startApiServer(service, { listen: '127.0.0.1:0', adminToken: ADMIN_TOKEN, logger: log });
  });
  afterAll(async () => {
    await server.close();
    store.close();
  });
  afterEach(() => {
    vi.restoreAllMocks();
    logged.length = 0;
  });

  /** The error messages of the lines the API logged at error level. */
  const loggedErrors = (): string[] =>
    logged.filter((l) => l['level'] === 50).map((l) => String((l['err'] as { message?: unknown }).message));

  const getJob = async (): Promise<{ status: number; retryAfter: string | null; error: string }> => {
    const response = await fetch(`${server.url}/v1/jobs/job-1`, {
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
    });
    const body = (await response.json()) as { error: string };
    return { status: response.status, retryAfter: response.headers.get('retry-after'), error: body.error };
  };

  it('answers 503 with Retry-After while a lock holds the state past the lock timeout, then the job', async () => {
    // The API's reads go to the PostgreSQL store.
    vi.spyOn(service.store, 'getJob').mockImplementation((id) => store.getJob(id));
    store.submitJob(RESNET);
    pg.server.sql('BEGIN', database);
    pg.server.sql('LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE', database);
    let answer;
    try {
      answer = await getJob();
    } finally {
      pg.server.sql('ROLLBACK', database);
    }
    expect(answer.status).toBe(503);
    expect(answer.retryAfter).toBe('2');
    expect(answer.error).toMatch(
      /^the state database is unavailable or busy \(PostgreSQL: .*lock timeout.*\); try again later$/,
    );
    expect((await getJob()).status).toBe(200);
  });

  it('answers 503 when the database cannot be reached', async () => {
    const port = await freePort();
    vi.spyOn(service.store, 'getJob').mockImplementation(() => {
      new PostgresStateStore(`postgresql://fleetwise@127.0.0.1:${port}/gone`).close();
      return undefined;
    });
    const answer = await getJob();
    expect(answer.status).toBe(503);
    expect(answer.retryAfter).toBe('2');
    expect(answer.error).toMatch(/cannot connect to PostgreSQL/);
  });

  it('answers 500 and logs the cause when a statement of the store breaks a constraint, as SQLite does', async () => {
    const connection = new PostgresConnection(pg.server.url(database), () => 0);
    try {
      vi.spyOn(service.store, 'getJob').mockImplementation(() => {
        connection.query("INSERT INTO counters (name, value) VALUES ('jobs', 0)");
        return undefined;
      });
      const answer = await getJob();
      expect(answer).toEqual({ status: 500, retryAfter: null, error: 'internal error' });
      expect(loggedErrors()).toEqual([
        expect.stringMatching(/duplicate key.*\[SQLSTATE 23505, integrity constraint violation/),
      ]);
    } finally {
      connection.close();
    }
  });

  it('answers 500 and logs "read-only server" when the server takes no writes', async () => {
    const readOnly = new PostgresConnection(
      `${pg.server.url(database)}?options=${encodeURIComponent('-c default_transaction_read_only=on')}`,
      () => 0,
    );
    try {
      vi.spyOn(service.store, 'getJob').mockImplementation(() => {
        readOnly.run("UPDATE counters SET value = value + 1 WHERE name = 'jobs'");
        return undefined;
      });
      const answer = await getJob();
      expect(answer).toEqual({ status: 500, retryAfter: null, error: 'internal error' });
      expect(loggedErrors()).toEqual([
        expect.stringMatching(/read-only transaction \[SQLSTATE 25006, read-only server: /),
      ]);
    } finally {
      readOnly.close();
    }
  });

  it('answers 500 without Retry-After, saying it may have been applied, when the connection is lost in the commit', async () => {
    const url = pg.server.createDatabase();
    const jobsDatabase = new URL(url).pathname.slice(1);
    // Migrated before commits wait, so the constructor's own commits go through.
    const submitting = new PostgresStateStore(waitingCommitUrl(url, 'fleetwise-api-commit'));
    try {
      vi.spyOn(service, 'submit').mockImplementation((spec, team) => submitting.submitJob({ ...spec, team }));
      const held = await holdCommits(pg.server);
      let response: Response;
      try {
        const ender = endBackendWhenCommitWaits(pg.server, 'fleetwise-api-commit');
        await ender.watching;
        response = await fetch(`${server.url}/v1/jobs`, {
          method: 'POST',
          headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/yaml' },
          body: readFileSync(join(PROJECT_ROOT, 'examples', 'jobs', 'resnet.yaml'), 'utf8'),
        });
        await ender.ended;
      } finally {
        await held.release();
      }
      expect(response.status).toBe(500);
      expect(response.headers.get('retry-after')).toBeNull();
      expect(((await response.json()) as { error: string }).error).toBe(
        'the state database connection was lost while committing this request: it may or may not have been ' +
          'applied; check before sending it again (a submission sent with an Idempotency-Key is safe to send ' +
          'again with the same key)',
      );
      expect(loggedErrors()).toEqual([
        expect.stringMatching(/^the state database connection was lost while committing/),
      ]);
      // It was applied: a retry would have made a second job.
      expect(pg.server.sql('SELECT id FROM jobs', jobsDatabase)).toEqual([{ id: 'job-1' }]);
    } finally {
      submitting.close();
    }
  });

  it('keeps 409, unlogged, for a conflict with the state the request caused', async () => {
    vi.spyOn(service.store, 'getJob').mockImplementation(() => {
      const job = store.submitJob(RESNET);
      store.setJobState(job.id, 'cancelled');
      return store.setJobState(job.id, 'running');
    });
    const answer = await getJob();
    expect(answer.status).toBe(409);
    expect(answer.retryAfter).toBeNull();
    expect(answer.error).toMatch(/cannot go from cancelled to running/);
    expect(loggedErrors()).toEqual([]);
  });
});
