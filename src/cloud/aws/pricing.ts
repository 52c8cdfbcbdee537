import type { Filter, GetProductsCommandInput } from '@aws-sdk/client-pricing';
import { z } from 'zod';
import type { Catalog, InstanceType, LaunchDelays } from '../../core/catalog.js';
import { pricePerHour } from '../../core/price-per-hour.js';
import type { Resources } from '../../core/resources.js';
import { describeIssues, ValidationError } from '../../core/validation.js';
import type { Ec2Api } from './ec2-api.js';

/**
 * Catalog refresh: on-demand prices from the AWS Price List API (GetProducts), capacities from EC2
 * DescribeInstanceTypes, launch delays kept from the bundled catalog (they come from Eva's measurements, research
 * digest §7; AWS publishes nothing like them).
 */

/** The Price List API is served from a few regions only; us-east-1 answers for every EC2 region. */
export const PRICING_API_REGION = 'us-east-1';
const PAGE_SIZE = 100;

export interface GetProductsPage {
  /**
   * One JSON document per product: primitive strings from recorded responses, String objects (its LazyJsonString)
   * from the AWS SDK client, parsed objects from a test double.
   */
  readonly PriceList?: unknown;
  readonly NextToken?: string | undefined;
}

/** The one Pricing call we make: the seam where tests serve recorded GetProducts responses. */
export interface PricingApi {
  getProducts(input: GetProductsCommandInput): Promise<GetProductsPage>;
}

/** The attribute values that single out the plain on-demand Linux price of a type (one product per type). */
function expectedAttributes(regionCode: string): Record<string, string> {
  return {
    regionCode,
    operatingSystem: 'Linux',
    tenancy: 'Shared', // not Dedicated or Host
    preInstalledSw: 'NA', // not SQL Server
    capacitystatus: 'Used', // not the capacity-reservation rows (UnusedCapacityReservation, AllocatedCapacityReservation)
  };
}

/** GetProducts filters for one family's on-demand Linux prices in a region. */
export function onDemandLinuxFilters(regionCode: string, family: string): Filter[] {
  return [
    ...Object.entries(expectedAttributes(regionCode)).map(([Field, Value]) => ({
      Type: 'TERM_MATCH' as const,
      Field,
      Value,
    })),
    // "p3." matches p3.2xlarge but not p3dn.24xlarge; entries are re-checked for the exact family below.
    { Type: 'CONTAINS', Field: 'instanceType', Value: `${family}.` },
  ];
}

const priceDimensionSchema = z.object({
  unit: z.string(),
  beginRange: z.string().optional(),
  pricePerUnit: z.record(z.string(), z.string()),
});

const priceListEntrySchema = z.object({
  product: z.object({
    sku: z.string().optional(),
    attributes: z
      .object({
        instanceType: z.string().min(1),
        operation: z.string().optional(),
        vcpu: z.string().optional(),
        memory: z.string().optional(),
        gpu: z.string().optional(),
      })
      .catchall(z.string()),
  }),
  terms: z.object({
    OnDemand: z
      .record(z.string(), z.object({ priceDimensions: z.record(z.string(), priceDimensionSchema) }))
      .optional(),
  }),
});
export type PriceListEntry = z.output<typeof priceListEntrySchema>;

/**
 * Parse one PriceList element (a JSON string on the wire; the SDK hands it back as a String object, typeof 'object',
 * which must be read as its text, not as the entry). `source` names it in errors.
 */
export function parsePriceListEntry(raw: unknown, source: string): PriceListEntry {
  let json: unknown = raw;
  if (typeof raw === 'string' || raw instanceof String) {
    try {
      json = JSON.parse(String(raw));
    } catch (e) {
      throw new ValidationError(source, [`not valid JSON: ${(e as Error).message}`]);
    }
  }
  const result = priceListEntrySchema.safeParse(json);
  if (!result.success) throw new ValidationError(source, describeIssues(result.error));
  return result.data;
}

/** AWS writes rates as plain decimals ("0.0892500000"); Number() alone would also read "0x1", "1e3" or "" (as 0). */
const PLAIN_DECIMAL = /^\d+(\.\d+)?$/;

/** The on-demand hourly USD rates of an entry (normally exactly one); a rate not written as a plain decimal is none. */
export function onDemandHourlyRatesUsd(entry: PriceListEntry): number[] {
  const rates: number[] = [];
  for (const term of Object.values(entry.terms.OnDemand ?? {}))
    for (const dimension of Object.values(term.priceDimensions)) {
      if (dimension.unit.toLowerCase() !== 'hrs') continue;
      if (dimension.beginRange !== undefined && dimension.beginRange !== '0') continue;
      const usd = dimension.pricePerUnit.USD;
      if (usd !== undefined && PLAIN_DECIMAL.test(usd)) rates.push(Number(usd));
    }
  return rates;
}

/** Capacity as the price list states it ("61 GiB", vcpu "8", gpu "1"); a last resort when EC2 does not describe a type. */
export function listedCapacity(entry: PriceListEntry): Resources | undefined {
  const attributes = entry.product.attributes;
  const vcpus = Number(attributes.vcpu);
  const memoryMatch = /^([\d.,]+)\s*GiB$/i.exec(attributes.memory ?? '');
  const memoryGiB = memoryMatch?.[1] === undefined ? Number.NaN : Number(memoryMatch[1].replace(/,/g, ''));
  const gpus = attributes.gpu === undefined ? 0 : Number(attributes.gpu);
  if (![vcpus, memoryGiB, gpus].every(Number.isFinite) || vcpus <= 0 || memoryGiB <= 0) return undefined;
  return [gpus, vcpus, memoryGiB];
}

export interface OnDemandPrice {
  readonly typeName: string;
  readonly costPerHour: number;
  readonly sku: string | undefined;
  readonly listedCapacity: Resources | undefined;
  readonly operation: string | undefined;
}

/**
 * Which of two products priced for one type a refresh keeps, whatever order the API lists them in: the plain
 * RunInstances operation, then the lower price, then the lower SKU.
 */
function preferred(a: OnDemandPrice, b: OnDemandPrice): OnDemandPrice {
  const runs = (p: OnDemandPrice): boolean => p.operation === 'RunInstances';
  if (runs(a) !== runs(b)) return runs(a) ? a : b;
  if (a.costPerHour !== b.costPerHour) return a.costPerHour < b.costPerHour ? a : b;
  if (a.sku === undefined || b.sku === undefined) return a.sku === undefined ? b : a;
  return a.sku <= b.sku ? a : b;
}

function priceListElements(page: GetProductsPage, source: string): unknown[] {
  if (page.PriceList === undefined) return [];
  if (!Array.isArray(page.PriceList)) throw new ValidationError(source, ['PriceList: expected an array']);
  return page.PriceList as unknown[];
}

/** On-demand Linux prices of every type of the given families in a region, following GetProducts pagination. */
export async function fetchOnDemandPrices(
  api: PricingApi,
  regionCode: string,
  families: readonly string[],
  warnings: string[],
): Promise<Map<string, OnDemandPrice>> {
  const prices = new Map<string, OnDemandPrice>();
  const expected = expectedAttributes(regionCode);
  for (const family of families) {
    let nextToken: string | undefined;
    let page = 0;
    do {
      page++;
      const response = await api.getProducts({
        ServiceCode: 'AmazonEC2',
        FormatVersion: 'aws_v1',
        Filters: onDemandLinuxFilters(regionCode, family),
        MaxResults: PAGE_SIZE,
        ...(nextToken === undefined ? {} : { NextToken: nextToken }),
      });
      const source = `GetProducts AmazonEC2 ${regionCode} ${family}.* page ${page}`;
      priceListElements(response, source).forEach((raw, i) => {
        const entry = parsePriceListEntry(raw, `${source} PriceList[${i}]`);
        const typeName = entry.product.attributes.instanceType;
        if (!typeName.startsWith(`${family}.`)) return; // CONTAINS also matches e.g. "xp3.large": not this family
        // Defensive: the filters should have excluded these; a changed API must not slip in a Windows or RI price.
        const mismatch = Object.entries(expected).find(
          ([field, value]) => entry.product.attributes[field] !== value,
        );
        if (mismatch !== undefined) {
          warnings.push(
            `${typeName}: skipped a price list entry with ${mismatch[0]}=${String(entry.product.attributes[mismatch[0]])} (expected ${mismatch[1]})`,
          );
          return;
        }
        const rates = [...new Set(onDemandHourlyRatesUsd(entry))];
        const rate = rates.length === 0 ? undefined : Math.max(...rates);
        if (rate === undefined) {
          warnings.push(
            `${typeName}: no on-demand hourly USD rate written as a decimal in its price list entry; left out`,
          );
          return;
        }
        // A list price outside a catalog's bounds ($0 among them) is a fault of the list: the catalog it went into
        // would be refused.
        const inBounds = pricePerHour.safeParse(rate);
        if (!inBounds.success) {
          const reason = inBounds.error.issues.map((issue) => issue.message).join('; ');
          warnings.push(`${typeName}: on-demand price $${rate}/h left out: ${reason}`);
          return;
        }
        if (rates.length > 1)
          warnings.push(`${typeName}: several on-demand rates ${rates.join(', ')}; using the highest`);
        const price: OnDemandPrice = {
          typeName,
          costPerHour: rate,
          sku: entry.product.sku,
          listedCapacity: listedCapacity(entry),
          operation: entry.product.attributes.operation,
        };
        const previous = prices.get(typeName);
        if (previous === undefined) {
          prices.set(typeName, price);
          return;
        }
        const kept = preferred(previous, price);
        const dropped = kept === price ? previous : price;
        prices.set(typeName, kept);
        if (dropped.costPerHour !== kept.costPerHour)
          warnings.push(
            `${typeName}: two products priced it; ignored ${dropped.costPerHour} (SKU ${String(dropped.sku)}, ` +
              `operation ${String(dropped.operation)}) and kept ${kept.costPerHour} (SKU ${String(kept.sku)}, ` +
              `operation ${String(kept.operation)})`,
          );
      });
      nextToken = response.NextToken === '' ? undefined : response.NextToken;
    } while (nextToken !== undefined);
  }
  return prices;
}

const MIB_PER_GIB = 1024;

/** Capacities ([GPUs, vCPUs, memory GiB]) of every type of the given families, from DescribeInstanceTypes. */
export async function fetchInstanceCapacities(
  ec2: Pick<Ec2Api, 'describeInstanceTypes'>,
  families: readonly string[],
): Promise<Map<string, Resources>> {
  const capacities = new Map<string, Resources>();
  let nextToken: string | undefined;
  do {
    const page = await ec2.describeInstanceTypes({
      Filters: [{ Name: 'instance-type', Values: families.map((f) => `${f}.*`) }],
      MaxResults: PAGE_SIZE,
      ...(nextToken === undefined ? {} : { NextToken: nextToken }),
    });
    for (const info of page.InstanceTypes ?? []) {
      const vcpus = info.VCpuInfo?.DefaultVCpus;
      const memoryMiB = info.MemoryInfo?.SizeInMiB;
      if (info.InstanceType === undefined || vcpus === undefined || memoryMiB === undefined) continue;
      const gpus = (info.GpuInfo?.Gpus ?? []).reduce((sum, g) => sum + (g.Count ?? 0), 0);
      capacities.set(info.InstanceType, [gpus, vcpus, memoryMiB / MIB_PER_GIB]);
    }
    nextToken = page.NextToken === '' ? undefined : page.NextToken;
  } while (nextToken !== undefined);
  return capacities;
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? (sorted[mid] as number)
    : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

/** Field-wise median of launch delays (new sizes of a known family launch like its other sizes). */
export function medianDelays(types: readonly InstanceType[]): LaunchDelays | undefined {
  if (types.length === 0) return undefined;
  return {
    instantiateSeconds: median(types.map((t) => t.delays.instantiateSeconds)),
    workerStartSeconds: median(types.map((t) => t.delays.workerStartSeconds)),
    workerRegisterSeconds: median(types.map((t) => t.delays.workerRegisterSeconds)),
    terminateSeconds: median(types.map((t) => t.delays.terminateSeconds)),
  };
}

export function familyOf(typeName: string): string {
  return typeName.slice(0, typeName.indexOf('.'));
}

export interface BuildCatalogInput {
  readonly region: string;
  readonly families: readonly string[];
  readonly prices: ReadonlyMap<string, OnDemandPrice>;
  readonly capacities: ReadonlyMap<string, Resources>;
  /**
   * Where launch delays, fallback capacities and the cross-zone traffic price come from: normally the bundled
   * catalog. None of them is in any AWS API the refresh reads, so they are kept as the base has them.
   */
  readonly base: Catalog;
  /** What named the families, for the problem when one has no priced type (default `families`). */
  readonly familiesSource?: string;
}

/**
 * Join prices, capacities and delays into a catalog. A type needs a price; its capacity comes from EC2, else the
 * base catalog, else the price list's own attributes; its delays from the base catalog, else the family's median,
 * else the median over the whole base catalog. Every fallback is reported in `warnings`. A family asked for that no
 * priced type came back for is refused (a misspelled family would otherwise leave the catalog without it, silently).
 */
export function buildCatalog(input: BuildCatalogInput): { catalog: Catalog; warnings: string[] } {
  const warnings: string[] = [];
  const baseByName = new Map(input.base.types.map((t) => [t.name, t]));
  const familyRank = new Map(input.families.map((f, i) => [f, i]));
  const types: InstanceType[] = [];
  for (const price of input.prices.values()) {
    const family = familyOf(price.typeName);
    if (!familyRank.has(family)) continue;
    const known = baseByName.get(price.typeName);
    let capacity = input.capacities.get(price.typeName);
    if (capacity === undefined && known !== undefined) {
      capacity = known.capacity;
      warnings.push(
        `${price.typeName}: DescribeInstanceTypes in ${input.region} did not describe it (moto, for one, lacks p3 types); ` +
          `capacity [${capacity.join(', ')}] taken from the base catalog`,
      );
    } else if (capacity === undefined && price.listedCapacity !== undefined) {
      capacity = price.listedCapacity;
      warnings.push(
        `${price.typeName}: not described by DescribeInstanceTypes nor in the base catalog; ` +
          `capacity [${capacity.join(', ')}] taken from its price list attributes`,
      );
    }
    if (capacity === undefined) {
      warnings.push(`${price.typeName}: no capacity from any source; left out`);
      continue;
    }
    let delays = known?.delays;
    if (delays === undefined) {
      delays = medianDelays(input.base.types.filter((t) => t.family === family));
      if (delays === undefined) {
        delays = medianDelays(input.base.types);
        warnings.push(
          `${price.typeName}: no ${family} type in the base catalog; launch delays are the median of all its types`,
        );
      }
    }
    if (delays === undefined) throw new Error('the base catalog has no types to take launch delays from');
    types.push({ name: price.typeName, family, capacity, costPerHour: price.costPerHour, delays });
  }
  for (const name of input.capacities.keys())
    if (!input.prices.has(name) && familyRank.has(familyOf(name)))
      warnings.push(`${name}: no on-demand Linux price in ${input.region}; left out`);
  // A base type neither source returned (a region that does not sell it) would otherwise vanish without a word.
  for (const known of input.base.types)
    if (familyRank.has(known.family) && !input.prices.has(known.name) && !input.capacities.has(known.name))
      warnings.push(
        `${known.name}: in the base catalog but neither priced nor described by DescribeInstanceTypes in ` +
          `${input.region}; left out`,
      );
  if (types.length === 0)
    throw new Error(`no priced instance types for families ${input.families.join(', ')} in ${input.region}`);
  const pricedFamilies = new Set(types.map((t) => t.family));
  const unpriced = input.families.filter((f) => !pricedFamilies.has(f));
  if (unpriced.length > 0)
    throw new ValidationError(
      input.familiesSource ?? 'families',
      unpriced.map(
        (f) =>
          `${f}: no ${f} instance type has an on-demand Linux price in ${input.region} ` +
          '(a family name like c7i; leave out families the region does not sell)',
      ),
    );
  types.sort(
    (a, b) =>
      (familyRank.get(a.family) ?? 0) - (familyRank.get(b.family) ?? 0) ||
      a.costPerHour - b.costPerHour ||
      a.name.localeCompare(b.name),
  );
  const crossZone = input.base.crossZonePricePerGiB;
  return {
    catalog: {
      provider: 'aws',
      region: input.region,
      ...(crossZone === undefined ? {} : { crossZonePricePerGiB: crossZone }),
      types,
    },
    warnings,
  };
}

/** The families of a catalog, in order of first appearance. */
export function catalogFamilies(catalog: Catalog): string[] {
  return [...new Set(catalog.types.map((t) => t.family))];
}

export interface RefreshCatalogInput {
  readonly pricing: PricingApi;
  readonly ec2: Pick<Ec2Api, 'describeInstanceTypes'>;
  readonly region: string;
  /** Defaults to the base catalog's families. */
  readonly families?: readonly string[];
  /** What named the families, for problems (BuildCatalogInput.familiesSource). */
  readonly familiesSource?: string;
  readonly base: Catalog;
}

export async function refreshCatalog(
  input: RefreshCatalogInput,
): Promise<{ catalog: Catalog; warnings: string[] }> {
  const families = input.families ?? catalogFamilies(input.base);
  const warnings: string[] = [];
  const prices = await fetchOnDemandPrices(input.pricing, input.region, families, warnings);
  const capacities = await fetchInstanceCapacities(input.ec2, families);
  const built = buildCatalog({
    region: input.region,
    families,
    prices,
    capacities,
    base: input.base,
    ...(input.familiesSource === undefined ? {} : { familiesSource: input.familiesSource }),
  });
  return { catalog: built.catalog, warnings: [...warnings, ...built.warnings] };
}
