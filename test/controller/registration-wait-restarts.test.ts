import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/controller/clock.js';
import { CARRIED_REGISTRATION_WAIT_KEY } from '../../src/controller/reconcile/effects/carried-registration-wait.js';
import { LAUNCH_BACKOFF_KEY } from '../../src/controller/reconcile/effects/registrations.js';
import type { TaskControl } from '../../src/controller/seams.js';
import type { EventRecord, InstanceRecord, StateStore } from '../../src/controller/state-store.js';
import { SqliteStateStore } from '../../src/controller/state/sqlite-state-store.js';
import { CPU_SMALL, FakeCloud, jobSpec, rig } from './controller-fixtures.js';

/**
 * The wait for a worker's registration is counted across controllers: each one is a new Controller on the SQLite file
 * the last one left (a process restarted, nothing kept in memory), over the same cloud and clock. An instance whose
 * worker never registers is replaced once the controllers together have served the registration timeout, however
 * short each one lives; time when no controller served does not count.
 */

const TIMEOUT = 600;
/** A reconcile pass every 30 s, as a controller's loop does between rounds. */
const PASS = 30;

const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-registration-wait-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const neverRegisters: TaskControl = {
  name: 'never-registers',
  workerRegistered: () => false,
  start: async () => {},
  stop: async () => 'stopped',
  status: async () => 'running',
};

interface Life {
  readonly from: number;
  readonly to: number;
}

/** A cluster whose controllers are started, served for a while and killed, one after another. */
function crashLoop(name: string) {
  const dbPath = join(scratch, `${name}.db`);
  const clock = new ManualClock();
  const cloud = new FakeCloud();
  const lives: Life[] = [];
  const open = (): StateStore => new SqliteStateStore(dbPath, { nowSeconds: () => clock.nowSeconds() });
  return {
    clock,
    cloud,
    lives,
    open,
    /**
     * One controller: it recovers, then passes every PASS seconds for `seconds` (a round at its start and every
     * `roundEvery` s), and is killed right after its last pass; then `downSeconds` pass with no controller.
     */
    async serve(seconds: number, downSeconds: number, roundEvery = Infinity): Promise<void> {
      const store = open();
      const { controller } = rig(
        { registrationTimeoutSeconds: TIMEOUT, registrationBackoffBaseSeconds: 60 },
        { store, cloud, clock, tasks: neverRegisters },
      );
      const from = clock.nowSeconds();
      await controller.recover();
      for (let t = 0; t <= seconds; t += PASS) {
        if (t > 0) clock.advance(PASS);
        if (t % roundEvery === 0) await controller.runRound('test');
        else if (t > 0) await controller.reconcile();
      }
      lives.push({ from, to: clock.nowSeconds() });
      store.close();
      clock.advance(downSeconds);
    },
    /** What the store holds now, read by a process of its own. */
    read<T>(look: (store: StateStore) => T): T {
      const store = open();
      try {
        return look(store);
      } finally {
        store.close();
      }
    },
  };
}

/** The seconds some controller served between the instance running and its replacement. */
function servedWhileWaiting(lives: readonly Life[], instance: InstanceRecord, replaced: EventRecord): number {
  const running = instance.runningAtSeconds as number;
  return lives.reduce(
    (sum, life) => sum + Math.max(0, Math.min(life.to, replaced.atSeconds) - Math.max(life.from, running)),
    0,
  );
}

function timeouts(store: StateStore): EventRecord[] {
  return store.listEvents({ kind: 'instance.registration-timeout' });
}

describe('the registration timeout across controller restarts', () => {
  it('a crash loop of controllers each living less than the timeout still replaces the instance, and backs off', async () => {
    const loop = crashLoop('crash-loop');
    const first = loop.open();
    first.submitJob(jobSpec('small', CPU_SMALL));
    first.close();
    // Lives of 270 s (under half the timeout) with 10 s down between: a round at each start launches or relaunches.
    await loop.serve(270, 10, 90);
    expect(loop.read((s) => s.getValue(CARRIED_REGISTRATION_WAIT_KEY))).toEqual({ 'inst-1': 270 });
    for (let i = 0; i < 11; i++) await loop.serve(270, 10, 90);

    const replaced = loop.read(timeouts);
    // Each instance goes after the timeout summed over the lives, not one life: at the first pass past it.
    expect(replaced.length).toBeGreaterThanOrEqual(2);
    for (const event of replaced) {
      const instance = loop.read((s) => s.getInstance(event.instanceId as string)) as InstanceRecord;
      const served = servedWhileWaiting(loop.lives, instance, event);
      expect(served).toBeGreaterThanOrEqual(TIMEOUT);
      expect(served).toBeLessThan(TIMEOUT + PASS);
      expect(instance.state).not.toBe('running');
    }
    // The backoff built up (one failure per replacement, none reset); at most the latest instance is left.
    expect(loop.read((s) => s.getValue(LAUNCH_BACKOFF_KEY))).toMatchObject({ failures: replaced.length });
    expect(loop.cloud.live().length).toBeLessThanOrEqual(1);
    // Replaced instances are no longer carried.
    const carried = loop.read((s) => s.getValue(CARRIED_REGISTRATION_WAIT_KEY)) as Record<string, number>;
    for (const event of replaced) expect(carried).not.toHaveProperty(event.instanceId as string);
  });

  it('does not count the time no controller served: a restart after a long outage replaces nothing at once', async () => {
    const loop = crashLoop('long-outage');
    const first = loop.open();
    first.submitJob(jobSpec('small', CPU_SMALL));
    first.close();
    await loop.serve(300, 3600, 300); // down six times the timeout
    await loop.serve(240, 0);
    expect(loop.read(timeouts)).toEqual([]);
    expect(loop.read((s) => s.getInstance('inst-1')?.state)).toBe('running');
    expect(loop.read((s) => s.getValue(CARRIED_REGISTRATION_WAIT_KEY))).toEqual({ 'inst-1': 540 });
    // The next controller goes on from the 540 s: replaced 60 s in.
    await loop.serve(90, 0);
    const replaced = loop.read(timeouts);
    expect(replaced.map((e) => e.instanceId)).toEqual(['inst-1']);
    const instance = loop.read((s) => s.getInstance('inst-1')) as InstanceRecord;
    expect(servedWhileWaiting(loop.lives, instance, replaced[0] as EventRecord)).toBe(TIMEOUT);
    expect(instance.state).not.toBe('running');
  });

  it('takes an unreadable saved wait as nothing saved', async () => {
    const loop = crashLoop('unreadable');
    const first = loop.open();
    first.submitJob(jobSpec('small', CPU_SMALL));
    first.close();
    await loop.serve(300, 0, 300);
    loop.read((s) => s.setValue(CARRIED_REGISTRATION_WAIT_KEY, { 'inst-1': 'a while' }));
    // Counted afresh by this controller (the first one's 300 s would have replaced it halfway), and saved readable.
    await loop.serve(570, 0);
    expect(loop.read(timeouts)).toEqual([]);
    expect(loop.read((s) => s.getValue(CARRIED_REGISTRATION_WAIT_KEY))).toEqual({ 'inst-1': 570 });
    await loop.serve(30, 0);
    expect(loop.read(timeouts).map((e) => e.instanceId)).toEqual(['inst-1']);
  });
});
