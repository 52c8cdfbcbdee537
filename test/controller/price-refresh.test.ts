import { describe, expect, it, vi } from 'vitest';
import { SystemClock } from '../../src/controller/clock.js';
import { fixturePricingApi } from '../../src/cloud/aws/pricing-fixture.js';
import type { GetProductsPage, PricingApi } from '../../src/cloud/aws/pricing.js';
import { loadControllerConfig } from '../../src/controller/config-loading.js';
import { PriceRefresher, repriceCatalog, shouldRefreshPrices } from '../../src/controller/price-refresh.js';
import type { ControllerLogger } from '../../src/controller/seams.js';
import { EvaScheduler } from '../../src/scheduler/eva.js';
import { PRICING_FIXTURES } from '../cloud/aws/fixture-paths.js';
import type { Catalog } from '../../src/core/catalog.js';
import { catalog, CPU_SMALL, jobSpec, priceOf, rig } from './controller-fixtures.js';

const HOUR = 3600;

/**
 * The recorded GetProducts fixtures (bundled us-east-1 prices) with each type's USD rate multiplied by
 * `factorOf(type)`, or a failure while `failing` is set: the pricing seam the refresher sees.
 */
function scriptedPricing(): PricingApi & {
  calls: number;
  failing: boolean;
  factorOf: (typeName: string) => number;
} {
  const recorded = fixturePricingApi(PRICING_FIXTURES);
  const api = {
    calls: 0,
    failing: false,
    factorOf: (_typeName: string) => 1,
    async getProducts(input: Parameters<PricingApi['getProducts']>[0]): Promise<GetProductsPage> {
      api.calls++;
      if (api.failing) throw new Error('ThrottlingException: Rate exceeded');
      const page = await recorded.getProducts(input);
      const list = (page.PriceList as string[] | undefined) ?? [];
      return { ...page, PriceList: list.map((raw) => scale(raw, api.factorOf)) };
    },
  };
  return api;
}

interface RawEntry {
  product: { attributes: { instanceType: string } };
  terms: {
    OnDemand?: Record<string, { priceDimensions: Record<string, { pricePerUnit: { USD: string } }> }>;
  };
}

function scale(raw: string, factorOf: (typeName: string) => number): string {
  const entry = JSON.parse(raw) as RawEntry;
  const factor = factorOf(entry.product.attributes.instanceType);
  for (const term of Object.values(entry.terms.OnDemand ?? {}))
    for (const d of Object.values(term.priceDimensions))
      d.pricePerUnit.USD = String(Number(d.pricePerUnit.USD) * factor);
  return JSON.stringify(entry);
}

function recordingLogger(): ControllerLogger & { warnings: string[] } {
  const warnings: string[] = [];
  return { warnings, info() {}, warn: (m) => warnings.push(m), error: (m) => warnings.push(m) };
}

function c7iXlargeOf(refresher: { catalog: { types: readonly { name: string; costPerHour: number }[] } }) {
  return refresher.catalog.types.find((t) => t.name === 'c7i.xlarge')?.costPerHour;
}

describe('price refresh configuration', () => {
  const base = {
    provider: 'aws' as const,
    priceRefreshHours: 24,
    dryRun: false,
    priceRefreshInDryRun: false,
  };
  it('refreshes for aws with a positive period, not in a dry run unless asked', () => {
    expect(shouldRefreshPrices(base)).toBe(true);
    expect(shouldRefreshPrices({ ...base, priceRefreshHours: 0 })).toBe(false);
    expect(shouldRefreshPrices({ ...base, dryRun: true })).toBe(false);
    expect(shouldRefreshPrices({ ...base, dryRun: true, priceRefreshInDryRun: true })).toBe(true);
  });

  it('defaults to 24 hours and takes --price-refresh-hours', () => {
    const flags = { cluster: 'c', stateDir: '/tmp/fw' };
    expect(loadControllerConfig({ flags, env: {}, defaultRegion: 'us-east-1' }).priceRefreshHours).toBe(24);
    const off = loadControllerConfig({
      flags: { ...flags, priceRefreshHours: '0' },
      env: {},
      defaultRegion: 'us-east-1',
    });
    expect(off.priceRefreshHours).toBe(0);
    expect(() =>
      loadControllerConfig({
        flags: { ...flags, priceRefreshHours: '-1' },
        env: {},
        defaultRegion: 'us-east-1',
      }),
    ).toThrow(/--price-refresh-hours: must be 0 \(no refresh\) or from 0\.1/);
  });
});

describe('repriceCatalog', () => {
  it('replaces known prices, keeps types without one, and lists what moved', () => {
    const out = repriceCatalog(
      catalog,
      new Map([
        ['c7i.xlarge', 0.2],
        ['r7i.2xlarge', priceOf('r7i.2xlarge')],
      ]),
    );
    expect(out.catalog.types.map((t) => t.name)).toEqual(catalog.types.map((t) => t.name));
    expect(out.catalog.types.find((t) => t.name === 'c7i.xlarge')?.costPerHour).toBe(0.2);
    expect(out.changed).toEqual(['c7i.xlarge 0.1785 → 0.2']);
    expect(out.unpriced).toHaveLength(catalog.types.length - 2);
    expect(catalog.types.find((t) => t.name === 'c7i.xlarge')?.costPerHour).toBe(0.1785); // not mutated
  });

  it("keeps the current price where the list's is outside a catalog's bounds ($0.0001 to $1000 an hour)", () => {
    const out = repriceCatalog(
      catalog,
      new Map([
        ['c7i.large', 0.00005],
        ['c7i.xlarge', 1500],
        ['r7i.large', 0.0001],
      ]),
    );
    expect(out.catalog.types.find((t) => t.name === 'c7i.large')?.costPerHour).toBe(priceOf('c7i.large'));
    expect(out.catalog.types.find((t) => t.name === 'c7i.xlarge')?.costPerHour).toBe(priceOf('c7i.xlarge'));
    expect(out.catalog.types.find((t) => t.name === 'r7i.large')?.costPerHour).toBe(0.0001);
    expect(out.unpriced).toEqual(expect.arrayContaining(['c7i.large', 'c7i.xlarge']));
    expect(out.unpriced).not.toContain('r7i.large');
    expect(out.changed).toEqual([`r7i.large ${priceOf('r7i.large')} → 0.0001`]);
  });
});

describe('PriceRefresher with a controller on a manual clock', () => {
  it('applies new prices after the period, and Eva plans with them from the next round', async () => {
    const { controller, clock } = rig();
    const pricing = scriptedPricing();
    const logger = recordingLogger();
    const refresher = new PriceRefresher({
      pricing,
      regionCode: 'us-east-1',
      initial: catalog,
      clock,
      periodHours: 24,
      logger,
      apply: (c) => controller.applyCatalog(c),
    });
    refresher.start();
    await vi.waitFor(() => expect(clock.pendingSleeps).toBeGreaterThan(0));
    const callsAtStart = pricing.calls;
    expect(callsAtStart).toBe(3); // one GetProducts per family (p3, c7i, r7i), one page each
    expect(c7iXlargeOf(controller)).toBe(0.1785); // the fixture's prices are the bundled ones
    const learned = (controller.scheduler as EvaScheduler).exportState();

    // c7i.xlarge becomes 10× dearer: after the period the cheapest c7i host of [0, 4, 8] is c7i.2xlarge ($0.357/h).
    pricing.factorOf = (t) => (t === 'c7i.xlarge' ? 10 : 1);
    clock.advance(23 * HOUR);
    await Promise.resolve();
    expect(pricing.calls).toBe(callsAtStart);
    clock.advance(1 * HOUR);
    await vi.waitFor(() => expect(c7iXlargeOf(controller)).toBe(1.785));
    expect(pricing.calls).toBe(2 * callsAtStart);
    expect(controller.scheduler).toBeInstanceOf(EvaScheduler);
    expect((controller.scheduler as EvaScheduler).exportState()).toEqual(learned); // learned state carried over

    controller.submit(jobSpec('small', CPU_SMALL), 'research');
    const outcome = await controller.runRound('test');
    const launches = outcome.actions.filter((a) => a.kind === 'launch-instance');
    expect(launches).toHaveLength(1);
    expect(controller.cluster().instances.map((i) => [i.typeName, i.costPerHour])).toEqual([
      ['c7i.2xlarge', 0.357],
    ]);
    refresher.stop();
    await refresher.stopped();
    expect(logger.warnings).toEqual([]);
  });

  it('keeps the current catalog (the bundled one at first) when the Pricing API fails', async () => {
    const { controller, clock } = rig();
    const pricing = scriptedPricing();
    pricing.failing = true;
    const logger = recordingLogger();
    const refresher = new PriceRefresher({
      pricing,
      regionCode: 'us-east-1',
      initial: catalog,
      clock,
      periodHours: 24,
      logger,
      apply: (c) => controller.applyCatalog(c),
    });
    const schedulerAtStart = controller.scheduler;
    refresher.start();
    await vi.waitFor(() => expect(clock.pendingSleeps).toBeGreaterThan(0));
    expect(logger.warnings).toEqual(['price refresh failed; keeping the current catalog']);
    expect(controller.catalog).toBe(catalog);
    expect(controller.scheduler).toBe(schedulerAtStart);

    // A good refresh, then a failing one: the refreshed prices stay.
    pricing.failing = false;
    pricing.factorOf = () => 2;
    clock.advance(24 * HOUR);
    await vi.waitFor(() => expect(c7iXlargeOf(controller)).toBe(0.357));
    const refreshed = controller.catalog;
    pricing.failing = true;
    clock.advance(24 * HOUR);
    await vi.waitFor(() => expect(logger.warnings).toHaveLength(2));
    expect(controller.catalog).toBe(refreshed);
    expect(refresher.catalog).toBe(refreshed);
    // The controller keeps working.
    controller.submit(jobSpec('small', CPU_SMALL), 'research');
    expect((await controller.runRound('test')).round).toBe(1);
    refresher.stop();
    await refresher.stopped();
  });

  it('treats a price list that prices none of the catalog types as a failure', async () => {
    const pricing: PricingApi = { getProducts: () => Promise.resolve({ PriceList: [] }) };
    const applied: unknown[] = [];
    const logger = recordingLogger();
    const refresher = new PriceRefresher({
      pricing,
      regionCode: 'us-east-1',
      initial: catalog,
      clock: rig().clock,
      periodHours: 1,
      logger,
      apply: (c) => void applied.push(c),
    });
    const outcome = await refresher.refreshNow();
    expect(outcome.ok).toBe(false);
    expect(outcome.ok ? '' : outcome.error).toMatch(/priced none of the catalog's 21 types in us-east-1/);
    expect(applied).toEqual([]);
  });

  it('lays the configured price overrides over every refreshed catalog, once', async () => {
    const pricing = scriptedPricing();
    const applied: Catalog[] = [];
    const logger = recordingLogger();
    const refresher = new PriceRefresher({
      pricing,
      regionCode: 'us-east-1',
      initial: catalog,
      priceOverrides: { discountPercent: 50, spotDiscountPercent: 20, pricePerType: { 'c7i.large': 0.04 } },
      clock: rig().clock,
      periodHours: 1,
      logger,
      apply: (c) => void applied.push(c),
    });
    const spotOf = (c: Catalog) => c.spot?.offerings.find((o) => o.typeName === 'p3.2xlarge')?.pricePerHour;
    const listSpot = spotOf(catalog) as number;
    // Before any refresh the refresher holds the catalog as the controller plans with it: overridden.
    expect(c7iXlargeOf(refresher)).toBe(0.1785 * 0.5);
    pricing.factorOf = (t) => (t === 'c7i.xlarge' ? 2 : 1);
    expect((await refresher.refreshNow()).ok).toBe(true);
    pricing.factorOf = (t) => (t === 'c7i.xlarge' ? 4 : 1);
    expect((await refresher.refreshNow()).ok).toBe(true);
    expect(applied).toHaveLength(2);
    const [first, second] = applied as [Catalog, Catalog];
    expect(c7iXlargeOf({ catalog: first })).toBeCloseTo(0.357 * 0.5, 12);
    expect(c7iXlargeOf({ catalog: second })).toBeCloseTo(0.714 * 0.5, 12);
    expect(second.types.find((t) => t.name === 'c7i.large')?.costPerHour).toBe(0.04);
    // Spot prices are not refreshed: the spot discount (not the on-demand one) is taken off the list price each time,
    // not off the last result.
    expect(spotOf(first)).toBeCloseTo(listSpot * 0.8, 12);
    expect(spotOf(second)).toBeCloseTo(listSpot * 0.8, 12);
    expect(refresher.catalog).toBe(second);
    expect(logger.warnings).toEqual([]);
  });

  it('leaves out a spot override a refresh puts above its list price, and applies every other new price', async () => {
    const pricing = scriptedPricing();
    const applied: Catalog[] = [];
    const logger = recordingLogger();
    const listOf = (c: Catalog, type: string) => c.types.find((t) => t.name === type)?.costPerHour as number;
    const c7iLarge = listOf(catalog, 'c7i.large');
    const refresher = new PriceRefresher({
      pricing,
      regionCode: 'us-east-1',
      initial: catalog,
      // Just under today's list price: fine at start, above it once the list price halves.
      priceOverrides: { discountPercent: 10, spotPricePerType: { 'c7i.large': c7iLarge * 0.9 } },
      clock: rig().clock,
      periodHours: 1,
      logger,
      apply: (c) => void applied.push(c),
    });
    const spotOf = (c: Catalog) => c.spot?.offerings.find((o) => o.typeName === 'c7i.large')?.pricePerHour;
    expect(spotOf(refresher.catalog)).toBeCloseTo(c7iLarge * 0.9, 12);
    pricing.factorOf = (t) => (t === 'c7i.large' ? 0.5 : t === 'c7i.xlarge' ? 2 : 1);
    expect(await refresher.refreshNow()).toMatchObject({ ok: true });
    const [refreshed] = applied as [Catalog];
    // The other types' new prices, and the discount, reach the controller.
    expect(c7iXlargeOf({ catalog: refreshed })).toBeCloseTo(0.357 * 0.9, 12);
    expect(listOf(refreshed, 'c7i.large')).toBeCloseTo(c7iLarge * 0.5 * 0.9, 12);
    // The stale spot price is not laid over the pools: the catalog's own spot price stays.
    expect(spotOf(refreshed)).toBe(spotOf(catalog));
    expect(logger.warnings).toEqual([
      expect.stringMatching(
        /^price refresh: priceOverrides\.spotPricePerType\.c7i\.large left out until its prices allow it: .* is above c7i\.large's on-demand list price/,
      ),
    ]);
  });

  it('keeps the fleet zones after the overrides, so a spot price for a type with pools only elsewhere is no error', async () => {
    // p3.2xlarge is sold as spot only in us-east-1c; the fleet launches in us-east-1a and us-east-1b.
    const spot = catalog.spot as NonNullable<Catalog['spot']>;
    const listCatalog: Catalog = {
      ...catalog,
      spot: {
        ...spot,
        offerings: spot.offerings.filter((o) => o.typeName !== 'p3.2xlarge' || o.zone === 'us-east-1c'),
      },
    };
    const fleetZones = ['us-east-1a', 'us-east-1b'];
    const pricing = scriptedPricing();
    const applied: Catalog[] = [];
    const logger = recordingLogger();
    const refresher = new PriceRefresher({
      pricing,
      regionCode: 'us-east-1',
      initial: listCatalog,
      priceOverrides: { spotPricePerType: { 'p3.2xlarge': 0.5, 'c7i.large': 0.03 } },
      spotZones: fleetZones,
      clock: rig().clock,
      periodHours: 1,
      logger,
      apply: (c) => void applied.push(c),
    });
    const poolsOf = (c: Catalog) =>
      (c.spot?.offerings ?? []).map((o) => [o.typeName, o.zone, o.pricePerHour] as const);
    const expectPlanned = (c: Catalog): void => {
      const pools = poolsOf(c);
      expect(new Set(pools.map(([, zone]) => zone))).toEqual(new Set(fleetZones));
      expect(pools.filter(([type]) => type === 'p3.2xlarge')).toEqual([]);
      expect(pools.filter(([type]) => type === 'c7i.large')).toEqual([
        ['c7i.large', 'us-east-1a', 0.03],
        ['c7i.large', 'us-east-1b', 0.03],
      ]);
    };
    expectPlanned(refresher.catalog);
    // Each refresh reprices the catalog of every zone again, so the second succeeds as well as the first.
    pricing.factorOf = (t) => (t === 'c7i.xlarge' ? 2 : 1);
    expect(await refresher.refreshNow()).toMatchObject({ ok: true });
    pricing.factorOf = (t) => (t === 'c7i.xlarge' ? 4 : 1);
    expect(await refresher.refreshNow()).toMatchObject({ ok: true });
    expect(applied).toHaveLength(2);
    for (const c of applied) expectPlanned(c);
    expect(c7iXlargeOf({ catalog: applied[1] as Catalog })).toBeCloseTo(0.714, 12);
    expect(logger.warnings).toEqual([]);
  });
});

describe('PriceRefresher on the system clock', () => {
  it('refreshes once and then waits when its period is longer than one timer can hold', async () => {
    const pricing = scriptedPricing();
    const refresher = new PriceRefresher({
      pricing,
      regionCode: 'us-east-1',
      initial: catalog,
      clock: new SystemClock(),
      periodHours: 720, // 30 days: past setTimeout's 2^31 − 1 ms
      logger: recordingLogger(),
      apply: () => {},
    });
    refresher.start();
    try {
      await vi.waitFor(() => expect(pricing.calls).toBe(3)); // one GetProducts per family
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(pricing.calls).toBe(3);
    } finally {
      refresher.stop();
      await refresher.stopped();
    }
  });
});
