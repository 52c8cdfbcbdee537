import { z } from 'zod';
import { formatFieldPath, parseWith, ValidationError } from './validation.js';
import type { Resources } from './resources.js';
import type { Market } from './market.js';
import {
  marketPricePerHour,
  spotMarketFromFile,
  spotMarketSchema,
  spotMarketToFile,
  spotOfferingProblems,
  type SpotMarket,
} from './spot.js';
import { strictObject } from './strict-object.js';
import { pricePerHour } from './price-per-hour.js';

/** Launch delays of an instance type, as Eva's simulator chains them (research digest §7). */
export interface LaunchDelays {
  readonly instantiateSeconds: number;
  readonly workerStartSeconds: number;
  readonly workerRegisterSeconds: number;
  readonly terminateSeconds: number;
}

export interface InstanceType {
  readonly name: string;
  readonly family: string;
  readonly capacity: Resources;
  readonly costPerHour: number;
  readonly delays: LaunchDelays;
}

export interface Catalog {
  readonly provider: string;
  readonly region: string;
  readonly types: readonly InstanceType[];
  /**
   * $ per GiB of traffic between zones of the region, in each direction (AWS: $0.01/GB each way); counted for a job
   * whose tasks span zones. Default DEFAULT_CROSS_ZONE_PRICE_PER_GIB.
   */
  readonly crossZonePricePerGiB?: number | undefined;
  /** Spot prices and interruption classes per (type, zone), with their snapshot date and source; absent: no spot. */
  readonly spot?: SpotMarket | undefined;
}

/** $ per hour of a `typeName` instance bought in `market` (in `zone` for spot; else the pool a spot launch gets). */
export function instancePricePerHour(
  catalog: Catalog,
  typeName: string,
  market: Market,
  zone?: string,
): number {
  const type = typesByName(catalog).get(typeName);
  if (type === undefined) throw new Error(`unknown instance type ${typeName}`);
  return marketPricePerHour(type.costPerHour, catalog.spot, typeName, market, zone);
}

/** AWS's price for data between availability zones of a region: $0.01 per GB in each direction. */
export const DEFAULT_CROSS_ZONE_PRICE_PER_GIB = 0.01;

/** The catalog's price of a GiB crossing zones, in each direction. */
export function crossZonePricePerGiB(catalog: Catalog): number {
  return catalog.crossZonePricePerGiB ?? DEFAULT_CROSS_ZONE_PRICE_PER_GIB;
}

const nonNegative = z.number().finite().nonnegative();

/*
 * Bounds far outside any real EC2 type (the largest has 896 vCPUs and 32 TiB; the smallest has 0.5 GiB; a launch
 * takes minutes): a value beyond them is a typo or a unit mix-up, and near the float limits values overflow to Infinity
 * and reports show null. Prices: price-per-hour.ts.
 */
const MAX_DELAY_SECONDS = 86_400;
const MIN_MEMORY_GIB = 0.5;
const MAX_MEMORY_GIB = 65_536;
const MAX_VCPUS = 4096;
const MAX_GPUS = 64;
/** $ per GiB between zones: AWS charges $0.01. */
const MAX_CROSS_ZONE_PRICE_PER_GIB = 1;

const delaySeconds = nonNegative.max(MAX_DELAY_SECONDS, `must be at most ${MAX_DELAY_SECONDS} s (a day)`);

/** An AWS region name (us-east-1, ap-southeast-2, us-gov-west-1): what catalogs, `catalog refresh` and configs take. */
export const AWS_REGION_PATTERN = /^[a-z]{2}(-[a-z]+)+-\d+$/;
export const regionSchema = z.string().regex(AWS_REGION_PATTERN, 'an AWS region like us-east-1');

const delaysSchema = strictObject({
  instantiateSeconds: delaySeconds,
  workerStartSeconds: delaySeconds,
  workerRegisterSeconds: delaySeconds,
  terminateSeconds: delaySeconds,
});

const typeSchema = strictObject({
  name: z.string().regex(/^[a-z0-9-]+\.[a-z0-9-]+$/, 'must look like an EC2 type name, e.g. c7i.large'),
  family: z.string().min(1),
  // EC2 sells whole GPUs and vCPUs: a fraction is a typo, and would let the packer split what no instance splits.
  gpus: z
    .number()
    .int('a whole number of GPUs')
    .nonnegative()
    .max(MAX_GPUS, `must be at most ${MAX_GPUS} GPUs`),
  vcpus: z
    .number()
    .int('a whole number of vCPUs')
    .positive()
    .max(MAX_VCPUS, `must be at most ${MAX_VCPUS} vCPUs`),
  memoryGiB: z
    .number()
    .finite()
    .min(MIN_MEMORY_GIB, `must be at least ${MIN_MEMORY_GIB} GiB (the smallest EC2 type has 0.5)`)
    .max(MAX_MEMORY_GIB, `must be at most ${MAX_MEMORY_GIB} GiB`),
  costPerHour: pricePerHour,
  delays: delaysSchema,
});

const typesByCatalog = new WeakMap<Catalog, ReadonlyMap<string, InstanceType>>();

/** A catalog's types by name, built once per catalog object (rounds look types up every time). */
export function typesByName(catalog: Catalog): ReadonlyMap<string, InstanceType> {
  let types = typesByCatalog.get(catalog);
  if (types === undefined) {
    types = new Map(catalog.types.map((t) => [t.name, t]));
    typesByCatalog.set(catalog, types);
  }
  return types;
}

export const catalogFileSchema = strictObject({
  schemaVersion: z.literal(1),
  provider: z.string().default('aws'),
  region: regionSchema,
  currency: z.literal('USD').default('USD'),
  source: z.string().optional(),
  /** $ per GiB between zones, each direction (default DEFAULT_CROSS_ZONE_PRICE_PER_GIB). */
  crossZonePricePerGiB: nonNegative
    .max(
      MAX_CROSS_ZONE_PRICE_PER_GIB,
      `must be at most $${MAX_CROSS_ZONE_PRICE_PER_GIB} per GiB (AWS charges $0.01)`,
    )
    .optional(),
  types: z.array(typeSchema).min(1, 'a catalog needs at least one instance type'),
  /** Spot prices and interruption classes per (type, zone) (absent: the catalog offers no spot). */
  spot: spotMarketSchema.optional(),
});

export type CatalogFile = z.output<typeof catalogFileSchema>;

const pricesPerType = z.record(z.string().min(1), pricePerHour);

/** A discount in percent: under 100, since a price of 0 is no price (catalogs refuse it too). */
const discountPercent = z
  .number()
  .min(0, 'must be ≥ 0')
  .lt(100, 'must be under 100 (a 100% discount would make instances free)');

/**
 * User price overrides for Savings Plans or reserved capacity: a discount, then per-type prices that win. A file of
 * its own for `simulate --price-overrides`, the `priceOverrides:` section of a controller config.
 */
export const priceOverridesSchema = strictObject({
  /**
   * Off every on-demand price. Not off spot prices: Savings Plans and Reserved Instances do not apply to spot usage.
   */
  discountPercent: discountPercent.optional(),
  /** Off every spot price (default 0): an agreement whose discount does cover spot usage (an enterprise one). */
  spotDiscountPercent: discountPercent.optional(),
  /** On-demand $/hour per type (the discount does not apply to these). */
  pricePerType: pricesPerType.optional(),
  /** Spot $/hour per type, in every zone (the spot discount applies to the other spot prices). */
  spotPricePerType: pricesPerType.optional(),
});
export type PriceOverrides = z.output<typeof priceOverridesSchema>;

/** Validate parsed JSON as a catalog; `source` names the file in errors. */
export function parseCatalog(json: unknown, source = 'catalog'): Catalog {
  const file = parseWith(catalogFileSchema, json, source);
  const seen = new Set<string>();
  const problems: string[] = [];
  file.types.forEach((t, i) => {
    if (seen.has(t.name)) problems.push(`types.${i}.name: duplicate instance type ${t.name}`);
    seen.add(t.name);
    if (!t.name.startsWith(`${t.family}.`))
      problems.push(`types.${i}.family: ${t.family} does not match the type name ${t.name}`);
  });
  if (file.spot !== undefined)
    problems.push(
      ...spotOfferingProblems(
        file.spot,
        new Map(file.types.map((t) => [t.name, t.costPerHour])),
        file.region,
      ),
    );
  if (problems.length > 0) throw new ValidationError(source, problems);
  return {
    provider: file.provider,
    region: file.region,
    ...(file.crossZonePricePerGiB === undefined ? {} : { crossZonePricePerGiB: file.crossZonePricePerGiB }),
    types: file.types.map((t) => ({
      name: t.name,
      family: t.family,
      capacity: [t.gpus, t.vcpus, t.memoryGiB] as const,
      costPerHour: t.costPerHour,
      delays: t.delays,
    })),
    ...(file.spot === undefined ? {} : { spot: spotMarketFromFile(file.spot) }),
  };
}

/** The catalog back in its file form (for `catalog refresh` and for tests). */
export function catalogToFile(catalog: Catalog, source?: string): CatalogFile {
  return {
    schemaVersion: 1,
    provider: catalog.provider,
    region: catalog.region,
    currency: 'USD',
    ...(source === undefined ? {} : { source }),
    ...(catalog.crossZonePricePerGiB === undefined
      ? {}
      : { crossZonePricePerGiB: catalog.crossZonePricePerGiB }),
    types: catalog.types.map((t) => ({
      name: t.name,
      family: t.family,
      gpus: t.capacity[0],
      vcpus: t.capacity[1],
      memoryGiB: t.capacity[2],
      costPerHour: t.costPerHour,
      delays: { ...t.delays },
    })),
    ...(catalog.spot === undefined ? {} : { spot: spotMarketToFile(catalog.spot) }),
  };
}

/**
 * Apply price overrides; an override naming a type the catalog lacks is an error, not a silent no-op, and so is a
 * spot price above the type's on-demand list price (EC2's default maximum spot price: such a pool would never be
 * what the fleet pays). `source` names the overrides in errors.
 */
export function applyPriceOverrides(
  catalog: Catalog,
  overrides: PriceOverrides,
  source = 'price overrides',
): Catalog {
  const parsed = parseWith(priceOverridesSchema, overrides, source);
  const problems = priceOverrideProblems(catalog, parsed).map(
    (p) => `${formatFieldPath(p.path)}: ${p.message}`,
  );
  if (problems.length > 0) throw new ValidationError(source, problems);
  const factor = 1 - (parsed.discountPercent ?? 0) / 100;
  const spotFactor = 1 - (parsed.spotDiscountPercent ?? 0) / 100;
  const spot = catalog.spot;
  return {
    ...catalog,
    types: catalog.types.map((t) => ({
      ...t,
      costPerHour: parsed.pricePerType?.[t.name] ?? t.costPerHour * factor,
    })),
    ...(spot === undefined
      ? {}
      : {
          spot: {
            ...spot,
            offerings: spot.offerings.map((o) => ({
              ...o,
              pricePerHour: parsed.spotPricePerType?.[o.typeName] ?? o.pricePerHour * spotFactor,
            })),
          },
        }),
  };
}

/** A problem of valid overrides against a catalog, with its field path (a config names the line from it). */
export interface PriceOverrideProblem {
  readonly path: readonly string[];
  readonly message: string;
}

/** What is wrong with `overrides` (already valid in shape) against `catalog`; empty when they apply. */
export function priceOverrideProblems(catalog: Catalog, overrides: PriceOverrides): PriceOverrideProblem[] {
  const types = typesByName(catalog);
  const problems: PriceOverrideProblem[] = [];
  for (const [field, prices] of [
    ['pricePerType', overrides.pricePerType],
    ['spotPricePerType', overrides.spotPricePerType],
  ] as const)
    for (const name of Object.keys(prices ?? {}))
      if (!types.has(name))
        problems.push({ path: [field, name], message: `not an instance type of the catalog` });
  // Spot prices apply to the catalog's pools only: one for a type without any would price nothing.
  const spotTypes = new Set(catalog.spot?.offerings.map((o) => o.typeName));
  for (const [name, spotPrice] of Object.entries(overrides.spotPricePerType ?? {})) {
    const type = types.get(name);
    if (type === undefined) continue;
    if (!spotTypes.has(name)) {
      problems.push({
        path: ['spotPricePerType', name],
        message:
          catalog.spot === undefined
            ? `the catalog offers no spot instances (it has no spot section, or spot is off), so this price would price nothing`
            : `the catalog offers no spot pool of ${name}, so this price would price nothing`,
      });
      continue;
    }
    // EC2 caps a spot price at the on-demand list price; a discount or a reserved price on demand does not move that
    // cap (a spot price between the discounted and the list price is real, and simply makes spot less attractive).
    const listPrice = type.costPerHour;
    if (spotPrice > listPrice)
      problems.push({
        path: ['spotPricePerType', name],
        message:
          `${spotPrice} is above ${name}'s on-demand list price ${listPrice} ` +
          "(EC2's default maximum spot price is the on-demand price)",
      });
  }
  return problems;
}

export function findType(catalog: Catalog, name: string): InstanceType {
  const t = catalog.types.find((x) => x.name === name);
  if (t === undefined)
    throw new Error(`unknown instance type ${name} (not in the ${catalog.region} catalog)`);
  return t;
}

/** Seconds from a launch request until a task can be started on the instance. */
export function setupSeconds(t: InstanceType): number {
  return t.delays.instantiateSeconds + t.delays.workerStartSeconds + t.delays.workerRegisterSeconds;
}
