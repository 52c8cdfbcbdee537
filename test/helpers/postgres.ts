/**
 * A real PostgreSQL server for tests: Debian's (the `postgresql` package; `npm test` installs it), a throwaway
 * cluster made with initdb in a temporary directory and started with pg_ctl on a free port, trusting local
 * connections. As root (CI) the server runs as the `postgres` user, since PostgreSQL refuses to run as root. One
 * server per test file: started in beforeAll, stopped (and its directory removed) in afterAll. Without PostgreSQL
 * the tests fail, never skip.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, it } from 'vitest';
import {
  endNativeClient,
  newNativeClient,
  type NativeClient,
} from '../../src/controller/state/postgres/native-client.js';
import { freePort } from './test-ports.js';

const SUPERUSER = 'fleetwise';

/** The newest Debian PostgreSQL server binaries (PG_BIN overrides), or undefined when none is installed. */
export function findPostgresBin(env: NodeJS.ProcessEnv = process.env): string | undefined {
  const explicit = env.PG_BIN;
  if (explicit !== undefined && explicit !== '') return explicit;
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return undefined;
  const versions = readdirSync(root)
    .filter((v) => existsSync(join(root, v, 'bin', 'pg_ctl')) && existsSync(join(root, v, 'bin', 'initdb')))
    .sort((a, b) => Number(b) - Number(a));
  return versions[0] === undefined ? undefined : join(root, versions[0], 'bin');
}

export interface PostgresServer {
  readonly port: number;
  /** `postgresql://fleetwise@127.0.0.1:<port>/<database>` (trust authentication: no password). */
  url(database?: string): string;
  /** A new, empty database; its URL. */
  createDatabase(): string;
  /** A new, empty schema in the `postgres` database and a URL whose search_path puts it first (cheaper than a database). */
  createSchema(): string;
  /** Run SQL as the superuser (in `database`, default `postgres`). */
  sql(text: string, database?: string): Record<string, unknown>[];
  /** The server's log so far (for failure messages). */
  log(): string;
  stop(): void;
}

export async function startPostgres(bin: string): Promise<PostgresServer> {
  const dir = mkdtempSync(join(tmpdir(), 'fleetwise-pg-'));
  const asRoot = userInfo().uid === 0;
  const runAs = (command: string, args: readonly string[]): ReturnType<typeof spawnSync> => {
    const [exe, argv] = asRoot
      ? ['runuser', ['-u', 'postgres', '--', join(bin, command), ...args]]
      : [join(bin, command), [...args]];
    return spawnSync(exe, argv, { encoding: 'utf8', cwd: dir });
  };
  if (asRoot) {
    const pwd = spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' });
    const gid = spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' });
    if (pwd.status !== 0)
      throw new Error('running as root, but there is no postgres user to run PostgreSQL as');
    chownSync(dir, Number(pwd.stdout.trim()), Number(gid.stdout.trim()));
  }
  chmodSync(dir, 0o700);
  const data = join(dir, 'data');
  const logFile = join(dir, 'server.log');
  const init = runAs('initdb', [
    '-D',
    data,
    '-U',
    SUPERUSER,
    '-A',
    'trust',
    '-E',
    'UTF8',
    '--no-sync',
    '--locale=C',
  ]);
  if (init.status !== 0) throw new Error(`initdb failed:\n${String(init.stdout)}${String(init.stderr)}`);
  const port = await freePort();
  // Durability off: a test cluster is thrown away, and fsyncs only cost time on a shared machine.
  const serverOptions = [
    `-p ${port}`,
    `-k ${dir}`,
    "-c listen_addresses='127.0.0.1'",
    '-c fsync=off',
    '-c synchronous_commit=off',
    '-c full_page_writes=off',
    '-c max_connections=50',
  ].join(' ');
  const start = runAs('pg_ctl', ['-D', data, '-l', logFile, '-w', '-t', '30', '-o', serverOptions, 'start']);
  const log = (): string => (existsSync(logFile) ? readFileSync(logFile, 'utf8') : '');
  if (start.status !== 0)
    throw new Error(`pg_ctl start failed:\n${String(start.stdout)}${String(start.stderr)}\n${log()}`);
  let stopped = false;
  const stop = (): void => {
    if (stopped) return;
    stopped = true;
    process.removeListener('exit', stop);
    for (const c of clients.values()) endNativeClient(c);
    runAs('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']);
    rmSync(dir, { recursive: true, force: true });
  };
  process.once('exit', stop);
  const url = (database = 'postgres'): string => `postgresql://${SUPERUSER}@127.0.0.1:${port}/${database}`;
  const clients = new Map<string, NativeClient>();
  const sql = (text: string, database = 'postgres'): Record<string, unknown>[] => {
    let client = clients.get(database);
    if (client === undefined) {
      client = newNativeClient();
      client.connectSync(url(database));
      clients.set(database, client);
    }
    return client.querySync(text);
  };
  let made = 0;
  return {
    port,
    url,
    createDatabase() {
      made += 1;
      const name = `test_${made}`;
      sql(`CREATE DATABASE ${name}`);
      return url(name);
    },
    createSchema() {
      made += 1;
      const name = `test_${made}`;
      sql(`CREATE SCHEMA ${name}`);
      return `${url()}?options=${encodeURIComponent(`-c search_path=${name}`)}`;
    },
    sql,
    log,
    stop,
  };
}

/** What a test gets: the running server (read it only in hooks and tests: it starts in beforeAll). */
export interface PostgresContext {
  readonly server: PostgresServer;
}

export function describeWithPostgres(name: string, body: (pg: PostgresContext) => void): void {
  const bin = findPostgresBin();
  if (bin === undefined) {
    // A test that cannot find its dependency fails, never skips (`npm test` tries to install it first).
    describe(name, () => {
      it('requires PostgreSQL', () => {
        throw new Error(
          `PostgreSQL not found under /usr/lib/postgresql (set PG_BIN, or install it: apt-get install postgresql); ` +
            `the tests of "${name}" need it`,
        );
      });
    });
    return;
  }
  describe(name, () => {
    let server: PostgresServer | undefined;
    beforeAll(async () => {
      server = await startPostgres(bin);
    });
    afterAll(() => server?.stop());
    body({
      get server() {
        if (server === undefined) throw new Error('PostgreSQL is not running (used outside a hook or test?)');
        return server;
      },
    });
  });
}

/** Fresh databases of the SQL stores for the tests of one file: a SQLite file each, a PostgreSQL schema each. */
export interface SqlDatabases {
  /** A path for a new SQLite database in the file's scratch directory. */
  sqlitePath(): string;
  /** The URL of a new PostgreSQL schema on the file's server; fails, naming what to install, when there is none. */
  postgresUrl(): string;
  /** The file's PostgreSQL server (for statements of a second connection). */
  readonly server: PostgresServer;
}

/**
 * One scratch directory and one throwaway PostgreSQL server for the calling test file, through its hooks: the setup
 * of every test that runs the StateStore contract on the SQL stores. A test that needs PostgreSQL and finds none fails.
 */
export function sqlDatabasesForFile(prefix: string): SqlDatabases {
  const scratch = mkdtempSync(join(tmpdir(), `fleetwise-${prefix}-`));
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));
  let files = 0;
  const bin = findPostgresBin();
  let server: PostgresServer | undefined;
  beforeAll(async () => {
    if (bin !== undefined) server = await startPostgres(bin);
  });
  afterAll(() => server?.stop());
  const running = (): PostgresServer => {
    if (server === undefined)
      throw new Error(
        'PostgreSQL not found under /usr/lib/postgresql (apt-get install postgresql, or set PG_BIN)',
      );
    return server;
  };
  return {
    sqlitePath: () => join(scratch, `state-${++files}.db`),
    postgresUrl: () => running().createSchema(),
    get server() {
      return running();
    },
  };
}
