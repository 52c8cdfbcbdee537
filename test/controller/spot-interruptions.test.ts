import { describe, expect, it } from 'vitest';
import type { Market } from '../../src/core/market.js';
import { UNAVAILABLE_OFFERING_SECONDS } from '../../src/core/spot.js';
import { MemoryStateStore } from '../../src/controller/memory-state-store.js';
import { silentLogger } from '../../src/controller/seams.js';
import type { EventFilter, StateStore } from '../../src/controller/state-store.js';
import {
  RECLOSE_PAGE_EVENTS,
  SpotInterruptions,
  type SpotPoolCloser,
} from '../../src/controller/spot-interruptions.js';

/**
 * A provider that records the offerings it is asked to mark (and since when, when it is told), keeping them closed
 * for `unavailableOfferingSeconds` when given.
 */
function recordingProvider(unavailableOfferingSeconds?: number) {
  const marked: (string | number)[][] = [];
  const provider: SpotPoolCloser = {
    unavailableOfferingSeconds,
    markOfferingUnavailable: (typeName: string, zone: string, market: Market, sinceSeconds?: number) =>
      marked.push(
        sinceSeconds === undefined ? [typeName, zone, market] : [typeName, zone, market, sinceSeconds],
      ),
  };
  return { provider, marked };
}

/** The controller's answer to EC2's two warnings, on a store and a provider that records the offerings it marks. */
function setup() {
  const clock = { now: 1000, nowSeconds: () => clock.now };
  const store = new MemoryStateStore({ nowSeconds: () => clock.now, storeId: 't' });
  const { provider, marked } = recordingProvider();
  const rounds: string[] = [];
  const interruptions = new SpotInterruptions({
    store,
    log: silentLogger,
    provider,
    requestRound: (reason) => rounds.push(reason),
    clock,
  });
  const running = (typeName: string, zone: string) => {
    const inst = store.createInstance({ typeName, availabilityZone: zone });
    store.setInstanceState(inst.id, 'launching', { cloudId: `i-0${inst.id}`, availabilityZone: zone });
    store.setInstanceState(inst.id, 'running');
    return inst.id;
  };
  const id = running('p3.2xlarge', 'us-east-1b');
  return { store, clock, marked, rounds, interruptions, id, running };
}

describe('spot interruptions and rebalance recommendations in the controller', () => {
  it('a rebalance recommendation is recorded once and asks for a round, but leaves the pool open to launches', () => {
    const { store, marked, rounds, interruptions, id } = setup();
    expect(interruptions.handle(id, { kind: 'rebalance-recommendation', source: 'worker' })).toBe(true);
    // Repeated in the next heartbeat: nothing changes.
    expect(interruptions.handle(id, { kind: 'rebalance-recommendation', source: 'worker' })).toBe(false);
    expect(store.listEvents({ kind: 'instance.rebalance-recommendation' })).toHaveLength(1);
    expect(rounds).toEqual([`${id} rebalance recommendation`]);
    // As Karpenter: a recommendation marks no offering (a launch moved off the pool would pay a dearer one's price).
    expect(marked).toEqual([]);
    expect(store.getInstance(id)?.state).toBe('running');
  });

  it('a spot interruption drains the instance and marks its offering unavailable for spot launches', () => {
    const { store, marked, rounds, interruptions, id } = setup();
    expect(interruptions.handle(id, { kind: 'spot-interruption', source: 'interruption-queue' })).toBe(true);
    expect(store.getInstance(id)?.state).toBe('draining');
    expect(marked).toEqual([['p3.2xlarge', 'us-east-1b', 'spot']]);
    expect(rounds).toEqual([`${id} spot interruption`]);
    expect(interruptions.handle(id, { kind: 'spot-interruption', source: 'worker' })).toBe(false);
    expect(marked).toHaveLength(1);
  });

  it('closes a pool from when EC2 gave the notice: one heard an hour late, for what is left of its window', () => {
    const { clock, marked, interruptions, id, running, store } = setup();
    clock.now = Date.UTC(2026, 11, 7, 14, 0, 0) / 1000;
    const actsAt = (secondsAgo: number): string => new Date((clock.now - secondsAgo) * 1000).toISOString();
    // A queue's message kept through an outage: EC2 warned an hour ago (and acted two minutes later).
    expect(
      interruptions.handle(id, {
        kind: 'spot-interruption',
        time: actsAt(3600 - 120),
        source: 'interruption-queue',
      }),
    ).toBe(true);
    expect(marked).toEqual([['p3.2xlarge', 'us-east-1b', 'spot', clock.now - 3600]]);
    // One already terminated, warned 30 s ago: its window counts from then too.
    const gone = running('c7i.large', 'us-east-1a');
    store.setInstanceState(gone, 'terminating');
    store.setInstanceState(gone, 'terminated');
    expect(
      interruptions.handle(gone, { kind: 'spot-interruption', time: actsAt(30 - 120), source: 'worker' }),
    ).toBe(true);
    expect(marked[1]).toEqual(['c7i.large', 'us-east-1a', 'spot', clock.now - 30]);
  });

  it('a controller started again counts a notice heard late from when EC2 gave it, as the live path does', () => {
    const { store, clock, interruptions, id, running } = setup();
    const T = Date.UTC(2026, 11, 7, 14, 0, 0) / 1000;
    const actsAt = (givenAt: number): string => new Date((givenAt + 120) * 1000).toISOString();
    // Heard at T: a notice EC2 gave 170 s before (its window open 10 s more), and one given 200 s before for another
    // pool (its window over 20 s before it was even heard).
    const other = running('c7i.large', 'us-east-1a');
    clock.now = T;
    interruptions.handle(id, {
      kind: 'spot-interruption',
      time: actsAt(T - 170),
      source: 'interruption-queue',
    });
    interruptions.handle(other, {
      kind: 'spot-interruption',
      time: actsAt(T - 200),
      source: 'interruption-queue',
    });
    clock.now = T + 5;
    const { provider, marked } = recordingProvider();
    const restarted = new SpotInterruptions({
      store,
      log: silentLogger,
      provider,
      requestRound: () => undefined,
      clock,
    });
    expect(restarted.reclosePools()).toBe(1);
    expect(marked).toEqual([['p3.2xlarge', 'us-east-1b', 'spot', T - 170]]);
  });

  it('a spot interruption of an instance already draining is recorded and marks its offering, once', () => {
    const { store, marked, rounds, interruptions, id } = setup();
    // Dropped by a plan after a rebalance recommendation: its tasks still run while their new instances boot.
    store.setInstanceState(id, 'draining', { reason: 'not in the plan' });
    expect(interruptions.handle(id, { kind: 'spot-interruption', source: 'interruption-queue' })).toBe(true);
    // The notice is what lets its tasks' checkpoint-stops go without waiting for those boots (moveStopWait).
    expect(store.listEvents({ instanceId: id, kind: 'instance.spot-interruption' })).toHaveLength(1);
    expect(store.getInstance(id)).toMatchObject({ state: 'draining', reason: 'not in the plan' });
    expect(marked).toEqual([['p3.2xlarge', 'us-east-1b', 'spot']]);
    expect(rounds).toEqual([`${id} spot interruption`]);
    // The worker's copy of the same notice changes nothing.
    expect(interruptions.handle(id, { kind: 'spot-interruption', source: 'worker' })).toBe(false);
    expect(store.listEvents({ instanceId: id, kind: 'instance.spot-interruption' })).toHaveLength(1);
    expect(marked).toHaveLength(1);
  });

  it("a controller started again closes the pools of the last minutes' notices for the rest of their windows, once", () => {
    const { store, clock, interruptions, id, running } = setup();
    // Noticed before a restart at 1,100 s: p3.2xlarge in us-east-1b at 950 s and 1,000 s (the later window is the one
    // left), c7i.large in us-east-1a at 920 s, its window over at the restart.
    const older = running('c7i.large', 'us-east-1a');
    const twin = running('p3.2xlarge', 'us-east-1b');
    clock.now = 1100 - UNAVAILABLE_OFFERING_SECONDS;
    expect(interruptions.handle(older, { kind: 'spot-interruption', source: 'worker' })).toBe(true);
    clock.now = 950;
    expect(interruptions.handle(twin, { kind: 'spot-interruption', source: 'worker' })).toBe(true);
    clock.now = 1000;
    expect(interruptions.handle(id, { kind: 'spot-interruption', source: 'interruption-queue' })).toBe(true);

    // The restart: the same store, a provider that remembers nothing.
    clock.now = 1100;
    const restarted = () => {
      const { provider, marked } = recordingProvider();
      const rounds: string[] = [];
      const spot = new SpotInterruptions({
        store,
        log: silentLogger,
        provider,
        requestRound: (reason) => rounds.push(reason),
        clock,
      });
      return { spot, marked, rounds };
    };
    // Started again, the worker's repeated notice coming before any start-up pass: it closes the pool.
    const noticeFirst = restarted();
    expect(noticeFirst.spot.handle(id, { kind: 'spot-interruption', source: 'worker' })).toBe(false);
    expect(noticeFirst.marked).toEqual([['p3.2xlarge', 'us-east-1b', 'spot', 1000]]);
    expect(noticeFirst.spot.handle(id, { kind: 'spot-interruption', source: 'worker' })).toBe(false);
    expect(noticeFirst.marked).toHaveLength(1);
    expect(store.listEvents({ kind: 'instance.spot-interruption' })).toHaveLength(3);

    // Started again: the start-up pass closes it.
    const atStart = restarted();
    expect(atStart.spot.reclosePools()).toBe(1);
    expect(atStart.marked).toEqual([['p3.2xlarge', 'us-east-1b', 'spot', 1000]]);
    // The worker repeats its notice and the queue redelivers it: the pool's window is not pushed on.
    expect(atStart.spot.handle(id, { kind: 'spot-interruption', source: 'worker' })).toBe(false);
    expect(atStart.spot.handle(id, { kind: 'spot-interruption', source: 'interruption-queue' })).toBe(false);
    expect(atStart.spot.reclosePools()).toBe(0);
    expect(atStart.marked).toHaveLength(1);
    expect(atStart.rounds).toEqual([]);

    // Started again once the window is over: nothing is closed.
    clock.now = 1000 + UNAVAILABLE_OFFERING_SECONDS;
    const late = restarted();
    expect(late.spot.reclosePools()).toBe(0);
    expect(late.marked).toEqual([]);
  });

  it('looks back as far as the provider keeps a pool closed, when that is longer than the default', () => {
    const { store, clock, interruptions, id } = setup();
    expect(interruptions.handle(id, { kind: 'spot-interruption', source: 'worker' })).toBe(true);
    // The provider keeps a pool closed for 10 minutes (ec2.capacityErrorTtlSeconds: 600).
    const restartAt = (seconds: number) => {
      clock.now = seconds;
      const { provider, marked } = recordingProvider(600);
      const spot = new SpotInterruptions({
        store,
        log: silentLogger,
        provider,
        requestRound: () => {},
        clock,
      });
      return { closed: spot.reclosePools(), marked };
    };
    // Four minutes on, past the default window: the pool stays closed for the rest of the provider's.
    expect(1240 - 1000).toBeGreaterThan(UNAVAILABLE_OFFERING_SECONDS);
    expect(restartAt(1240)).toEqual({ closed: 1, marked: [['p3.2xlarge', 'us-east-1b', 'spot', 1000]] });
    expect(restartAt(1000 + 600)).toEqual({ closed: 0, marked: [] });
  });

  it('reads the notices of the window only, however many older ones the cluster kept', () => {
    const { store, clock, interruptions, running } = setup();
    const notice = (zone: string) =>
      interruptions.handle(running('c7i.large', zone), { kind: 'spot-interruption', source: 'worker' });
    // 300 notices long past, then more notices inside the window than one read takes, each in a pool of its own.
    for (let i = 0; i < 300; i += 1) expect(notice(`old-${i}`)).toBe(true);
    clock.now = 5000;
    const recent = RECLOSE_PAGE_EVENTS + 10;
    for (let i = 0; i < recent; i += 1) expect(notice(`new-${i}`)).toBe(true);

    clock.now = 5100;
    const reads: { filter: EventFilter | undefined; returned: number }[] = [];
    const observed = new Proxy(store, {
      get(target, prop, receiver) {
        if (prop !== 'listEvents') return Reflect.get(target, prop, receiver) as unknown;
        return (filter?: EventFilter) => {
          const events = target.listEvents(filter);
          reads.push({ filter, returned: events.length });
          return events;
        };
      },
    }) as StateStore;
    const { provider, marked } = recordingProvider();
    const spot = new SpotInterruptions({
      store: observed,
      log: silentLogger,
      provider,
      requestRound: () => {},
      clock,
    });
    expect(spot.reclosePools()).toBe(recent);
    expect(new Set(marked.map((m) => m[1]))).toEqual(
      new Set(Array.from({ length: recent }, (_, i) => `new-${i}`)),
    );
    // Every read is bounded, and together they read a few pages, not the 300 older notices.
    expect(reads.length).toBeGreaterThan(0);
    for (const r of reads) expect(r.filter?.limit).toBeGreaterThan(0);
    expect(reads.reduce((n, r) => n + r.returned, 0)).toBeLessThanOrEqual(4 * recent);
  });
});
