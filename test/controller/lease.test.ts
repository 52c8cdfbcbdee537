import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, expect, it } from 'vitest';
import { loadCatalogFile, PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import { LocalProvider } from '../../src/cloud/local/local-provider.js';
import { parseJobSpec } from '../../src/controller/job-spec/parse.js';
import { FencedCloudProvider } from '../../src/controller/ha/fenced-provider.js';
import { LeaderElector } from '../../src/controller/ha/leader-elector.js';
import {
  FencedWriteError,
  LeaseNotHeldError,
  leaseSettingsSchema,
  MAX_LEASE_TIMING_SECONDS,
  type LeaseSettings,
} from '../../src/controller/ha/lease.js';
import { PostgresStateStore } from '../../src/controller/state/postgres-state-store.js';
import { connectionBoundsFor } from '../../src/controller/state/postgres/conninfo.js';
import { table3Catalog } from '../helpers/catalogs.js';
import { describeWithPostgres, findPostgresBin } from '../helpers/postgres.js';

/**
 * The controller's lease and its fencing against a real PostgreSQL: expiry by the database's clock, takeover with a
 * greater epoch, a deposed holder's writes and cloud calls refused, renewal, release, and a holder that cannot renew
 * giving up within its renew deadline. Short leases keep it quick.
 */

const SHORT: LeaseSettings = { durationSeconds: 1.2, renewDeadlineSeconds: 0.8, retrySeconds: 0.2 };
const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-lease-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const wait = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describeWithPostgres('controller lease on PostgreSQL', (pg) => {
  const opened: PostgresStateStore[] = [];
  const electors: LeaderElector[] = [];
  afterEach(() => {
    for (const e of electors.splice(0)) e.release();
    for (const s of opened.splice(0)) s.close();
  });

  /** Two controllers' stores on one database, as an active and a standby have. */
  function pair(url = pg.server.createSchema()): [PostgresStateStore, PostgresStateStore] {
    const a = new PostgresStateStore(url);
    const b = new PostgresStateStore(url);
    opened.push(a, b);
    return [a, b];
  }

  function elector(
    store: PostgresStateStore,
    holder: string,
    settings: LeaseSettings = SHORT,
    monotonicMs?: () => number,
  ): LeaderElector {
    const e = new LeaderElector({
      table: store.lease('controller'),
      holder,
      holderUrl: `http://${holder}.test:7070`,
      settings,
      ...(monotonicMs === undefined ? {} : { monotonicMs }),
    });
    electors.push(e);
    return e;
  }

  it('validates its timings: renew deadline below the lease, retries below the deadline', () => {
    expect(leaseSettingsSchema.parse({})).toEqual({
      durationSeconds: 15,
      renewDeadlineSeconds: 10,
      retrySeconds: 2,
    });
    const bad = leaseSettingsSchema.safeParse({
      durationSeconds: 5,
      renewDeadlineSeconds: 5,
      retrySeconds: 5,
    });
    expect(bad.success).toBe(false);
    expect(bad.error?.issues.map((i) => i.path.join('.'))).toEqual(['renewDeadlineSeconds', 'retrySeconds']);
  });

  it('takes timings up to a day, whose derived database timeouts PostgreSQL accepts, and refuses longer ones', () => {
    const max = MAX_LEASE_TIMING_SECONDS;
    // The largest statement bound (retries as short as can be), then the largest idle-in-transaction bound.
    for (const timings of [
      { durationSeconds: max, renewDeadlineSeconds: max - 1, retrySeconds: 0.001 },
      { durationSeconds: max, renewDeadlineSeconds: 1.5, retrySeconds: 0.5 },
    ]) {
      const settings = leaseSettingsSchema.parse(timings);
      const store = new PostgresStateStore(pg.server.createSchema(), {
        bounds: connectionBoundsFor(settings),
      });
      opened.push(store);
      const holder = elector(store, 'alpha', settings);
      expect(holder.tryAcquire()).toEqual({ holder: 'alpha', epoch: 1 });
      holder.release();
    }
    for (const field of ['durationSeconds', 'renewDeadlineSeconds', 'retrySeconds'] as const) {
      const over = leaseSettingsSchema.safeParse({
        durationSeconds: max,
        renewDeadlineSeconds: max - 1,
        retrySeconds: 1,
        [field]: max + 1,
      });
      expect(over.error?.issues.find((i) => i.path[0] === field)?.message).toMatch(/^must be at most 86400 /);
    }
  });

  it('gives the lease to one controller at a time, and to the next with a greater epoch once it expires', async () => {
    const [a, b] = pair();
    const first = elector(a, 'alpha');
    const second = elector(b, 'beta');
    expect(first.tryAcquire()).toEqual({ holder: 'alpha', epoch: 1 });
    expect(second.tryAcquire()).toBeUndefined();
    expect(second.view()).toEqual({
      role: 'standby',
      epoch: 1,
      holder: 'alpha',
      activeUrl: 'http://alpha.test:7070',
    });
    expect(first.view()).toMatchObject({ role: 'active', epoch: 1, holder: 'alpha' });
    // Renewals keep it past its duration.
    for (let i = 0; i < 3; i += 1) {
      await wait(400);
      expect(first.renewOnce()).toBeUndefined();
      expect(second.tryAcquire()).toBeUndefined();
    }
    // Once not renewed for the lease's duration, it expires (by the database's clock) and passes on.
    await wait(1300);
    expect(second.tryAcquire()).toEqual({ holder: 'beta', epoch: 2 });
    expect(first.renewOnce()).toMatch(/renew deadline|expired or passed to another controller/);
    expect(first.term).toBeUndefined();
    expect(first.view()).toMatchObject({ role: 'standby', epoch: 2, holder: 'beta' });
  });

  it('a standby polling with acquire() takes over a lease its holder stopped renewing', async () => {
    const [a, b] = pair();
    const first = elector(a, 'alpha');
    first.tryAcquire();
    const started = Date.now();
    const term = await elector(b, 'beta').acquire(AbortSignal.timeout(10_000));
    const waitedMs = Date.now() - started;
    expect(term.epoch).toBe(2);
    // The lease's duration, plus at most one retry period (and some slack for a loaded machine).
    expect(waitedMs).toBeGreaterThanOrEqual(1000);
    expect(waitedMs).toBeLessThan(1200 + 200 + 1500);
  });

  it('releasing hands the lease over at once', () => {
    const [a, b] = pair();
    const first = elector(a, 'alpha', { durationSeconds: 60, renewDeadlineSeconds: 40, retrySeconds: 2 });
    first.tryAcquire();
    const second = elector(b, 'beta');
    expect(second.tryAcquire()).toBeUndefined();
    first.release();
    expect(second.tryAcquire()).toEqual({ holder: 'beta', epoch: 2 });
    expect(() => first.assertLeading()).toThrow(LeaseNotHeldError);
  });

  it("refuses a deposed holder's writes in the same transaction, and commits the new holder's", async () => {
    const [a, b] = pair();
    const first = elector(a, 'alpha');
    const term1 = first.tryAcquire();
    if (term1 === undefined) throw new Error('alpha took no lease');
    a.fenceWith(a.lease('controller'), term1);
    const spec = readFileSync(join(PROJECT_ROOT, 'examples', 'jobs', 'resnet.yaml'), 'utf8');
    const job = a.submitJob(parseJobSpec(spec, 'resnet.yaml', loadCatalogFile()));
    expect(job.id).toBe('job-1');
    await wait(1300);
    const term2 = elector(b, 'beta').tryAcquire();
    expect(term2?.epoch).toBe(2);
    if (term2 === undefined) throw new Error('beta took no lease');
    b.fenceWith(b.lease('controller'), term2);

    // The old holder still reads, but none of its writes commits: not the one alone, not a transaction of several.
    expect(a.getJob('job-1')?.state).toBe('queued');
    expect(() => a.setJobState('job-1', 'starting')).toThrow(FencedWriteError);
    expect(() =>
      a.transaction(() => {
        a.createInstance({ typeName: 'c.x' });
        a.appendEvent({ kind: 'note', message: 'from the deposed controller' });
      }),
    ).toThrow(/lease epoch 1 is over \(the lease is at epoch 2\)/);
    expect(b.getJob('job-1')?.state).toBe('queued');
    expect(b.listInstances()).toEqual([]);
    expect(b.listEvents().map((e) => e.kind)).toEqual(['job.submitted']);
    // The new holder writes, and its numbering continues where the committed state left it.
    b.setJobState('job-1', 'starting');
    expect(b.createInstance({ typeName: 'c.x' }).id).toBe('inst-1');
    expect(a.getJob('job-1')?.state).toBe('starting');
  });

  it('makes no cloud call for a controller that lost the lease, or may lose it before the call ends', async () => {
    const url = pg.server.createSchema();
    const [a, b] = pair(url);
    let nowMs = 0;
    const first = elector(a, 'alpha', SHORT, () => nowMs);
    first.tryAcquire();
    const dir = join(scratch, 'cloud-1');
    const local = new LocalProvider({
      stateFile: join(dir, 'local-instances.json'),
      instancesDir: join(dir, 'instances'),
      catalog: table3Catalog(),
      // No worker process: the test looks only at which calls reached the provider.
      spawner: { spawn: () => undefined, kill: async () => undefined },
    });
    const cloud = new FencedCloudProvider(local, first);
    const launch = (token: string) =>
      cloud.launch({
        typeName: 'c.x',
        idempotencyToken: token,
        clusterName: 'ha',
        planId: 'p',
        instanceKey: token,
      });

    // Held, with time left: calls go through.
    await launch('t-1');
    expect((await cloud.list('ha')).map((i) => i.tags['fleetwise:launch-token'])).toEqual(['t-1']);
    // Past its own renew deadline (its monotonic clock), even though the database still shows the lease.
    nowMs = 900;
    await expect(launch('t-2')).rejects.toThrow(/renew deadline/);
    expect(local.instances()).toHaveLength(1);

    // Held by the database's account but with less than the safety margin (duration − renew deadline) left.
    const [c] = pair(url);
    // Its own clock stands still: only the database's account of the time left can refuse the call.
    const second = elector(
      c,
      'gamma',
      { durationSeconds: 1, renewDeadlineSeconds: 0.5, retrySeconds: 0.1 },
      () => 0,
    );
    await wait(1300); // alpha's lease expires
    second.tryAcquire();
    const fenced = new FencedCloudProvider(local, second);
    await fenced.list('ha');
    await wait(600); // 0.4 s left, under the 0.5 s margin
    await expect(fenced.terminate(['t-1'])).rejects.toThrow(/less than 0.5 s left/);
    expect(local.instances().map((i) => i.state)).toEqual(['running']);

    // Taken over: the old holder's calls are refused, whatever its clock says.
    await wait(500);
    const third = elector(b, 'beta', { durationSeconds: 30, renewDeadlineSeconds: 20, retrySeconds: 2 });
    expect(third.tryAcquire()?.epoch).toBe(3);
    await expect(fenced.list('ha')).rejects.toThrow(/passed to another controller/);
    await expect(new FencedCloudProvider(local, third).list('ha')).resolves.toHaveLength(1);
  });

  it('gives up leading at its renew deadline when the database stops answering, and says why once', async () => {
    const url = pg.server.createDatabase();
    // Statements give up after 150 ms, so a renewal stuck behind a lock fails quickly.
    const a = new PostgresStateStore(url, {
      bounds: {
        connectTimeoutSeconds: 2,
        statementTimeoutMs: 150,
        lockTimeoutMs: 150,
        idleInTransactionTimeoutMs: 10_000,
        tcpUserTimeoutMs: 2000,
      },
    });
    opened.push(a);
    // The deadline is the elector's own measure, on a clock moved here by hand: when it gives up does not depend on how
    // fast a busy host runs the renewal timer. The lease in the database lasts long past anything this test waits.
    const settings: LeaseSettings = { durationSeconds: 30, renewDeadlineSeconds: 10, retrySeconds: 0.1 };
    let nowMs = 0;
    const table = a.lease('controller');
    const renewals = { ok: 0, failed: 0 };
    const holder = new LeaderElector({
      table: {
        tryAcquire: (name, holderUrl, seconds) => table.tryAcquire(name, holderUrl, seconds),
        renew: (term, seconds) => {
          try {
            const renewed = table.renew(term, seconds);
            if (renewed) renewals.ok += 1;
            return renewed;
          } catch (e) {
            renewals.failed += 1;
            throw e;
          }
        },
        release: (term) => table.release(term),
        read: () => table.read(),
        holds: (term, marginSeconds) => table.holds(term, marginSeconds),
      },
      holder: 'alpha',
      settings,
      monotonicMs: () => nowMs,
    });
    electors.push(holder);
    /** Waits for the renewal timer to make `seen` true: a few of its periods, or ten seconds on a very busy host. */
    const until = async (what: string, seen: () => boolean): Promise<void> => {
      const deadline = performance.now() + 10_000;
      while (!seen() && performance.now() < deadline) await wait(20);
      if (!seen()) throw new Error(`${what}: not within 10 s`);
    };
    expect(holder.tryAcquire()?.epoch).toBe(1);
    const reasons: string[] = [];
    holder.startRenewing((reason) => reasons.push(reason));
    // Renewed past the lease's duration: each renewal's deadline counts from its start. The last is 42 s.
    for (const at of [8_000, 16_000, 24_000, 32_000]) {
      nowMs = at;
      const before = renewals.ok;
      await until(`a renewal at ${at} ms`, () => renewals.ok > before);
    }
    expect(reasons).toEqual([]);
    // Another session locks the lease row and keeps it: every renewal now times out.
    const database = new URL(url).pathname.slice(1);
    pg.server.sql('BEGIN', database);
    pg.server.sql("SELECT * FROM leases WHERE name = 'controller' FOR UPDATE", database);
    try {
      // Short of the deadline, it keeps trying and keeps leading.
      nowMs = 41_999;
      const failedBefore = renewals.failed;
      await until('two failed renewals', () => renewals.failed >= failedBefore + 2 || reasons.length > 0);
      expect(reasons).toEqual([]);
      // At the deadline, the next renewal gives up.
      nowMs = 42_000;
      await until('the holder to give up', () => reasons.length > 0);
    } finally {
      pg.server.sql('ROLLBACK', database);
    }
    expect(reasons).toEqual([expect.stringContaining('renew deadline')]);
    expect(() => holder.assertLeading()).toThrow(LeaseNotHeldError);
    await wait(3 * settings.retrySeconds * 1000);
    expect(reasons).toHaveLength(1);
  });

  it('acts on a lease whose acquisition a stalled database held up past the renew deadline: renewed on arrival', async () => {
    // Between the controller and PostgreSQL, a relay in another process (this one blocks on its statement) that,
    // told to, holds what the controller sends for 1.5 s, longer than the 0.8 s renew deadline: a database host that
    // froze, then answered as if nothing happened.
    const relay = spawn(
      process.execPath,
      [
        '-e',
        `const net = require('node:net');
         let holdUntil = 0;
         process.stdin.on('data', () => { holdUntil = Date.now() + 1500; process.stdout.write('holding\\n'); });
         const server = net.createServer((client) => {
           const upstream = net.connect(${pg.server.port}, '127.0.0.1');
           client.on('data', (d) => setTimeout(() => upstream.write(d), Math.max(0, holdUntil - Date.now())));
           upstream.pipe(client);
           client.on('error', () => upstream.destroy());
           upstream.on('error', () => client.destroy());
         });
         server.listen(0, '127.0.0.1', () => process.stdout.write(server.address().port + '\\n'));`,
      ],
      { stdio: ['pipe', 'pipe', 'inherit'] },
    );
    try {
      const lines = relay.stdout.setEncoding('utf8');
      const nextLine = (): Promise<string> =>
        new Promise((resolve) => lines.once('data', (d: string) => resolve(d.trim())));
      const port = Number(await nextLine());
      const url = new URL(pg.server.createDatabase());
      url.port = String(port);
      const store = new PostgresStateStore(url.toString());
      opened.push(store);
      const table = store.lease('controller');
      const standby = elector(store, 'beta');
      relay.stdin.write('hold\n');
      expect(await nextLine()).toBe('holding');
      const started = Date.now();
      const term = standby.tryAcquire();
      expect(Date.now() - started).toBeGreaterThan(800);
      expect(term).toEqual({ holder: 'beta', epoch: 1 });
      // Its first cloud call goes out (it was refused: the deadline, counted from before the statement, had passed),
      // and so does its first renewal.
      expect(() => standby.assertLeading()).not.toThrow();
      await wait(SHORT.retrySeconds * 1000);
      expect(standby.renewOnce()).toBeUndefined();
      expect(table.read()).toMatchObject({ holder: 'beta', epoch: 1 });
    } finally {
      relay.kill();
    }
  });

  it('gives back a lease that came too late to act on, and takes it at the next poll', async () => {
    const url = pg.server.createDatabase();
    const [a, b] = pair(url);
    const table = a.lease('controller');
    // Another process holds the lease row for 1.5 s (longer than the 0.8 s renew deadline): the acquisition waits
    // for it, and PostgreSQL then writes the expiry it computed before the wait, which has passed by then.
    const holder = spawn(join(findPostgresBin() ?? '', 'psql'), [
      url,
      '-c',
      `BEGIN; SELECT * FROM leases WHERE name = 'controller' FOR UPDATE; SELECT pg_sleep(1.5); COMMIT;`,
    ]);
    const done = new Promise<number | null>((resolve) => holder.on('close', resolve));
    const database = new URL(url).pathname.slice(1);
    const rowLocked = (): boolean =>
      pg.server.sql(
        `SELECT count(*) AS n FROM pg_locks l JOIN pg_stat_activity s ON s.pid = l.pid
          WHERE s.query LIKE '%pg_sleep%' AND l.locktype = 'transactionid' AND l.granted`,
        database,
      )[0]?.['n'] !== '0';
    for (let i = 0; i < 100 && !rowLocked(); i += 1) await wait(20);
    expect(rowLocked()).toBe(true);
    const late = elector(a, 'late');
    expect(late.tryAcquire()).toBeUndefined();
    expect(await done).toBe(0);
    expect(late.term).toBeUndefined();
    expect(() => late.assertLeading()).toThrow(LeaseNotHeldError);
    // Given back: nobody waits for it to expire, and the next poll (this controller's or another's) takes it.
    expect(table.read()?.holder).toBeUndefined();
    const next = elector(b, 'beta');
    expect(next.tryAcquire()).toEqual({ holder: 'beta', epoch: 2 });
    expect(() => next.assertLeading()).not.toThrow();
  });
});
