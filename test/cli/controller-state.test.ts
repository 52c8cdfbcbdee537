import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, expect, it } from 'vitest';
import { openControllerState, type ControllerState } from '../../src/cli/controller-state.js';
import { loadCatalogFile, PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import { loadControllerConfig } from '../../src/controller/config-loading.js';
import type { ControllerConfig } from '../../src/controller/config.js';
import { parseJobSpec } from '../../src/controller/job-spec/parse.js';
import { silentLogger } from '../../src/controller/seams.js';
import { describeWithPostgres, findPostgresBin } from '../helpers/postgres.js';

/**
 * A controller's PostgreSQL state as `fleetwise controller` opens it: its database waits bounded by its lease timings,
 * so a slow database fails statements instead of holding up the renewals, and the API address it publishes with the
 * lease.
 */

const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-controller-state-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const RESNET = parseJobSpec(
  readFileSync(join(PROJECT_ROOT, 'examples', 'jobs', 'resnet.yaml'), 'utf8'),
  'resnet.yaml',
  loadCatalogFile(),
);

const wait = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

describeWithPostgres('the controller state on PostgreSQL', (pg) => {
  const opened: ControllerState[] = [];
  afterEach(() => {
    for (const s of opened.splice(0)) s.close();
  });

  function configFor(url: string, extra: Record<string, string> = {}): ControllerConfig {
    return loadControllerConfig({
      flags: {
        provider: 'local',
        region: 'us-east-1',
        stateDir: join(scratch, 'state'),
        state: url,
        ...extra,
      },
    });
  }

  function open(config: ControllerConfig): ControllerState {
    const state = openControllerState(config, {
      nowSeconds: () => Date.now() / 1000,
      sqlitePath: join(scratch, 'unused.db'),
      log: silentLogger,
    });
    opened.push(state);
    return state;
  }

  it('keeps its lease through a table lock held past its renew deadline: statements give up, renewals go on', async () => {
    const url = pg.server.createDatabase();
    const lease = { durationSeconds: 4, renewDeadlineSeconds: 3, retrySeconds: 0.5 };
    const state = open({ ...configFor(url), lease });
    const lost: string[] = [];
    await state.becomeActive((reason) => lost.push(reason));
    // Another session holds the jobs table for longer than the renew deadline (a slow migration, a vacuum, an operator).
    const holder = spawn(join(findPostgresBin() ?? '', 'psql'), [
      url,
      '-c',
      'BEGIN; LOCK TABLE jobs IN SHARE MODE; SELECT pg_sleep(4); COMMIT;',
    ]);
    const held = new Promise<number | null>((resolve) => holder.on('close', resolve));
    const database = new URL(url).pathname.slice(1);
    const locked = (): boolean =>
      pg.server.sql(
        `SELECT count(*) AS n FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
         WHERE c.relname = 'jobs' AND l.mode = 'ShareLock' AND l.granted`,
        database,
      )[0]?.['n'] === '1';
    for (let i = 0; i < 100 && !locked(); i += 1) await wait(20);
    expect(locked()).toBe(true);
    // The controller keeps trying to write, as its API and loop would; each try blocks the event loop while it waits.
    const failures: string[] = [];
    let submitted = false;
    const started = Date.now();
    while (!submitted && Date.now() - started < 8000) {
      try {
        state.store.submitJob(RESNET);
        submitted = true;
      } catch (e) {
        failures.push((e as Error).message);
        await wait(100);
      }
    }
    expect(await held).toBe(0);
    expect(lost).toEqual([]);
    expect(submitted).toBe(true);
    expect(failures.length).toBeGreaterThan(0);
    expect(failures[0]).toMatch(/lock timeout/);
  });

  it('publishes its listen address with the lease, a wildcard host as the host name, or the advertised URL', async () => {
    const url = pg.server.createDatabase();
    const wildcard = open(configFor(url, { listen: '0.0.0.0:7070' }));
    await wildcard.becomeActive(() => {});
    expect(wildcard.leadership?.().activeUrl).toBe(`http://${hostname()}:7070`);
    wildcard.close();
    const advertised = open(
      configFor(url, { listen: '0.0.0.0:7070', advertiseUrl: 'https://controller-a.internal:7443' }),
    );
    await advertised.becomeActive(() => {});
    expect(advertised.leadership?.().activeUrl).toBe('https://controller-a.internal:7443');
    advertised.close();
    const named = open(configFor(url, { listen: '127.0.0.1:7071' }));
    await named.becomeActive(() => {});
    expect(named.leadership?.().activeUrl).toBe('http://127.0.0.1:7071');
  });
});
