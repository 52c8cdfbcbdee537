import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { loadCatalogFile } from '../../src/cloud/catalog-file.js';
import { SCHEDULER_STATE_KEY } from '../../src/controller/scheduler-state.js';
import type { JsonValue } from '../../src/controller/state-store.js';
import { PostgresStateStore } from '../../src/controller/state/postgres-state-store.js';
import { LATEST_POSTGRES_SCHEMA_VERSION } from '../../src/controller/state/postgres/schema.js';
import { ColocationTable, type SerializedColocationTable } from '../../src/scheduler/colocation-table.js';
import { EvaScheduler } from '../../src/scheduler/eva.js';
import { readPostgresStateHistory } from '../../src/sim/controller-runtime/read-state-history.js';
import type { FleetwiseTraceDocument } from '../../src/sim/traces/fleetwise-json.js';
import { ensureBuiltCli, runCli } from '../helpers/built-cli.js';
import { exportedJobsOf, writeJobHistory, type JobHistory } from '../helpers/job-history.js';
import { describeWithPostgres } from '../helpers/postgres.js';
import { freePort } from '../helpers/test-ports.js';

/**
 * `fleetwise export-trace --state postgres://…` (the built CLI in a subprocess, a real PostgreSQL server): what ran on
 * a controller that keeps its state in PostgreSQL, read without changing the database a live controller runs on.
 */

const tmp = mkdtempSync(join(tmpdir(), 'fleetwise-export-pg-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/**
 * A TCP proxy to the PostgreSQL server that holds back the server's answer to the first query containing `marker` for
 * `stallMs`: meanwhile the server, having answered, waits on the client inside its transaction, as it does while a
 * reader maps a large result. The proxy runs in this process while the CLI runs in its own (pg-native blocks).
 */
async function startStallingProxy(
  targetPort: number,
  marker: string,
  stallMs: number,
): Promise<{ readonly port: number; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = connect(targetPort, '127.0.0.1');
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('error', () => undefined);
      s.once('close', () => {
        sockets.delete(s);
        client.destroy();
        upstream.destroy();
      });
    }
    let stallNext = false;
    let stalled = false;
    // Chunks from the server leave in order, behind the stall once it starts.
    let gate = Promise.resolve();
    client.on('data', (chunk: Buffer) => {
      if (!stalled && chunk.includes(marker)) stallNext = stalled = true;
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (stallNext) {
        stallNext = false;
        gate = gate.then(() => new Promise((resolve) => setTimeout(resolve, stallMs)));
      }
      gate = gate.then(() => void client.write(chunk));
    });
    upstream.on('end', () => void gate.then(() => client.end()));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('stalling proxy: no port');
  return {
    port: address.port,
    close: () =>
      new Promise((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

/** The schema a `createSchema` URL puts first on its search_path. */
const schemaOf = (url: string): string =>
  (new URL(url).searchParams.get('options') ?? '').replace('-c search_path=', '');

describeWithPostgres('fleetwise export-trace from a PostgreSQL state (CLI subprocess)', (pg) => {
  let url = '';
  let history: JobHistory;
  let learned: SerializedColocationTable;

  beforeAll(() => {
    ensureBuiltCli(['cli/main.ts']);
    url = pg.server.createSchema();
    let now = 0;
    const store = new PostgresStateStore(url, { nowSeconds: () => now });
    history = writeJobHistory(store, { set: (t) => void (now = t) });
    const table = new ColocationTable(0.9);
    table.record('resnet', ['gpt2'], 0.8);
    learned = table.toJSON();
    // Saved as the controller saves it after a round: Eva's whole learned state, the table in it.
    const saved = new EvaScheduler(loadCatalogFile(), { learnedColocation: learned }).exportState();
    store.setValue(SCHEDULER_STATE_KEY, saved as unknown as JsonValue);
    store.close();
  });

  it('reads the records the store reads, in one read-only transaction', () => {
    const store = new PostgresStateStore(url);
    const jobs = store.listJobs();
    const events = store.listEvents({ kind: 'job.state' });
    store.close();
    const read = readPostgresStateHistory(url, { schedulerState: true });
    expect(read.jobs).toEqual(jobs);
    expect(read.jobStateEvents).toEqual(events);
    expect((read.schedulerState as { table?: unknown }).table).toEqual(learned);
    expect(readPostgresStateHistory(url).schedulerState).toBeUndefined();
  });

  it('exports the jobs and the learned table as from a SQLite state', async () => {
    const file = join(tmp, 'history.json');
    const tableFile = join(tmp, 'table.json');
    // The controller's own flags, as the operator passes them: --state wins over the state directory.
    const out = await runCli([
      'export-trace',
      '--state-dir',
      join(tmp, 'no-such-dir'),
      '--state',
      url,
      '--out',
      file,
      '--colocation-table',
      tableFile,
    ]);
    expect(out.code, out.stderr).toBe(0);
    expect(out.stderr).toMatch(/exported 3 job\(s\) \(2 measured, 1 declared\) to /);
    for (const id of history.skipped) expect(out.stderr).toContain(`${id}: `);
    const document = JSON.parse(readFileSync(file, 'utf8')) as FleetwiseTraceDocument;
    expect(exportedJobsOf(document)).toEqual(history.exported);
    expect(document.source).toBe(url);
    expect(JSON.parse(readFileSync(tableFile, 'utf8'))).toEqual(learned);
  }, 60_000);

  it('reads on while its transaction waits longer than a controller may idle in one', async () => {
    // 3 s between the jobs query and the next one, past the controller's 2.5 s idle-in-transaction bound: a large
    // state's rows take that long to map, and an export holds no lease that such a bound protects.
    const proxy = await startStallingProxy(pg.server.port, 'FROM jobs ORDER BY seq', 3000);
    try {
      const viaProxy = new URL(url);
      viaProxy.port = String(proxy.port);
      const out = await runCli(['export-trace', '--state', viaProxy.toString()]);
      expect(out.code, out.stderr).toBe(0);
      expect(exportedJobsOf(JSON.parse(out.stdout) as FleetwiseTraceDocument)).toEqual(history.exported);
    } finally {
      await proxy.close();
    }
  }, 60_000);

  it('leaves an older schema as it was: no migration, no write', async () => {
    // A schema a controller of the previous release runs on: its last migration not applied.
    const older = pg.server.createSchema();
    let now = 0;
    const store = new PostgresStateStore(older, { nowSeconds: () => now });
    writeJobHistory(store, { set: (t) => void (now = t) });
    store.close();
    const schema = schemaOf(older);
    pg.server.sql(`DROP INDEX ${schema}.events_by_kind; DROP INDEX ${schema}.tasks_by_state`);
    pg.server.sql(
      `DELETE FROM ${schema}.schema_migrations WHERE version = ${LATEST_POSTGRES_SCHEMA_VERSION}`,
    );
    const snapshot = (): unknown => [
      pg.server.sql(`SELECT version FROM ${schema}.schema_migrations ORDER BY version`),
      pg.server.sql(`SELECT indexname FROM pg_indexes WHERE schemaname = '${schema}' ORDER BY indexname`),
      pg.server.sql(`SELECT name, value FROM ${schema}.counters ORDER BY name`),
    ];
    const before = snapshot();
    const out = await runCli(['export-trace', '--state', older]);
    expect(out.code, out.stderr).toBe(0);
    expect(exportedJobsOf(JSON.parse(out.stdout) as FleetwiseTraceDocument)).toEqual(history.exported);
    expect(snapshot()).toEqual(before);
  }, 60_000);

  it('refuses a bad URL, an unreachable server, a foreign or a newer schema, naming what is wrong', async () => {
    const refused = async (args: string[], message: RegExp): Promise<void> => {
      const out = await runCli(['export-trace', ...args]);
      expect(out.code, out.stderr).toBe(2);
      expect(out.stderr).toMatch(message);
    };
    await refused(['--state', join(tmp, 'state.db')], /--state: a postgres:\/\/user@host:port\/database URL/);

    const port = await freePort();
    await refused(
      ['--state', `postgresql://ops:s3cret@127.0.0.1:${port}/fleet`],
      new RegExp(
        `--state[\\s\\S]*cannot connect to PostgreSQL at postgresql://ops:\\*\\*\\*@127\\.0\\.0\\.1:${port}/fleet`,
      ),
    );
    const foreign = pg.server.createSchema();
    pg.server.sql(`CREATE TABLE ${schemaOf(foreign)}.jobs (id TEXT)`);
    await refused(
      ['--state', foreign],
      /not a fleetwise state database: no schema_migrations, events tables \(it has jobs\)/,
    );

    const newer = pg.server.createSchema();
    new PostgresStateStore(newer).close();
    pg.server.sql(
      `INSERT INTO ${schemaOf(newer)}.schema_migrations (version, description, applied_at) VALUES (99, 'later', 0)`,
    );
    await refused(['--state', newer], /schema version 99 is newer than this fleetwise reads/);
    expect(existsSync(join(tmp, 'state.db'))).toBe(false);
  }, 60_000);
});
