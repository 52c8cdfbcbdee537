import {
  DescribeSpotPriceHistoryCommand,
  type DescribeSpotPriceHistoryCommandInput,
  type DescribeSpotPriceHistoryCommandOutput,
  type EC2Client,
} from '@aws-sdk/client-ec2';
import { z } from 'zod';

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

/** The Spot Instance Advisor's interruption-frequency classes (share of a pool's instances reclaimed per month). */
export const ADVISOR_CLASSES = ['<5%', '5-10%', '10-15%', '15-20%', '>20%'] as const;
/** The class a pool gets when the base catalog has none for it: the worst, never an optimistic guess. */
export const UNKNOWN_POOL_CLASS = '>20%';

/** The part of a base catalog's `spot` section a refresh keeps: each pool's interruption class. */
const baseSpotSchema = z.object({
  spot: z
    .object({
      offerings: z.array(
        z.object({ type: z.string(), zone: z.string(), interruption: z.enum(ADVISOR_CLASSES) }),
      ),
    })
    .optional(),
});

/** The catalog file's `spot` section: prices from EC2, interruption classes from the base catalog (file JSON). */
export function spotSection(
  prices: readonly SpotPrice[],
  baseFile: unknown,
  snapshot: { readonly date: Date; readonly source: string },
): {
  readonly section: {
    snapshotDate: string;
    source: string;
    offerings: { type: string; zone: string; pricePerHour: number; interruption: string }[];
  };
  /** Pools whose class the base did not have (given UNKNOWN_POOL_CLASS). */
  readonly unclassified: number;
} {
  const parsed = baseSpotSchema.safeParse(baseFile);
  const classes = new Map(
    (parsed.success ? (parsed.data.spot?.offerings ?? []) : []).map((o) => [
      `${o.type}@${o.zone}`,
      o.interruption,
    ]),
  );
  let unclassified = 0;
  const offerings = prices.map((p) => {
    const known = classes.get(`${p.typeName}@${p.zone}`);
    if (known === undefined) unclassified += 1;
    return {
      type: p.typeName,
      zone: p.zone,
      pricePerHour: p.pricePerHour,
      interruption: known ?? UNKNOWN_POOL_CLASS,
    };
  });
  return {
    section: { snapshotDate: snapshot.date.toISOString().slice(0, 10), source: snapshot.source, offerings },
    unclassified,
  };
}
