import { expect, it } from 'vitest';
import { PostgresStateStore } from '../../src/controller/state/postgres-state-store.js';
import type { FleetwiseTraceDocument } from '../../src/sim/traces/fleetwise-json.js';
import { ensureBuiltCli, runCli } from '../helpers/built-cli.js';
import { exportedJobsOf, writeJobHistory } from '../helpers/job-history.js';
import { describeWithPostgres } from '../helpers/postgres.js';
import { UNREACHABLE_PORT } from '../helpers/unreachable-url.js';

/**
 * `fleetwise export-trace --state` (the built CLI in a subprocess, a real PostgreSQL) given libpq's failover form of
 * the URL, a list of hosts whose first refuses connections, as an operator with a primary and a standby writes it.
 */

describeWithPostgres('fleetwise export-trace through a list of PostgreSQL hosts', (pg) => {
  it('reads the state from the host that answers, and shows the URL without its password', async () => {
    ensureBuiltCli(['cli/main.ts']);
    const database = new URL(pg.server.createDatabase()).pathname.slice(1);
    const hosts = `127.0.0.1:${UNREACHABLE_PORT},127.0.0.1:${pg.server.port}`;
    const url = `postgresql://fleetwise@${hosts}/${database}?target_session_attrs=read-write&password=s3cret`;
    let now = 0;
    const store = new PostgresStateStore(pg.server.url(database), { nowSeconds: () => now });
    const history = writeJobHistory(store, { set: (t) => void (now = t) });
    store.close();

    const out = await runCli(['export-trace', '--state', url]);
    expect(out.code, out.stderr).toBe(0);
    const document = JSON.parse(out.stdout) as FleetwiseTraceDocument;
    expect(exportedJobsOf(document)).toEqual(history.exported);
    expect(document.source).toBe(
      `postgresql://fleetwise@${hosts}/${database}?target_session_attrs=read-write&password=***`,
    );
    expect(out.stdout + out.stderr).not.toContain('s3cret');
  }, 120_000);
});
