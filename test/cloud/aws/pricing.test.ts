import type { GetProductsCommandInput } from '@aws-sdk/client-pricing';
import { describe, expect, it } from 'vitest';
import { catalogToFile, parseCatalog, type Catalog } from '../../../src/core/catalog.js';
import type { Resources } from '../../../src/core/resources.js';
import { ValidationError } from '../../../src/core/validation.js';
import { loadCatalogFile } from '../../../src/cloud/catalog-file.js';
import {
  buildCatalog,
  fetchOnDemandPrices,
  listedCapacity,
  medianDelays,
  onDemandLinuxFilters,
  parsePriceListEntry,
  type GetProductsPage,
  type OnDemandPrice,
  type PricingApi,
} from '../../../src/cloud/aws/pricing.js';
import { fixturePricingApi } from '../../../src/cloud/aws/pricing-fixture.js';
import { PRICING_FIXTURES } from './fixture-paths.js';

const FAMILIES = ['p3', 'c7i', 'r7i'];
const bundled: Catalog = loadCatalogFile();

/** Every entry of the fixtures, whatever the filters: an API that ignores them. */
function unfilteredApi(): PricingApi {
  const all = fixturePricingApi(PRICING_FIXTURES);
  return {
    getProducts: (input: GetProductsCommandInput): Promise<GetProductsPage> =>
      all.getProducts({ ServiceCode: input.ServiceCode, MaxResults: 1000 }),
  };
}

describe('fetchOnDemandPrices from recorded GetProducts responses', () => {
  it('reads the exact on-demand Linux price of every bundled type, and the new metal sizes', async () => {
    const warnings: string[] = [];
    const prices = await fetchOnDemandPrices(
      fixturePricingApi(PRICING_FIXTURES),
      'us-east-1',
      FAMILIES,
      warnings,
    );
    expect(warnings).toEqual([]);
    for (const t of bundled.types)
      expect([t.name, prices.get(t.name)?.costPerHour]).toEqual([t.name, t.costPerHour]);
    expect(prices.get('c7i.metal-24xl')?.costPerHour).toBe(4.284);
    expect(prices.get('r7i.metal-48xl')?.costPerHour).toBe(12.7008);
    expect(prices.size).toBe(21 + 4);
    // The decoys are filtered out: Windows 3.428 and the reserved rate 1.989 for p3.2xlarge, SQL Web 0.12925,
    // the $0 reservation row and Frankfurt's 0.1026 for c7i.large, Dedicated 0.1456 for r7i.large, and c7i-flex.
    expect(prices.get('p3.2xlarge')?.costPerHour).toBe(3.06);
    expect(prices.get('c7i.large')?.costPerHour).toBe(0.08925);
    expect(prices.get('r7i.large')?.costPerHour).toBe(0.1323);
    expect(prices.has('c7i-flex.large')).toBe(false);
  });

  it('sends the filters that single out one product per type, per family', async () => {
    const inputs: GetProductsCommandInput[] = [];
    const fixtures = fixturePricingApi(PRICING_FIXTURES);
    await fetchOnDemandPrices(
      { getProducts: (input) => (inputs.push(input), fixtures.getProducts(input)) },
      'us-east-1',
      ['c7i'],
      [],
    );
    expect(inputs).toHaveLength(1);
    expect(inputs[0]).toEqual({
      ServiceCode: 'AmazonEC2',
      FormatVersion: 'aws_v1',
      MaxResults: 100,
      Filters: [
        { Type: 'TERM_MATCH', Field: 'regionCode', Value: 'us-east-1' },
        { Type: 'TERM_MATCH', Field: 'operatingSystem', Value: 'Linux' },
        { Type: 'TERM_MATCH', Field: 'tenancy', Value: 'Shared' },
        { Type: 'TERM_MATCH', Field: 'preInstalledSw', Value: 'NA' },
        { Type: 'TERM_MATCH', Field: 'capacitystatus', Value: 'Used' },
        { Type: 'CONTAINS', Field: 'instanceType', Value: 'c7i.' },
      ],
    });
    expect(onDemandLinuxFilters('eu-west-1', 'p3')[0]).toEqual({
      Type: 'TERM_MATCH',
      Field: 'regionCode',
      Value: 'eu-west-1',
    });
  });

  it('follows NextToken across pages', async () => {
    const paged = fixturePricingApi(PRICING_FIXTURES, { maxPageSize: 2 });
    const prices = await fetchOnDemandPrices(paged, 'us-east-1', FAMILIES, []);
    expect(prices.size).toBe(25);
    // p3: 3 entries → 2 pages; c7i: 11 → 6; r7i: 11 → 6.
    expect(paged.calls).toBe(2 + 6 + 6);
  });

  it('re-checks attributes, so entries an API failed to filter cannot slip in a wrong price', async () => {
    const warnings: string[] = [];
    const prices = await fetchOnDemandPrices(unfilteredApi(), 'us-east-1', FAMILIES, warnings);
    expect(prices.get('p3.2xlarge')?.costPerHour).toBe(3.06);
    expect(prices.get('c7i.large')?.costPerHour).toBe(0.08925);
    expect(prices.get('r7i.large')?.costPerHour).toBe(0.1323);
    expect(prices.has('c7i-flex.large')).toBe(false);
    expect(warnings).toEqual(
      expect.arrayContaining([
        'p3.2xlarge: skipped a price list entry with operatingSystem=Windows (expected Linux)',
        'c7i.large: skipped a price list entry with capacitystatus=UnusedCapacityReservation (expected Used)',
        'c7i.large: skipped a price list entry with capacitystatus=AllocatedCapacityReservation (expected Used)',
        'c7i.large: skipped a price list entry with preInstalledSw=SQL Web (expected NA)',
        'c7i.large: skipped a price list entry with regionCode=eu-central-1 (expected us-east-1)',
        'r7i.large: skipped a price list entry with tenancy=Dedicated (expected Shared)',
      ]),
    );
  });

  it('reads capacity from the price list attributes ("244 GiB", gpu "4")', async () => {
    const page = await fixturePricingApi(PRICING_FIXTURES).getProducts({
      ServiceCode: 'AmazonEC2',
      Filters: [
        { Type: 'TERM_MATCH', Field: 'instanceType', Value: 'p3.8xlarge' },
        ...onDemandLinuxFilters('us-east-1', 'p3'),
      ],
    });
    const entries = page.PriceList as string[];
    expect(entries).toHaveLength(1);
    const entry = parsePriceListEntry(entries[0], 'p3.8xlarge');
    expect(listedCapacity(entry)).toEqual([4, 32, 244]);
  });

  it('names the entry and the field when a price list entry is malformed', () => {
    expect(() => parsePriceListEntry('{"product": ', 'page 1 PriceList[3]')).toThrow(
      /page 1 PriceList\[3\]: not valid JSON/,
    );
    const error = (() => {
      try {
        parsePriceListEntry(
          JSON.stringify({ product: { attributes: {} }, terms: {} }),
          'page 2 PriceList[0]',
        );
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(error).toBeInstanceOf(ValidationError);
    expect((error as ValidationError).problems.join('\n')).toMatch(/product\.attributes\.instanceType/);
  });
});

/** The parts of a recorded price list entry these tests change. */
interface EditableEntry {
  product: { sku?: string; attributes: Record<string, string> };
  terms: {
    OnDemand?: Record<string, { priceDimensions: Record<string, { pricePerUnit: Record<string, string> }> }>;
  };
}

/** The recorded fixtures, each page's entries (after the filters) passed through `edit`. */
function editedPricing(edit: (entries: EditableEntry[]) => EditableEntry[]): PricingApi {
  const recorded = fixturePricingApi(PRICING_FIXTURES);
  return {
    async getProducts(input: GetProductsCommandInput): Promise<GetProductsPage> {
      const page = await recorded.getProducts(input);
      const entries = ((page.PriceList as string[] | undefined) ?? []).map(
        (raw) => JSON.parse(raw) as EditableEntry,
      );
      return { ...page, PriceList: edit(entries).map((e) => JSON.stringify(e)) };
    },
  };
}

/** A copy of `entry` with every hourly rate `usd`, and the product fields given. */
function variantOf(
  entry: EditableEntry,
  usd: string,
  product: { sku?: string; operation?: string } = {},
): EditableEntry {
  const copy = structuredClone(entry);
  for (const term of Object.values(copy.terms.OnDemand ?? {}))
    for (const dimension of Object.values(term.priceDimensions)) dimension.pricePerUnit = { USD: usd };
  if (product.sku !== undefined) copy.product.sku = product.sku;
  if (product.operation !== undefined) copy.product.attributes.operation = product.operation;
  return copy;
}

describe('fetchOnDemandPrices with list prices a catalog cannot hold', () => {
  it('leaves out, naming each type, a price outside the bounds or not written as a decimal; the rest loads', async () => {
    const odd: Record<string, string> = {
      'c7i.large': '5000.0000000000',
      'c7i.xlarge': '0.0000100000',
      'c7i.2xlarge': '0.0000000000',
      'r7i.large': '0x1', // Number() reads 1
      'r7i.xlarge': '2e-1', // Number() reads 0.2
    };
    const warnings: string[] = [];
    const prices = await fetchOnDemandPrices(
      editedPricing((entries) =>
        entries.map((e) => {
          const usd = odd[e.product.attributes.instanceType ?? ''];
          return usd === undefined ? e : variantOf(e, usd);
        }),
      ),
      'us-east-1',
      FAMILIES,
      warnings,
    );
    expect(warnings).toEqual([
      'c7i.large: on-demand price $5000/h left out: must be at most $1000/h (no EC2 instance costs that much)',
      'c7i.xlarge: on-demand price $0.00001/h left out: must be at least $0.0001/h (a price of 0 is no price)',
      'c7i.2xlarge: on-demand price $0/h left out: must be at least $0.0001/h (a price of 0 is no price)',
      'r7i.large: no on-demand hourly USD rate written as a decimal in its price list entry; left out',
      'r7i.xlarge: no on-demand hourly USD rate written as a decimal in its price list entry; left out',
    ]);
    for (const name of Object.keys(odd)) expect([name, prices.has(name)]).toEqual([name, false]);
    expect(prices.size).toBe(25 - 5);
    expect(prices.get('c7i.4xlarge')?.costPerHour).toBe(0.714);
    // What `catalog refresh` builds from the rest loads again: the odd prices cannot fail the whole refresh.
    const { catalog } = buildCatalog({
      region: 'us-east-1',
      families: FAMILIES,
      prices,
      capacities: new Map(),
      base: bundled,
    });
    expect(parseCatalog(catalogToFile(catalog), 'refreshed catalog').types).toHaveLength(20);
  });

  it('keeps the same product for a type whatever order two matching products come in', async () => {
    /** c7i.large as fetched with `extra` listed first or last. */
    const c7iLarge = async (extra: (plain: EditableEntry) => EditableEntry, first: boolean) => {
      const warnings: string[] = [];
      const prices = await fetchOnDemandPrices(
        editedPricing((entries) => {
          const plain = entries.find((e) => e.product.attributes.instanceType === 'c7i.large');
          if (plain === undefined) return entries;
          return first ? [extra(plain), ...entries] : [...entries, extra(plain)];
        }),
        'us-east-1',
        ['c7i'],
        warnings,
      );
      const kept = prices.get('c7i.large');
      return { costPerHour: kept?.costPerHour, sku: kept?.sku, warnings };
    };
    const cases: [string, (plain: EditableEntry) => EditableEntry, number, string][] = [
      // Both RunInstances: the lower price.
      [
        'dearer',
        (p) => variantOf(p, '0.2000000000', { sku: 'AAAADEARER000000' }),
        0.08925,
        'DT7AYTDSVYL5U3MX',
      ],
      // RunInstances before a cheaper other operation.
      [
        'other operation',
        (p) => variantOf(p, '0.0500000000', { sku: 'AAAAOTHEROP00000', operation: 'RunInstances:0004' }),
        0.08925,
        'DT7AYTDSVYL5U3MX',
      ],
      // The same price: the lower SKU.
      [
        'same price',
        (p) => variantOf(p, '0.0892500000', { sku: 'AAAASAMEPRICE000' }),
        0.08925,
        'AAAASAMEPRICE000',
      ],
    ];
    for (const [label, extra, costPerHour, sku] of cases) {
      const first = await c7iLarge(extra, true);
      const last = await c7iLarge(extra, false);
      expect([label, first.costPerHour, first.sku]).toEqual([label, costPerHour, sku]);
      expect([label, last.costPerHour, last.sku]).toEqual([label, costPerHour, sku]);
      expect([label, first.warnings]).toEqual([label, last.warnings]);
    }
    expect((await c7iLarge(cases[0]![1], true)).warnings).toEqual([
      'c7i.large: two products priced it; ignored 0.2 (SKU AAAADEARER000000, operation RunInstances) and kept ' +
        '0.08925 (SKU DT7AYTDSVYL5U3MX, operation RunInstances)',
    ]);
  });
});

function price(typeName: string, costPerHour: number, capacity?: Resources): OnDemandPrice {
  return { typeName, costPerHour, sku: undefined, listedCapacity: capacity, operation: 'RunInstances' };
}

describe('buildCatalog', () => {
  const c7iLarge = bundled.types.find((t) => t.name === 'c7i.large');

  it('keeps known delays, gives new sizes their family median, and falls back for capacities with warnings', () => {
    const { catalog, warnings } = buildCatalog({
      region: 'us-east-1',
      families: ['p3', 'c7i', 'r7i'],
      prices: new Map([
        ['c7i.large', price('c7i.large', 0.08925)],
        ['c7i.metal-24xl', price('c7i.metal-24xl', 4.284)],
        ['r7i.metal-24xl', price('r7i.metal-24xl', 6.3504)],
        ['p3.2xlarge', price('p3.2xlarge', 3.06)],
      ]),
      capacities: new Map<string, Resources>([
        ['c7i.large', [0, 2, 4]],
        ['c7i.metal-24xl', [0, 96, 192]],
        ['r7i.metal-24xl', [0, 96, 768]],
        ['c7i.xlarge', [0, 4, 8]], // described but not priced
      ]),
      base: bundled,
    });
    expect(catalog.types.map((t) => t.name)).toEqual([
      'p3.2xlarge',
      'c7i.large',
      'c7i.metal-24xl',
      'r7i.metal-24xl',
    ]);
    expect(catalog.types[1]?.delays).toEqual(c7iLarge?.delays);
    // Medians over the bundled catalog's nine c7i sizes: instantiate 7 s, worker start 62 s (of 58 58 59 59 62 67 71
    // 83 98), register 84 s (of 65 66 78 83 84 84 85 85 87), terminate 1 s.
    expect(catalog.types[2]?.delays).toEqual({
      instantiateSeconds: 7,
      workerStartSeconds: 62,
      workerRegisterSeconds: 84,
      terminateSeconds: 1,
    });
    // r7i: start 59 s (of 53 55 55 58 59 60 60 62 73), register 88 s (of 77 86 87 87 88 90 90 98 103).
    expect(catalog.types[3]?.delays).toEqual({
      instantiateSeconds: 7,
      workerStartSeconds: 59,
      workerRegisterSeconds: 88,
      terminateSeconds: 1,
    });
    expect(catalog.types[0]?.capacity).toEqual([1, 8, 61]);
    expect(warnings.slice(0, 2)).toEqual([
      'p3.2xlarge: DescribeInstanceTypes in us-east-1 did not describe it (moto, for one, lacks p3 types); capacity [1, 8, 61] taken from the base catalog',
      'c7i.xlarge: no on-demand Linux price in us-east-1; left out',
    ]);
    // Every other bundled type of these families came back from neither source.
    const seen = new Set(['c7i.large', 'p3.2xlarge', 'c7i.xlarge']);
    expect(warnings.slice(2)).toEqual(
      bundled.types
        .filter((t) => !seen.has(t.name))
        .map(
          (t) =>
            `${t.name}: in the base catalog but neither priced nor described by DescribeInstanceTypes in us-east-1; left out`,
        ),
    );
  });

  it('names a base catalog type of a requested family that neither prices nor capacities cover', () => {
    const p3 = bundled.types.filter((t) => t.family === 'p3');
    expect(p3.map((t) => t.name)).toEqual(['p3.2xlarge', 'p3.8xlarge', 'p3.16xlarge']);
    const { catalog, warnings } = buildCatalog({
      region: 'us-east-1',
      families: ['p3'],
      // p3.8xlarge is not sold here: no price; and no capacity (DescribeInstanceTypes lists only offered types).
      prices: new Map([
        ['p3.2xlarge', price('p3.2xlarge', 3.06)],
        ['p3.16xlarge', price('p3.16xlarge', 24.48)],
      ]),
      capacities: new Map<string, Resources>([
        ['p3.2xlarge', [1, 8, 61]],
        ['p3.16xlarge', [8, 64, 488]],
        ['c7i.large', [0, 2, 4]], // a family not asked for: no word about the c7i types
      ]),
      base: bundled,
    });
    expect(catalog.types.map((t) => t.name)).toEqual(['p3.2xlarge', 'p3.16xlarge']);
    expect(warnings).toEqual([
      'p3.8xlarge: in the base catalog but neither priced nor described by DescribeInstanceTypes in us-east-1; left out',
    ]);
  });

  it('takes capacity from the price list for a type nobody describes, and the global median for a new family', () => {
    const { catalog, warnings } = buildCatalog({
      region: 'us-east-1',
      families: ['g5'],
      prices: new Map([['g5.xlarge', price('g5.xlarge', 1.006, [1, 4, 16])]]),
      capacities: new Map(),
      base: bundled,
    });
    expect(catalog.types).toHaveLength(1);
    expect(catalog.types[0]?.capacity).toEqual([1, 4, 16]);
    expect(catalog.types[0]?.delays).toEqual(medianDelays(bundled.types));
    expect(warnings).toHaveLength(2);
    expect(warnings[1]).toMatch(/no g5 type in the base catalog/);
  });

  it('refuses to build an empty catalog', () => {
    expect(() =>
      buildCatalog({
        region: 'us-east-1',
        families: ['c7i'],
        prices: new Map(),
        capacities: new Map(),
        base: bundled,
      }),
    ).toThrow(/no priced instance types for families c7i/);
  });

  it("keeps the base catalog's cross-zone traffic price, as it keeps launch delays", () => {
    const input = {
      region: 'us-east-1',
      families: ['c7i'],
      prices: new Map([['c7i.large', price('c7i.large', 0.08925)]]),
      capacities: new Map<string, Resources>([['c7i.large', [0, 2, 4]]]),
    };
    expect(
      buildCatalog({ ...input, base: { ...bundled, crossZonePricePerGiB: 0.02 } }).catalog
        .crossZonePricePerGiB,
    ).toBe(0.02);
    expect('crossZonePricePerGiB' in buildCatalog({ ...input, base: bundled }).catalog).toBe(false);
  });

  it('refuses a family asked for that came back with no priced type, naming each', () => {
    const build = () =>
      buildCatalog({
        region: 'us-east-1',
        families: ['c7i', 'c7x', 'r7'],
        prices: new Map([['c7i.large', price('c7i.large', 0.08925)]]),
        capacities: new Map<string, Resources>([['c7i.large', [0, 2, 4]]]),
        base: bundled,
        familiesSource: '--families',
      });
    expect(build).toThrow(ValidationError);
    try {
      build();
    } catch (e) {
      expect((e as ValidationError).source).toBe('--families');
      expect((e as ValidationError).problems).toEqual([
        'c7x: no c7x instance type has an on-demand Linux price in us-east-1 (a family name like c7i; leave out families the region does not sell)',
        'r7: no r7 instance type has an on-demand Linux price in us-east-1 (a family name like c7i; leave out families the region does not sell)',
      ]);
    }
  });

  it('takes the mean of the middle two for an even count', () => {
    const two = bundled.types.filter((t) => t.name === 'p3.2xlarge' || t.name === 'p3.8xlarge');
    // instantiate 22 and 37 → 29.5; worker start 51 and 60 → 55.5; register 100 and 132 → 116.
    expect(medianDelays(two)).toEqual({
      instantiateSeconds: 29.5,
      workerStartSeconds: 55.5,
      workerRegisterSeconds: 116,
      terminateSeconds: 1,
    });
  });
});
