import { afterEach, expect, it } from 'vitest';
import { FencedWriteError, type LeaseSettings } from '../../src/controller/ha/lease.js';
import { LeaderElector } from '../../src/controller/ha/leader-elector.js';
import { PostgresStateStore } from '../../src/controller/state/postgres-state-store.js';
import { describeWithPostgres } from '../helpers/postgres.js';

/**
 * The fence of a controller's writes names its whole term, holder and epoch (a real PostgreSQL). An epoch alone is
 * given twice when the database fails over to an asynchronous replica that never received an acquisition: the
 * promoted replica's lease row is the one from before it, and the next controller takes the same epoch again.
 */

const SETTINGS: LeaseSettings = { durationSeconds: 60, renewDeadlineSeconds: 40, retrySeconds: 2 };

describeWithPostgres('lease fencing by term on PostgreSQL', (pg) => {
  const opened: PostgresStateStore[] = [];
  afterEach(() => {
    for (const s of opened.splice(0)) s.close();
  });

  /** A controller: its own store (connection) on the database, its elector, and its fence once it holds the lease. */
  function controller(url: string, holder: string): { store: PostgresStateStore; elector: LeaderElector } {
    const store = new PostgresStateStore(url);
    opened.push(store);
    const lease = store.lease('controller');
    const elector = new LeaderElector({ table: lease, holder, settings: SETTINGS });
    return { store, elector };
  }

  it('refuses the writes of a holder whose acquisition the database lost, though the epoch is again its own', () => {
    const url = pg.server.createDatabase();
    const database = new URL(url).pathname.slice(1);
    const a = controller(url, 'box-a:101:1f2e3d');
    const termA = a.elector.tryAcquire();
    expect(termA).toEqual({ holder: 'box-a:101:1f2e3d', epoch: 1 });
    if (termA === undefined) throw new Error('A took no lease');
    a.store.fenceWith(a.store.lease('controller'), termA);
    a.store.setValue('written-by', 'A before the failover');

    // The promoted replica never saw A's acquisition: its lease row is the one created free at epoch 0.
    pg.server.sql(
      'UPDATE leases SET holder = NULL, holder_url = NULL, epoch = 0, expires_at = to_timestamp(0) ' +
        "WHERE name = 'controller'",
      database,
    );
    const b = controller(url, 'box-b:202:4c5b6a');
    const termB = b.elector.tryAcquire();
    expect(termB).toEqual({ holder: 'box-b:202:4c5b6a', epoch: 1 });
    if (termB === undefined) throw new Error('B took no lease');
    b.store.fenceWith(b.store.lease('controller'), termB);

    // A still runs (its own renew deadline is far off) and writes: refused, whole transactions and single writes.
    expect(() => a.store.setValue('written-by', 'A after the failover')).toThrow(FencedWriteError);
    expect(() =>
      a.store.transaction(() => {
        a.store.setValue('written-by', 'A again');
        a.store.appendEvent({ kind: 'note', message: 'from the deposed controller' });
      }),
    ).toThrow(/epoch 1 is over: the lease is at epoch 1 again, held by box-b:202:4c5b6a/);
    expect(b.store.getValue('written-by')).toBe('A before the failover');
    expect(b.store.listEvents().map((e) => e.message)).not.toContain('from the deposed controller');
    // The holder of the term writes.
    b.store.setValue('written-by', 'B');
    expect(a.store.getValue('written-by')).toBe('B');
  });

  it('refuses writes once the lease is given up', () => {
    const url = pg.server.createDatabase();
    const a = controller(url, 'box-a:101:aaaaaa');
    const term = a.elector.tryAcquire();
    if (term === undefined) throw new Error('A took no lease');
    a.store.fenceWith(a.store.lease('controller'), term);
    a.store.setValue('k', 1);
    a.elector.release();
    expect(() => a.store.setValue('k', 2)).toThrow(/lease epoch 1 is over: the lease was given up/);
    expect(a.store.getValue('k')).toBe(1);
  });
});
