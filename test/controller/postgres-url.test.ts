import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, expect, it } from 'vitest';
import { loadControllerConfig } from '../../src/controller/config-loading.js';
import { PostgresStateStore } from '../../src/controller/state/postgres-state-store.js';
import { PostgresError } from '../../src/controller/state/postgres/connection.js';
import { boundedConninfo, isPostgresUrl, redactUrl } from '../../src/controller/state/postgres/conninfo.js';
import { ValidationError } from '../../src/core/validation.js';
import { describeWithPostgres } from '../helpers/postgres.js';
import { UNREACHABLE_PORT } from '../helpers/unreachable-url.js';

/**
 * The state URL as libpq reads it: a list of hosts tried in turn (libpq's failover form), the secrets it may carry
 * masked wherever it is shown, and the store's errors naming it.
 */

const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-pg-url-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const base = { provider: 'local', region: 'us-east-1', stateDir: join(scratch, 'state') } as const;

it('masks a password given as a parameter, and every other libpq secret, as well as user:password@', () => {
  expect(redactUrl('postgresql://ops@db:5432/fleet?password=s3cret')).toBe(
    'postgresql://ops@db:5432/fleet?password=***',
  );
  expect(
    redactUrl(
      'postgres://ops:pw1@db/fleet?sslmode=verify-full&sslpassword=keypass&sslkey=%2Fk.pem&oauth_client_secret=x',
    ),
  ).toBe(
    'postgres://ops:***@db/fleet?sslmode=verify-full&sslpassword=***&sslkey=%2Fk.pem&oauth_client_secret=***',
  );
  // A name written percent-encoded is the same parameter to libpq.
  expect(redactUrl('postgresql:///fleet?host=db&pass%77ord=s3cret')).toBe(
    'postgresql:///fleet?host=db&pass%77ord=***',
  );
  expect(redactUrl('postgresql://ops:pw@h1:5432,h2:5433/fleet?password=s3cret')).toBe(
    'postgresql://ops:***@h1:5432,h2:5433/fleet?password=***',
  );
  // Not a URL at all (a libpq key=value string given by mistake): its secrets are masked all the same.
  expect(redactUrl("host=db password='s 3' dbname=fleet")).toBe('host=db password=*** dbname=fleet');
  // Refusals quote the URL masked.
  expect(() => boundedConninfo('mysql://db/fleet?password=s3cret')).toThrow(
    'mysql://db/fleet?password=***: expected a postgres:// or postgresql:// URL',
  );
});

it("accepts libpq's list of hosts, and passes it to libpq as written", () => {
  const url = 'postgresql://ops@db-a:5432,db-b:5433,[2001:db8::7]:5434/fleet?target_session_attrs=read-write';
  expect(isPostgresUrl(url)).toBe(true);
  expect(boundedConninfo(url).startsWith(`${url}&connect_timeout=`)).toBe(true);
  expect(loadControllerConfig({ flags: { ...base, state: url } }).state).toBe(url);
  // The host list in parameters, libpq's other form, stays accepted.
  expect(isPostgresUrl('postgresql:///fleet?user=ops&host=db-a,db-b&port=5432,5433')).toBe(true);
});

it('refuses a host list libpq cannot read, saying which host is wrong', () => {
  expect(() => boundedConninfo('postgresql://ops@db-a:5432,db-b:54x2/fleet')).toThrow(
    'postgresql://ops@db-a:5432,db-b:54x2/fleet: port "54x2" of host "db-b" is not a port number (1-65535)',
  );
  expect(() => boundedConninfo('postgresql://ops@[::1/fleet')).toThrow(
    '"[::1/fleet" is not host:port or [IPv6 address]:port',
  );
  expect(isPostgresUrl('postgresql://ops@db-a:0/fleet')).toBe(false);
  let problems: readonly string[] = [];
  try {
    loadControllerConfig({ flags: { ...base, state: 'postgresql://db-a:5432,db b/fleet' } });
  } catch (e) {
    if (e instanceof ValidationError) problems = e.problems;
  }
  expect(problems).toEqual([
    '--state: a postgres://user@host:port/database URL (left out: SQLite in the state directory)',
  ]);
});

it('names the server without the password parameter when it cannot connect', () => {
  const at = `postgresql://ops@127.0.0.1:${UNREACHABLE_PORT}/fleet`;
  let message = '';
  try {
    new PostgresStateStore(`${at}?password=s3cret`).close();
  } catch (e) {
    message = (e as Error).message;
  }
  expect(message.startsWith(`cannot connect to PostgreSQL at ${at}?password=***: `), message).toBe(true);
  expect(message).not.toContain('s3cret');
});

describeWithPostgres('the state URL against a real PostgreSQL', (pg) => {
  const opened: PostgresStateStore[] = [];
  afterEach(() => {
    for (const s of opened.splice(0)) s.close();
  });

  it('connects through a host list whose first host refuses, to the next', () => {
    const database = new URL(pg.server.createDatabase()).pathname.slice(1);
    const url =
      `postgresql://fleetwise@127.0.0.1:${UNREACHABLE_PORT},127.0.0.1:${pg.server.port}/${database}` +
      '?target_session_attrs=read-write&password=s3cret';
    const store = new PostgresStateStore(url);
    opened.push(store);
    store.setValue('reached', 'through the second host');
    expect(pg.server.sql("SELECT value_json FROM kv WHERE key = 'reached'", database)).toEqual([
      { value_json: '"through the second host"' },
    ]);
    expect(store.where).toBe(
      `postgresql://fleetwise@127.0.0.1:${UNREACHABLE_PORT},127.0.0.1:${pg.server.port}/${database}` +
        '?target_session_attrs=read-write&password=***',
    );
  });

  it("names the store in a migration's errors, with the search_path when no schema it names exists", () => {
    const url = `${pg.server.url()}?options=${encodeURIComponent('-c search_path=no_such_schema')}`;
    expect(() => new PostgresStateStore(url)).toThrow(
      `${url}: PostgreSQL: no schema has been selected to create in`,
    );
    expect(() => new PostgresStateStore(url)).toThrow(/\(search_path no_such_schema in database postgres\)$/);

    // A role that may not create tables in the database's schema: the error is still PostgreSQL's, with its code.
    pg.server.sql(
      'DO $$ BEGIN CREATE ROLE fleetwise_limited LOGIN; EXCEPTION WHEN duplicate_object THEN END $$',
    );
    const database = new URL(pg.server.createDatabase()).pathname.slice(1);
    pg.server.sql('REVOKE CREATE ON SCHEMA public FROM PUBLIC', database);
    const limited = `postgresql://fleetwise_limited:pw@127.0.0.1:${pg.server.port}/${database}`;
    let error: unknown;
    try {
      opened.push(new PostgresStateStore(limited));
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(PostgresError);
    expect((error as PostgresError).sqlState).toBe('42501');
    const where = `postgresql://fleetwise_limited:***@127.0.0.1:${pg.server.port}/${database}`;
    expect((error as PostgresError).message).toContain(
      `${where}: PostgreSQL: permission denied for schema public`,
    );
    expect((error as PostgresError).message.startsWith(where)).toBe(true);
  });
});
