/**
 * A COMMIT that PostgreSQL has carried out but not yet answered, for tests of a connection lost in between (a network
 * cut, a failover). With synchronous_standby_names naming a standby that never connects, a session with
 * synchronous_commit on commits locally and then waits for the standby (wait event SyncRep) until the setting is
 * reset (a transaction that wrote to the WAL; neither statement_timeout nor any other session bound ends that wait,
 * only the end of the backend). The test servers run with synchronous_commit off (helpers/postgres.ts), so only the sessions that ask for it
 * wait: a store opened on `waitingCommitUrl` (after its migration, which commits too).
 *
 * The statements that end a waiting backend run in a child process, since the test's own process is blocked in the
 * store's synchronous COMMIT meanwhile.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import { setTimeout as sleep } from 'node:timers/promises';
import type { PostgresServer } from './postgres.js';

const PG_NATIVE = createRequire(import.meta.url).resolve('pg-native');

/** The application_name of the session that shows the setting is in effect. */
const PROBE = 'fleetwise-commit-probe';

/**
 * `url` for a session whose commits wait for the missing standby, named `applicationName` in pg_stat_activity.
 * Parameters are %-encoded: libpq reads a `+` as itself, not as a space.
 */
export function waitingCommitUrl(url: string, applicationName: string): string {
  const parsed = new URL(url);
  const params = new Map(parsed.searchParams);
  const options = params.get('options');
  params.set('options', `${options === undefined ? '' : `${options} `}-c synchronous_commit=on`);
  params.set('application_name', applicationName);
  const query = [...params].map(([k, v]) => `${k}=${encodeURIComponent(v)}`).join('&');
  return `${url.split('?')[0] ?? url}?${query}`;
}

/** Commits held: `release` resets the setting and waits until a held commit went through. */
export interface HeldCommits {
  release(): Promise<void>;
}

/**
 * From now until `release`, commits of sessions on `waitingCommitUrl` wait after committing. Resolves once a probe
 * session's commit was seen waiting, so the setting is in effect (the server applies a reload asynchronously).
 */
export async function holdCommits(server: PostgresServer): Promise<HeldCommits> {
  server.sql("ALTER SYSTEM SET synchronous_standby_names = 'fleetwise_no_such_standby'");
  server.sql('SELECT pg_reload_conf()');
  const reset = (): void => {
    server.sql('ALTER SYSTEM RESET synchronous_standby_names');
    server.sql('SELECT pg_reload_conf()');
  };
  try {
    for (let attempt = 1; attempt <= 50; attempt++) {
      const probe = runWithPgNative(
        `const c = new Client(); c.connectSync(process.env.URL);
         c.querySync('BEGIN'); c.querySync('CREATE TEMP TABLE probe (n INTEGER)'); c.querySync('COMMIT'); c.end();`,
        { URL: waitingCommitUrl(server.url(), PROBE) },
        'the probe commit',
      );
      let exited = false;
      const committed = probe.exited.finally(() => (exited = true));
      committed.catch(() => undefined);
      while (!exited) {
        if (waiting(server, PROBE))
          return {
            async release() {
              reset();
              // The server wakes the waiters once no standby is asked for: the probe's commit ends.
              await committed;
            },
          };
        await sleep(20);
      }
      // The probe committed without waiting (the reload had not reached the server's processes yet), or failed.
      await committed;
    }
    throw new Error('commits never waited for the missing synchronous standby');
  } catch (e) {
    reset();
    throw e;
  }
}

/** A child process that ends the backend of `applicationName` once its COMMIT waits. */
export interface BackendEnder {
  /** Resolves once the child is connected and watching. */
  readonly watching: Promise<void>;
  /** Resolves once it ended the backend; rejects when it found none waiting (after a minute) or failed. */
  readonly ended: Promise<void>;
}

export function endBackendWhenCommitWaits(server: PostgresServer, applicationName: string): BackendEnder {
  const { child, exited } = runWithPgNative(
    `const c = new Client(); c.connectSync(process.env.URL);
     process.stdout.write('watching\\n');
     const pause = new Int32Array(new SharedArrayBuffer(4));
     for (let polls = 0; ; polls++) {
       const ended = c.querySync(
         "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1 AND wait_event = 'SyncRep'",
         [process.env.VICTIM],
       );
       if (ended.length > 0) break;
       if (polls === 6000) { process.stderr.write('no commit of ' + process.env.VICTIM + ' waited\\n'); process.exit(1); }
       Atomics.wait(pause, 0, 0, 10);
     }
     c.end();`,
    { URL: server.url(), VICTIM: applicationName },
    'the backend ender',
  );
  const watching = new Promise<void>((resolve, reject) => {
    child.stdout?.on('data', (chunk: Buffer) => {
      if (chunk.toString().includes('watching')) resolve();
    });
    child.once('exit', () => reject(new Error('the backend ender exited before it watched')));
  });
  return { watching, ended: exited };
}

function waiting(server: PostgresServer, applicationName: string): boolean {
  return (
    server.sql(
      `SELECT 1 FROM pg_stat_activity WHERE application_name = '${applicationName}' AND wait_event = 'SyncRep'`,
    ).length > 0
  );
}

/**
 * `body` run by node with pg-native's client class as `Client`, `env` added to its environment; `exited` resolves
 * when it exits 0 and rejects with its stderr otherwise.
 */
function runWithPgNative(
  body: string,
  env: Record<string, string>,
  what: string,
): { child: ChildProcess; exited: Promise<void> } {
  const child = spawn(
    process.execPath,
    ['-e', `const Client = require(${JSON.stringify(PG_NATIVE)});\n${body}`],
    {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<void>((resolve, reject) =>
    child.once('close', (code) =>
      code === 0 ? resolve() : reject(new Error(`${what} exited with ${String(code)}: ${stderr}`)),
    ),
  );
  // Awaited later, or not at all when the test failed before: not an unhandled rejection meanwhile.
  exited.catch(() => undefined);
  return { child, exited };
}
