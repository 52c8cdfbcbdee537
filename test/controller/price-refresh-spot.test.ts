/**
 * What a price refresh hands the controller stays a catalog a file could hold: a spot pool the new on-demand list
 * price passes is priced at it (EC2 sells spot at most at on demand) and gets its own price back once the list price
 * allows it. The refresh's log of moved prices speaks of the prices the controller plans with, overrides applied.
 */
import { describe, expect, it } from 'vitest';
import { fixturePricingApi } from '../../src/cloud/aws/pricing-fixture.js';
import type { GetProductsPage, PricingApi } from '../../src/cloud/aws/pricing.js';
import { loadCatalogFile } from '../../src/cloud/catalog-file.js';
import type { Clock } from '../../src/controller/clock.js';
import { PriceRefresher, type PriceRefresherDeps } from '../../src/controller/price-refresh.js';
import type { ControllerLogger } from '../../src/controller/seams.js';
import { launchedOnSpot } from '../../src/controller/instance-market.js';
import { catalogToFile, parseCatalog, type Catalog } from '../../src/core/catalog.js';
import { schedulerCaps } from '../../src/round/plan-caps.js';
import { PRICING_FIXTURES } from '../cloud/aws/fixture-paths.js';
import { jobSpec, liveRecords, rig } from './controller-fixtures.js';

/** The bundled catalog: its spot pools of c7i.large cost $0.040 to $0.044/h, its on-demand price $0.08925/h. */
const bundled = loadCatalogFile();

/** The recorded GetProducts answers (the bundled prices) with each type's rate multiplied by `factorOf(type)`. */
function scaledPricing(factorOf: (typeName: string) => number): PricingApi {
  const recorded = fixturePricingApi(PRICING_FIXTURES);
  return {
    async getProducts(input): Promise<GetProductsPage> {
      const page = await recorded.getProducts(input);
      const list = (page.PriceList as string[] | undefined) ?? [];
      return { ...page, PriceList: list.map((raw) => scaled(raw, factorOf)) };
    },
  };
}

interface RawEntry {
  product: { attributes: { instanceType: string } };
  terms: {
    OnDemand?: Record<string, { priceDimensions: Record<string, { pricePerUnit: { USD: string } }> }>;
  };
}

function scaled(raw: string, factorOf: (typeName: string) => number): string {
  const entry = JSON.parse(raw) as RawEntry;
  const factor = factorOf(entry.product.attributes.instanceType);
  for (const term of Object.values(entry.terms.OnDemand ?? {}))
    for (const d of Object.values(term.priceDimensions))
      d.pricePerUnit.USD = String(Number(d.pricePerUnit.USD) * factor);
  return JSON.stringify(entry);
}

interface LogLine {
  readonly level: 'info' | 'warn' | 'error';
  readonly message: string;
  readonly data: Record<string, unknown> | undefined;
}

function recordingLogger(): ControllerLogger & { lines: LogLine[] } {
  const lines: LogLine[] = [];
  return {
    lines,
    info: (message, data) => void lines.push({ level: 'info', message, data }),
    warn: (message, data) => void lines.push({ level: 'warn', message, data }),
    error: (message, data) => void lines.push({ level: 'error', message, data }),
  };
}

/** refreshNow is driven by hand here: the loop and its clock never run. */
const idleClock: Clock = { nowSeconds: () => 0, sleep: () => Promise.resolve() };

function refresher(
  factor: { of: (typeName: string) => number },
  more: Partial<PriceRefresherDeps> = {},
): { refresher: PriceRefresher; applied: Catalog[]; logger: ReturnType<typeof recordingLogger> } {
  const applied: Catalog[] = [];
  const logger = recordingLogger();
  const r = new PriceRefresher({
    pricing: scaledPricing((t) => factor.of(t)),
    regionCode: 'us-east-1',
    initial: bundled,
    clock: idleClock,
    periodHours: 24,
    logger,
    apply: (c) => void applied.push(c),
    ...more,
  });
  return { refresher: r, applied, logger };
}

const poolsOf = (c: Catalog, type: string) =>
  (c.spot?.offerings ?? []).filter((o) => o.typeName === type).map((o) => [o.zone, o.pricePerHour] as const);
const onDemandOf = (c: Catalog, type: string) => c.types.find((t) => t.name === type)?.costPerHour;

describe('a price refresh and the spot pools', () => {
  it('prices a pool the new on-demand price passes at that price, says which, and gives its own back later', async () => {
    const listPools = poolsOf(bundled, 'c7i.large');
    expect(listPools).toHaveLength(3);
    const factor = { of: (t: string) => (t === 'c7i.large' ? 0.25 : 1) }; // $0.0223/h: under every pool's price
    const { refresher: r, applied, logger } = refresher(factor);

    expect(await r.refreshNow()).toMatchObject({ ok: true });
    const [lowered] = applied as [Catalog];
    const onDemand = onDemandOf(lowered, 'c7i.large') as number;
    expect(onDemand).toBeCloseTo(0.0223125, 10);
    expect(poolsOf(lowered, 'c7i.large')).toEqual(listPools.map(([zone]) => [zone, onDemand]));
    // Every other pool keeps its price, and the catalog is one a file could hold.
    const others = (c: Catalog) => c.spot?.offerings.filter((o) => o.typeName !== 'c7i.large');
    expect(others(lowered)).toEqual(others(bundled));
    expect(() => parseCatalog(catalogToFile(lowered), 'refreshed catalog')).not.toThrow();
    expect(logger.lines.filter((l) => l.level === 'warn')).toEqual([
      {
        level: 'warn',
        message: expect.stringMatching(/^price refresh: spot pools above their type's new on-demand price/),
        data: { pools: listPools.map(([zone, price]) => `c7i.large in ${zone} ${price} → ${onDemand}`) },
      },
    ]);

    // The list price comes back: so do the pools' own prices.
    factor.of = () => 1;
    expect(await r.refreshNow()).toMatchObject({ ok: true });
    expect(poolsOf(applied[1] as Catalog, 'c7i.large')).toEqual(listPools);
    expect(logger.lines.filter((l) => l.level === 'warn')).toHaveLength(1);
  });

  it('bills and caps a running spot instance at no more than its new on-demand price, round after round', async () => {
    const { controller, store } = rig(
      { caps: { maxCostPerHour: 5 } },
      {
        spotMarket: true,
        schedulerRecipe: { kind: 'eva', options: { caps: schedulerCaps({ maxCostPerHour: 5 }), spot: true } },
      },
    );
    const demand = { c7i: [0, 2, 4] as [number, number, number] }; // a c7i.large each
    const submit = (name: string) =>
      controller.submit(
        { ...jobSpec(name, demand, { expectedDurationSeconds: 36_000 }), spot: 'preferred' },
        'research',
      );
    submit('a');
    submit('b');
    await controller.runRound('submitted');
    await controller.runRound('period');
    const onSpot = liveRecords(store).filter((i) => launchedOnSpot(store, i.id));
    expect(onSpot.map((i) => i.typeName)).toEqual(['c7i.large', 'c7i.large']);
    const before = controller.cluster().costPerHour;

    const factor = { of: (t: string) => (t === 'c7i.large' ? 0.25 : 1) };
    const { refresher: r } = refresher(factor, { apply: (c) => controller.applyCatalog(c) });
    expect(await r.refreshNow()).toMatchObject({ ok: true });
    // Each is billed at the new on-demand price, under its pool's snapshot price.
    const cap = 0.0223125;
    expect(controller.cluster().costPerHour).toBeCloseTo(onSpot.length * cap, 9);
    expect(controller.cluster().costPerHour).toBeLessThan(before);
    // Rounds under the cap go on with the pools in place.
    submit('c');
    expect((await controller.runRound('submitted')).round).toBeGreaterThan(2);
    await controller.runRound('period');
    expect(liveRecords(store).filter((i) => launchedOnSpot(store, i.id)).length).toBeGreaterThanOrEqual(2);
  });
});

describe("the 'prices refreshed' log", () => {
  const changedOf = (logger: ReturnType<typeof recordingLogger>) =>
    logger.lines.filter((l) => l.message === 'prices refreshed').map((l) => l.data?.changed);

  it('lists the prices the controller plans with: an overridden type whose list price moved is not among them', async () => {
    const factor = { of: (t: string) => (t === 'c7i.large' ? 0.9 : t === 'c7i.xlarge' ? 2 : 1) };
    const { refresher: r, logger } = refresher(factor, {
      priceOverrides: { discountPercent: 50, pricePerType: { 'c7i.large': 0.056 } },
    });
    const outcome = await r.refreshNow();
    // c7i.large keeps its reserved price; c7i.xlarge moves from half its list price to half the new one.
    expect(outcome).toMatchObject({ ok: true, changed: ['c7i.xlarge 0.08925 → 0.1785'] });
    expect(changedOf(logger)).toEqual([['c7i.xlarge 0.08925 → 0.1785']]);
    // A second refresh at the same prices moved nothing.
    expect(await r.refreshNow()).toMatchObject({ ok: true, changed: [] });
    expect(changedOf(logger)).toEqual([['c7i.xlarge 0.08925 → 0.1785'], []]);
  });
});
