import {
  DescribeSpotPriceHistoryCommand,
  type DescribeSpotPriceHistoryCommandInput,
  type DescribeSpotPriceHistoryCommandOutput,
  type EC2Client,
} from '@aws-sdk/client-ec2';
import type { InterruptionClass, SpotMarket } from '../../core/spot.js';

/**
 * Current spot prices per (type, zone) from EC2's DescribeSpotPriceHistory, for `fleetwise catalog refresh`. With a
 * StartTime of now, EC2 answers the price in force in every zone (the newest entry of each pool); Linux/UNIX only,
 * as the on-demand prices are. The interruption class of each pool is not in any EC2 API (it is the Spot Instance
 * Advisor's, published as a file): a refresh keeps the base catalog's classes, and gives a pool it has none for the
 * most pessimistic class, so a new pool is never priced as safer than it may be.
 */

export interface SpotPriceApi {
  describeSpotPriceHistory(
    input: DescribeSpotPriceHistoryCommandInput,
  ): Promise<DescribeSpotPriceHistoryCommandOutput>;
}

export function spotPriceApiFromClient(client: EC2Client): SpotPriceApi {
  return { describeSpotPriceHistory: (input) => client.send(new DescribeSpotPriceHistoryCommand(input)) };
}

export interface SpotPrice {
  readonly typeName: string;
  readonly zone: string;
  readonly pricePerHour: number;
}

const LINUX = new Set(['Linux/UNIX', 'Linux/UNIX (Amazon VPC)']);

/** The newest Linux spot price of each (type, zone) pool of `typeNames`, sorted by type then zone. */
export async function fetchSpotPrices(
  api: SpotPriceApi,
  typeNames: readonly string[],
  now: Date,
): Promise<SpotPrice[]> {
  const newest = new Map<string, SpotPrice & { atMs: number }>();
  let nextToken: string | undefined;
  do {
    const page = await api.describeSpotPriceHistory({
      InstanceTypes: [...typeNames] as DescribeSpotPriceHistoryCommandInput['InstanceTypes'],
      ProductDescriptions: ['Linux/UNIX'],
      StartTime: now,
      EndTime: now,
      MaxResults: 1000,
      ...(nextToken === undefined ? {} : { NextToken: nextToken }),
    });
    for (const entry of page.SpotPriceHistory ?? []) {
      const price = Number(entry.SpotPrice);
      if (
        entry.InstanceType === undefined ||
        entry.AvailabilityZone === undefined ||
        !LINUX.has(entry.ProductDescription ?? '') ||
        !typeNames.includes(entry.InstanceType) ||
        !Number.isFinite(price) ||
        price <= 0
      )
        continue;
      const key = `${entry.InstanceType}@${entry.AvailabilityZone}`;
      const atMs = entry.Timestamp?.getTime() ?? 0;
      const seen = newest.get(key);
      if (seen === undefined || atMs > seen.atMs)
        newest.set(key, {
          typeName: entry.InstanceType,
          zone: entry.AvailabilityZone,
          pricePerHour: price,
          atMs,
        });
    }
    nextToken = page.NextToken === '' ? undefined : page.NextToken;
  } while (nextToken !== undefined);
  const order = new Map(typeNames.map((n, i) => [n, i]));
  return [...newest.values()]
    .map(({ typeName, zone, pricePerHour }) => ({ typeName, zone, pricePerHour }))
    .sort(
      (a, b) => (order.get(a.typeName) ?? 0) - (order.get(b.typeName) ?? 0) || a.zone.localeCompare(b.zone),
    );
}

/**
 * The prices at most their type's on-demand price, and how many were above it. EC2's default maximum spot price is
 * the on-demand price, so a pool priced above it is one the fleet would not be sold at that price: it is left out of
 * the catalog (which refuses such an offering) rather than failing the refresh.
 */
export function spotPricesAtMostOnDemand(
  prices: readonly SpotPrice[],
  onDemandPerHour: ReadonlyMap<string, number>,
): { readonly kept: readonly SpotPrice[]; readonly aboveOnDemand: number } {
  const kept = prices.filter((p) => p.pricePerHour <= (onDemandPerHour.get(p.typeName) ?? Infinity));
  return { kept, aboveOnDemand: prices.length - kept.length };
}

/** The class a pool gets when the base catalog has none for it: the worst, never an optimistic guess. */
export const UNKNOWN_POOL_CLASS: InterruptionClass = '>20%';

/**
 * The catalog's spot market: prices from EC2, each pool's interruption class from the base catalog's market (or
 * UNKNOWN_POOL_CLASS), with the snapshot's date and source.
 */
export function spotMarketFromPrices(
  prices: readonly SpotPrice[],
  baseMarket: SpotMarket | undefined,
  snapshot: { readonly date: Date; readonly source: string },
): { readonly market: SpotMarket; /** Pools the base had no class for. */ readonly unclassified: number } {
  const classes = new Map(
    (baseMarket?.offerings ?? []).map((o) => [`${o.typeName}@${o.zone}`, o.interruption]),
  );
  let unclassified = 0;
  const offerings = prices.map((p) => {
    const known = classes.get(`${p.typeName}@${p.zone}`);
    if (known === undefined) unclassified += 1;
    return { ...p, interruption: known ?? UNKNOWN_POOL_CLASS };
  });
  return {
    market: { snapshotDate: snapshot.date.toISOString().slice(0, 10), source: snapshot.source, offerings },
    unclassified,
  };
}
