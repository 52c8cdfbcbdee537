import { describe, expect, it } from 'vitest';
import { AttentionClock } from '../../src/controller/attention-clock.js';
import { ManualClock } from '../../src/controller/clock.js';
import { MemoryStateStore } from '../../src/controller/memory-state-store.js';
import { CARRIED_SILENCE_KEY } from '../../src/controller/carried-silence.js';
import type { StateStore } from '../../src/controller/state-store.js';
import { RECONNECT_GRACE_TIMEOUTS, WorkerSilence } from '../../src/controller/worker-silence.js';
import type { WorkerTaskControl } from '../../src/controller/worker-task-control.js';
import { workerTaskControlFor } from './controller-fixtures.js';

/**
 * When a registered worker counts as silent. A restarted controller first recovers (and, on a loaded host or with a
 * large state, that takes a while) and only then serves the worker protocol: silence before that is the controller's,
 * not the workers'. Counted from construction, a slow start declared every healthy worker lost at the first pass and
 * replaced all their instances at once.
 */
const WORKER_TOKEN = 'instance-token-0123456789abcdef';

/** One running instance with a registered worker, and the worker control watching it (10 s heartbeat timeout). */
function rig(
  clock: ManualClock,
  attention?: AttentionClock,
): { inst: { id: string }; workers: WorkerTaskControl; store: StateStore } {
  const store = new MemoryStateStore({ nowSeconds: () => clock.nowSeconds() });
  const inst = store.createInstance({ typeName: 'c7i.xlarge' });
  store.setInstanceState(inst.id, 'launching', { cloudId: 'local-a' });
  store.setInstanceState(inst.id, 'running');
  store.setWorkerToken(inst.id, WORKER_TOKEN);
  return { inst, workers: controlOver(store, clock, attention), store };
}

/** The worker control of a controller (re)started on `store` (1 s heartbeats, 10 s timeout). */
function controlOver(store: StateStore, clock: ManualClock, attention?: AttentionClock): WorkerTaskControl {
  return workerTaskControlFor(store, clock, {
    ...(attention === undefined ? {} : { attention }),
    objectStoreLocation: '/tmp/fleetwise-liveness-objects',
    heartbeatSeconds: 1,
    heartbeatTimeoutSeconds: 10,
  });
}

/** A second instance with its own registered worker. */
function addInstance(store: StateStore, token: string): { id: string } {
  const inst = store.createInstance({ typeName: 'c7i.xlarge' });
  store.setInstanceState(inst.id, 'launching', { cloudId: `local-${token.slice(0, 4)}` });
  store.setInstanceState(inst.id, 'running');
  store.setWorkerToken(inst.id, token);
  return inst;
}

describe('worker liveness', () => {
  it("counts a worker's silence from when the protocol is served, with twice the timeout to reconnect", () => {
    const clock = new ManualClock();
    const { inst, workers } = rig(clock);

    // A minute of recovery: nobody could heartbeat, nobody is silent.
    clock.advance(60);
    expect(workers.staleInstances()).toEqual([]);
    workers.serving();
    // Every worker reconnects at once after a restart: one not heard yet has RECONNECT_GRACE_TIMEOUTS timeouts.
    clock.advance(11);
    expect(workers.staleInstances()).toEqual([]);
    clock.advance(RECONNECT_GRACE_TIMEOUTS * 10 - 11 + 1);
    expect(workers.staleInstances().map((i) => i.id)).toEqual([inst.id]);
    // Serving again (a second call) does not restart the count.
    workers.serving();
    expect(workers.staleInstances().map((i) => i.id)).toEqual([inst.id]);
  });

  it('once a worker was heard, its silence counts from its last heartbeat, against one timeout', () => {
    const clock = new ManualClock();
    const { inst, workers } = rig(clock);
    workers.serving();
    clock.advance(5);
    workers.heartbeat(WORKER_TOKEN, { tasks: [] });
    clock.advance(9);
    expect(workers.staleInstances()).toEqual([]);
    clock.advance(2);
    expect(workers.staleInstances().map((i) => i.id)).toEqual([inst.id]);
  });

  it('gives a worker that has just registered twice the timeout for its first heartbeat, then one', () => {
    let now = 0;
    const silence = new WorkerSilence({ seconds: () => now }, 3);
    silence.serving();
    silence.registered('inst-1');
    // Still starting: its first heartbeat adopts what runs on the instance, beside a dozen workers starting at once.
    now = 3.5;
    expect(silence.isSilent('inst-1')).toBe(false);
    now = RECONNECT_GRACE_TIMEOUTS * 3 + 0.5;
    expect(silence.isSilent('inst-1')).toBe(true);
    // Once it heartbeats, one timeout.
    silence.heard('inst-1');
    now += 3.5;
    expect(silence.isSilent('inst-1')).toBe(true);
    // Registering again (a restarted worker) is starting again.
    silence.registered('inst-1');
    now += 3.5;
    expect(silence.isSilent('inst-1')).toBe(false);
  });

  it("does not count a stall of the controller's own loop as its workers' silence", () => {
    const clock = new ManualClock();
    let wallMs = 0;
    const attention = new AttentionClock(200, () => wallMs);
    const { inst, workers } = rig(clock, attention);
    workers.serving();
    workers.heartbeat(WORKER_TOKEN, { tasks: [] });
    // The loop is held up for 30 s (nothing samples the clock): the worker's beats wait unread in the socket.
    wallMs += 30_000;
    expect(workers.staleInstances()).toEqual([]);
    // The loop runs again, ticking; the worker stays silent: after its timeout of attention it is lost.
    for (let i = 0; i < 45; i++) {
      wallMs += 200;
      attention.sample();
    }
    expect(workers.staleInstances()).toEqual([]);
    for (let i = 0; i < 10; i++) {
      wallMs += 200;
      attention.sample();
    }
    expect(workers.staleInstances().map((i) => i.id)).toEqual([inst.id]);
  });

  it('a controller restarted again and again still replaces a dead worker: each counts on from the silence saved before it', () => {
    const clock = new ManualClock();
    const { inst: dead, workers: first, store } = rig(clock);
    const healthyToken = 'instance-token-healthy-0123456789';
    const healthy = addInstance(store, healthyToken);
    first.serving();
    first.heartbeat(WORKER_TOKEN, { tasks: [] });
    first.heartbeat(healthyToken, { tasks: [] });
    // The first worker dies; the controller saves its silence as it grows, and is killed 8 s later.
    clock.advance(8);
    first.heartbeat(healthyToken, { tasks: [] });
    first.carrySilence();
    expect(store.getValue(CARRIED_SILENCE_KEY)).toEqual({ [dead.id]: 8 });

    // Each later controller serves 4 s after a recovery that counts for nothing; it hears the healthy worker 1 s in
    // (the fleet, but for the dead worker) and counts on from there; the dead one it never hears. Without the saved
    // silence each would start from 0 and never reach the 20 s a worker not heard since the restart is given
    // (RECONNECT_GRACE_TIMEOUTS timeouts).
    const replacedIn: number[] = [];
    for (let life = 1; life <= 6 && replacedIn.length === 0; life++) {
      clock.advance(30);
      const workers = controlOver(store, clock);
      workers.serving();
      clock.advance(1);
      workers.heartbeat(healthyToken, { tasks: [] });
      clock.advance(3);
      if (workers.staleInstances().some((i) => i.id === healthy.id))
        throw new Error('healthy worker replaced');
      if (workers.staleInstances().some((i) => i.id === dead.id)) replacedIn.push(life);
      workers.carrySilence();
    }
    // 8 + 3 + 3 + 3 + 3 = 20 after four restarts, not more than the grace; past it in the fifth.
    expect(replacedIn).toEqual([5]);
    expect(RECONNECT_GRACE_TIMEOUTS * 10).toBe(20);
  });

  it('a controller that has not heard most of the fleet adds nothing to the saved silence: a crash loop in the reconnect burst replaces no healthy worker', () => {
    const clock = new ManualClock();
    const { store } = rig(clock);
    const tokens = [
      'second-instance-token-0123456789',
      'third-instance-token-01234567890',
      'fourth-instance-token-0123456789',
    ];
    const others = tokens.map((token) => addInstance(store, token));
    // Lives of 3 s, each killed while the four workers reconnect: it hears only the first (one of the three others,
    // not half). Counted from each start, the three unheard ones would pass the 20 s grace in the seventh life.
    for (let life = 1; life <= 10; life++) {
      clock.advance(5);
      const workers = controlOver(store, clock);
      workers.serving();
      clock.advance(2);
      workers.heartbeat(WORKER_TOKEN, { tasks: [] });
      clock.advance(1);
      expect(workers.staleInstances()).toEqual([]);
      workers.carrySilence();
    }
    expect(store.getValue(CARRIED_SILENCE_KEY)).toBeUndefined();

    // A life that hears the first and second workers hears the fleet (two of the three others) from the second's
    // heartbeat, 2 s in, and counts the two it has not heard from then.
    const hearsTwo = (): WorkerTaskControl => {
      const workers = controlOver(store, clock);
      workers.serving();
      clock.advance(1);
      workers.heartbeat(WORKER_TOKEN, { tasks: [] });
      clock.advance(1);
      workers.heartbeat(tokens[0] as string, { tasks: [] });
      return workers;
    };
    const unheard = [others[1]?.id as string, others[2]?.id as string].sort();
    /** `seconds` pass with the first two workers heard every second. */
    const beating = (workers: WorkerTaskControl, seconds: number): void => {
      for (let s = 0; s < seconds; s++) {
        clock.advance(1);
        workers.heartbeat(WORKER_TOKEN, { tasks: [] });
        workers.heartbeat(tokens[0] as string, { tasks: [] });
      }
    };
    const life = hearsTwo();
    beating(life, 8);
    life.carrySilence();
    expect(store.getValue(CARRIED_SILENCE_KEY)).toEqual(Object.fromEntries(unheard.map((id) => [id, 8])));
    // The next one counts on from those 8 s once it hears the fleet: past the grace 12 s later (14 s in, short of
    // its own 20 s).
    const next = hearsTwo();
    beating(next, 12);
    expect(next.staleInstances()).toEqual([]);
    clock.advance(0.5);
    expect(
      next
        .staleInstances()
        .map((i) => i.id)
        .sort(),
    ).toEqual(unheard);
  });

  it('saves nothing while every worker is heard, and forgets a worker once it is heard again', () => {
    const clock = new ManualClock();
    const { inst, workers, store } = rig(clock);
    workers.serving();
    for (let i = 0; i < 5; i++) {
      clock.advance(1);
      workers.heartbeat(WORKER_TOKEN, { tasks: [] });
      workers.carrySilence();
    }
    // Heard every heartbeat interval: nothing worth saving, nothing written.
    expect(store.getValue(CARRIED_SILENCE_KEY)).toBeUndefined();
    clock.advance(5);
    workers.carrySilence();
    expect(store.getValue(CARRIED_SILENCE_KEY)).toEqual({ [inst.id]: 5 });

    // A restart: the worker reconnects, and the silence saved for it no longer counts, nor is kept.
    const next = controlOver(store, clock);
    next.serving();
    next.heartbeat(WORKER_TOKEN, { tasks: [] });
    clock.advance(RECONNECT_GRACE_TIMEOUTS * 10 - 1);
    next.heartbeat(WORKER_TOKEN, { tasks: [] });
    next.carrySilence();
    expect(store.getValue(CARRIED_SILENCE_KEY)).toEqual({});
    expect(next.staleInstances()).toEqual([]);
  });

  it('saves in the background while it serves, until closed', async () => {
    const clock = new ManualClock();
    const { inst, workers, store } = rig(clock);
    workers.serving();
    clock.advance(4);
    await new Promise((r) => setTimeout(r, 1200));
    expect(store.getValue(CARRIED_SILENCE_KEY)).toEqual({ [inst.id]: 4 });
    workers.close();
    clock.advance(4);
    await new Promise((r) => setTimeout(r, 1200));
    expect(store.getValue(CARRIED_SILENCE_KEY)).toEqual({ [inst.id]: 4 });
  });
});
