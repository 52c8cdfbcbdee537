import { describe, expect, it } from 'vitest';
import type { Catalog } from '../../src/core/catalog.js';
import type { SimInstance } from '../../src/world/entities.js';
import { interruptionRatePerHour } from '../../src/core/spot.js';
import {
  SPOT_NOTICE_SECONDS,
  SpotWorld,
  type NoticeHandling,
  type SpotEvent,
} from '../../src/world/spot-world.js';
import { testCatalog, testSpotMarket } from '../sim/sim-fixtures.js';

/** small.x on spot in one >20% pool: its instances are reclaimed, on average, about every four months. */
function catalog(): Catalog {
  return {
    ...testCatalog(),
    spot: testSpotMarket({ typeName: 'small.x', zone: 'testa', pricePerHour: 1.08, interruption: '>20%' }),
  };
}

function spotInstance(id: string, c: Catalog): SimInstance {
  const type = c.types.find((t) => t.name === 'small.x');
  if (type === undefined) throw new Error('no small.x');
  return {
    id,
    type,
    lifecycle: 'running',
    assignable: true,
    committed: new Set(),
    occupants: new Set(),
    used: [0, 0, 0],
    images: new Set(),
    billedFromSeconds: 0,
    placement: { zone: 'testa' },
    market: 'spot',
    pricePerHour: 1.08,
  };
}

/** A spot world over a recording engine: the events it schedules and the rounds it asks for. */
function world(options: {
  rebalanceShare?: number;
  falseRebalancesPerMonth?: number;
  noticeHandling?: NoticeHandling;
  burstsPerPoolPerMonth?: number;
  live?: SimInstance[];
}) {
  const c = catalog();
  const events: SpotEvent[] = [];
  let rounds = 0;
  let now = 0;
  const spot = new SpotWorld(
    c,
    {
      seed: 5,
      noticeHandling: options.noticeHandling ?? 'checkpoint-and-drain',
      rebalanceShare: options.rebalanceShare,
      falseRebalancesPerMonth: options.falseRebalancesPerMonth,
      burstsPerPoolPerMonth: options.burstsPerPoolPerMonth,
    },
    {
      get now() {
        return now;
      },
      schedule: (e) => events.push(e),
      reclaimInstance: () => undefined,
      release: () => undefined,
      touch: () => undefined,
      requestRound: () => (rounds += 1),
      callOffMove: () => false,
      stopMovesOff: () => undefined,
      drain: () => undefined,
      callOffStart: () => false,
      liveInstances: () => options.live ?? [],
    },
  );
  return {
    spot,
    events,
    rounds: () => rounds,
    at: (t: number) => (now = t),
    instance: (id: string) => spotInstance(id, c),
  };
}

describe('simulated spot market: rebalance recommendations', () => {
  it('precedes every reclaim by a recommendation at share 1, seeded, never after the notice', () => {
    const leads: number[] = [];
    for (let i = 0; i < 200; i++) {
      const w = world({ rebalanceShare: 1 });
      w.spot.onBilled(w.instance(`i${i}`));
      const byKind = new Map(w.events.map((e) => [e.kind, e.timeSeconds]));
      const reclaim = byKind.get('spot-reclaim') as number;
      const rebalance = byKind.get('spot-rebalance');
      expect(rebalance).toBeDefined();
      expect(rebalance as number).toBeGreaterThanOrEqual(0);
      expect(rebalance as number).toBeLessThanOrEqual(reclaim);
      if ((rebalance as number) > 0) leads.push(reclaim - (rebalance as number));
      // Deterministic given the seed and the instance.
      const again = world({ rebalanceShare: 1 });
      again.spot.onBilled(again.instance(`i${i}`));
      expect(again.events).toEqual(w.events);
    }
    // Leads are exponential with a mean of two hours (the rate the scheduler prices a recommendation at).
    const mean = leads.reduce((s, l) => s + l, 0) / leads.length;
    expect(mean).toBeGreaterThan(1.5 * 3600);
    expect(mean).toBeLessThan(2.5 * 3600);
    expect(Math.min(...leads)).toBeLessThan(SPOT_NOTICE_SECONDS * 10);
  });

  it('gives a recommendation before about the share of reclaims asked for, and none at share 0', () => {
    let given = 0;
    for (let i = 0; i < 400; i++) {
      const w = world({ rebalanceShare: 0.3 });
      w.spot.onBilled(w.instance(`i${i}`));
      if (w.events.some((e) => e.kind === 'spot-rebalance')) given += 1;
      const none = world({});
      none.spot.onBilled(none.instance(`i${i}`));
      expect(none.events.map((e) => e.kind).sort()).toEqual(['spot-notice', 'spot-reclaim']);
    }
    expect(given / 400).toBeGreaterThan(0.24);
    expect(given / 400).toBeLessThan(0.36);
  });

  it('gives false alarms at the rate asked for: recommendations with no reclaim soon after, and only before it', () => {
    // Per instance, the false alarm comes first when its exponential time beats the reclaim's: with probability
    // f / (f + λ) for a false-alarm rate f and the pool's reclaim rate λ (per month).
    const f = 2;
    const lambda = interruptionRatePerHour('>20%') * 24 * 30;
    let given = 0;
    const leads: number[] = [];
    for (let i = 0; i < 400; i++) {
      const w = world({ falseRebalancesPerMonth: f });
      w.spot.onBilled(w.instance(`i${i}`));
      const rebalance = w.events.find((e) => e.kind === 'spot-rebalance')?.timeSeconds;
      const reclaim = w.events.find((e) => e.kind === 'spot-reclaim')?.timeSeconds as number;
      if (rebalance === undefined) continue;
      given += 1;
      expect(rebalance).toBeLessThan(reclaim);
      leads.push(reclaim - rebalance);
      const again = world({ falseRebalancesPerMonth: f });
      again.spot.onBilled(again.instance(`i${i}`));
      expect(again.events).toEqual(w.events);
    }
    const expected = f / (f + lambda);
    expect(given / 400).toBeGreaterThan(expected - 0.06);
    expect(given / 400).toBeLessThan(expected + 0.06);
    // No reclaim follows it closely: the mean lead is weeks (the reclaim's own time), not the two hours of a true one.
    expect(leads.reduce((a, b) => a + b, 0) / leads.length).toBeGreaterThan(7 * 86_400);
  });

  it('marks the instance for the plans; fleetwise plans at once, the spot baselines (Karpenter, SkyPilot) do not', () => {
    for (const noticeHandling of ['checkpoint-and-drain', 'drain-and-evict', 'none'] as const) {
      const reacts = noticeHandling === 'checkpoint-and-drain';
      const w = world({ rebalanceShare: 1, noticeHandling });
      const inst = w.instance('i1');
      w.at(100);
      w.spot.handle({ kind: 'spot-rebalance', timeSeconds: 100, instance: inst });
      expect(inst.rebalanceRecommended).toBe(true);
      expect(w.spot.rebalanceRecommendations).toBe(1);
      expect(w.rounds()).toBe(reacts ? 1 : 0);
      // Once per instance; none for an instance already gone.
      w.spot.handle({ kind: 'spot-rebalance', timeSeconds: 100, instance: inst });
      const gone = { ...w.instance('i2'), lifecycle: 'terminated' as const };
      w.spot.handle({ kind: 'spot-rebalance', timeSeconds: 100, instance: gone });
      expect(w.spot.rebalanceRecommendations).toBe(1);
      expect(gone.rebalanceRecommended).toBeUndefined();
    }
  });

  it("warns a pool's live instances ahead of a burst, and not without a share", () => {
    const c = catalog();
    const live = [spotInstance('i1', c), spotInstance('i2', c)];
    const w = world({ rebalanceShare: 1, burstsPerPoolPerMonth: 60, live });
    w.spot.start();
    const burst = w.events.find((e) => e.kind === 'spot-burst');
    const warning = w.events.find((e) => e.kind === 'spot-burst-warning');
    expect(burst).toBeDefined();
    expect(warning?.timeSeconds).toBeLessThanOrEqual(burst?.timeSeconds as number);
    w.at(warning?.timeSeconds as number);
    w.spot.handle(warning as SpotEvent);
    expect(live.map((i) => i.rebalanceRecommended)).toEqual([true, true]);
    expect(w.rounds()).toBe(2);

    const quiet = world({ burstsPerPoolPerMonth: 60 });
    quiet.spot.start();
    expect(quiet.events.map((e) => e.kind)).toEqual(['spot-burst']);
  });
});
