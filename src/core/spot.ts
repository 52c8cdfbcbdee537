import { z } from 'zod';
import { compareText } from './compare.js';
import type { Market } from './market.js';
import { pricePerHour } from './price-per-hour.js';
import { strictObject } from './strict-object.js';

/**
 * The spot market of a catalog: per (type, zone) a spot price and an interruption class. The classes are the AWS Spot
 * Instance Advisor's "frequency of interruption" buckets: the share of a pool's instances AWS reclaimed over the
 * trailing month.
 */

export const INTERRUPTION_CLASSES = ['<5%', '5-10%', '10-15%', '15-20%', '>20%'] as const;
export type InterruptionClass = (typeof INTERRUPTION_CLASSES)[number];

/**
 * The monthly share of instances interrupted that a class stands for: the middle of its bucket, and 25% for the open
 * ">20%" one (the Advisor gives no upper bound; 25% keeps the classes evenly spaced).
 */
const MONTHLY_SHARE: Readonly<Record<InterruptionClass, number>> = {
  '<5%': 0.025,
  '5-10%': 0.075,
  '10-15%': 0.125,
  '15-20%': 0.175,
  '>20%': 0.25,
};

/** Hours in the Advisor's month (365 × 24 / 12). */
export const HOURS_PER_MONTH = 730;

/** Seconds between EC2's spot interruption notice and the reclaim (the controller, the worker and the simulator). */
export const SPOT_NOTICE_SECONDS = 120;

/**
 * Of the time a notice leaves, this much is kept for the worker's last heartbeat after its checkpoints: a
 * checkpoint-stop under a notice gets at most the time left less this (and at least a second).
 */
export const SPOT_NOTICE_MARGIN_SECONDS = 10;

/** A spot interruption notice as a checkpoint-stop's cap reads it (epoch ms). */
export interface SpotNoticeTimes {
  /** When EC2 acts, as the notice says; undefined when it gives no time that can be read
   * (src/protocol/notice-time.ts). */
  readonly actionAtMs: number | undefined;
  /** When the notice was seen (recorded by the controller, read by the worker). */
  readonly seenAtMs: number;
}

/**
 * When EC2 acts on a notice: the time it gives, else SPOT_NOTICE_SECONDS after it was seen (EC2's lead, as the
 * reconciler counts it for an empty instance). Never no time: the cap would go, and a 900 s checkpoint-stop would run
 * past the reclaim with its upload.
 */
export function noticeActionAtMs(notice: SpotNoticeTimes): number {
  return notice.actionAtMs !== undefined && Number.isFinite(notice.actionAtMs)
    ? notice.actionAtMs
    : notice.seenAtMs + SPOT_NOTICE_SECONDS * 1000;
}

/**
 * A checkpoint-stop's timeout under a spot interruption notice, at `nowMs`: the job's own timeout, capped at the time
 * left before EC2 acts (noticeActionAtMs) less the margin, at least 1 s.
 */
export function noticeCappedTimeoutSeconds(
  timeoutSeconds: number,
  notice: SpotNoticeTimes,
  nowMs: number,
): number {
  const leftSeconds = (noticeActionAtMs(notice) - nowMs) / 1000 - SPOT_NOTICE_MARGIN_SECONDS;
  return Math.max(1, Math.min(timeoutSeconds, Math.floor(leftSeconds)));
}

/**
 * Interruptions per instance-hour of a class: an instance survives the month with probability 1 − p, so with a
 * constant hazard λ, e^(−λ·730 h) = 1 − p and λ = −ln(1 − p) / 730.
 */
export function interruptionRatePerHour(interruption: InterruptionClass): number {
  return -Math.log(1 - MONTHLY_SHARE[interruption]) / HOURS_PER_MONTH;
}

export interface SpotOffering {
  readonly typeName: string;
  readonly zone: string;
  readonly pricePerHour: number;
  readonly interruption: InterruptionClass;
}

export interface SpotMarket {
  /** Day the prices and classes were taken (YYYY-MM-DD). */
  readonly snapshotDate: string;
  /** Where they come from. */
  readonly source: string;
  readonly offerings: readonly SpotOffering[];
}

/** Whether `text` (YYYY-MM-DD) names a day of the calendar: 2026-13-45 has the shape but is no day. */
export function isCalendarDate(text: string): boolean {
  const date = new Date(`${text}T00:00:00Z`);
  return !Number.isNaN(date.getTime()) && date.toISOString().slice(0, 10) === text;
}

/**
 * A catalog file's spot section. Its prices have the bounds of an on-demand one (price-per-hour.ts): a spot price is an
 * hourly price too, and one near 0 is as much a typo.
 */
export const spotMarketSchema = strictObject({
  snapshotDate: z
    .string()
    .regex(/^\d{4}-\d{2}-\d{2}$/, { message: 'must be a date, YYYY-MM-DD', abort: true })
    .refine(isCalendarDate, 'must be a day of the calendar (month 01-12, a day the month has)'),
  source: z.string().min(1),
  offerings: z.array(
    strictObject({
      type: z.string().min(1),
      zone: z.string().min(1),
      pricePerHour,
      interruption: z.enum(INTERRUPTION_CLASSES, {
        message: `must be one of ${INTERRUPTION_CLASSES.join(', ')} (Spot Instance Advisor classes)`,
      }),
    }),
  ),
});

export type SpotMarketFile = z.output<typeof spotMarketSchema>;

/**
 * Whether `zone` is a zone of `region`: an availability zone (`us-east-1a`) or a Local Zone (`us-east-1-bos-1a`). A
 * pool elsewhere could never be launched by a fleet of the region.
 */
export function isZoneOf(zone: string, region: string): boolean {
  return zone.startsWith(region) && /^(?:[a-z]|-[a-z0-9]+(?:-[a-z0-9]+)*)$/.test(zone.slice(region.length));
}

/**
 * Problems of the offerings that the schema alone cannot see, each naming the offering: a (type, zone) pair offered
 * twice, a type the catalog lacks, a zone outside the catalog's region, and a price above the type's on-demand price
 * (EC2's default maximum spot price is the on-demand price: such a pool is never what the fleet pays).
 */
export function spotOfferingProblems(
  file: SpotMarketFile,
  onDemandPerHour: ReadonlyMap<string, number>,
  region: string,
): string[] {
  const seen = new Set<string>();
  const problems: string[] = [];
  file.offerings.forEach((o, i) => {
    const key = `${o.type}@${o.zone}`;
    if (seen.has(key)) problems.push(`spot.offerings.${i}: ${o.type} in ${o.zone} is offered twice`);
    seen.add(key);
    if (!isZoneOf(o.zone, region))
      problems.push(`spot.offerings.${i}.zone: ${o.zone} is not a zone of the catalog's region ${region}`);
    const onDemand = onDemandPerHour.get(o.type);
    if (onDemand === undefined)
      problems.push(`spot.offerings.${i}.type: ${o.type} is not a type of the catalog`);
    else if (o.pricePerHour > onDemand)
      problems.push(
        `spot.offerings.${i}.pricePerHour: ${o.pricePerHour} is above ${o.type}'s on-demand price ${onDemand} ` +
          "(EC2's default maximum spot price is the on-demand price)",
      );
  });
  return problems;
}

export function spotMarketFromFile(file: SpotMarketFile): SpotMarket {
  return {
    snapshotDate: file.snapshotDate,
    source: file.source,
    offerings: file.offerings.map((o) => ({
      typeName: o.type,
      zone: o.zone,
      pricePerHour: o.pricePerHour,
      interruption: o.interruption,
    })),
  };
}

export function spotMarketToFile(market: SpotMarket): SpotMarketFile {
  return {
    snapshotDate: market.snapshotDate,
    source: market.source,
    offerings: market.offerings.map((o) => ({
      type: o.typeName,
      zone: o.zone,
      pricePerHour: o.pricePerHour,
      interruption: o.interruption,
    })),
  };
}

const offeringsByType = new WeakMap<SpotMarket, ReadonlyMap<string, readonly SpotOffering[]>>();

/** A type's offerings, price-capacity-optimized first (see `spotOffering`); built once per market. */
export function offeringsOf(market: SpotMarket, typeName: string): readonly SpotOffering[] {
  let byType = offeringsByType.get(market);
  if (byType === undefined) {
    const map = new Map<string, SpotOffering[]>();
    for (const o of market.offerings) {
      const list = map.get(o.typeName) ?? [];
      list.push(o);
      map.set(o.typeName, list);
    }
    for (const list of map.values()) list.sort(priceCapacityOrder);
    byType = map;
    offeringsByType.set(market, byType);
  }
  return byType.get(typeName) ?? [];
}

/**
 * EC2's price-capacity-optimized allocation (research digest industry-anchors §4: Batch's
 * SPOT_PRICE_CAPACITY_OPTIMIZED, Karpenter's default for spot) as a total order: the pools least likely to be
 * interrupted first, the cheapest among them, then by zone name so the choice is deterministic.
 */
function priceCapacityOrder(a: SpotOffering, b: SpotOffering): number {
  return (
    INTERRUPTION_CLASSES.indexOf(a.interruption) - INTERRUPTION_CLASSES.indexOf(b.interruption) ||
    a.pricePerHour - b.pricePerHour ||
    compareText(a.zone, b.zone)
  );
}

/**
 * The pool a spot launch of `typeName` gets: in `zone` when one is asked for, else the price-capacity-optimized one
 * over the zones (excluding `avoidZones`, when another zone is left). Undefined when the type has no spot offering
 * there. The simulated cloud launches into this pool, and plans and caps price a spot instance at its price.
 */
export function spotOffering(
  market: SpotMarket | undefined,
  typeName: string,
  zone?: string,
  avoidZones: readonly string[] = [],
): SpotOffering | undefined {
  if (market === undefined) return undefined;
  const offerings = offeringsOf(market, typeName);
  if (zone !== undefined) return offerings.find((o) => o.zone === zone);
  return offerings.find((o) => !avoidZones.includes(o.zone)) ?? offerings[0];
}

/**
 * How long a pool stays out of spot launches after a capacity error or an interruption: Karpenter's unavailable-
 * offerings cache keeps an offering out for 3 minutes (research digest industry-anchors §1.4), and so do fleetwise's
 * EC2 provider, the controller runtime's simulated cloud and the engine's spot world (on a notice it hears).
 */
export const UNAVAILABLE_OFFERING_SECONDS = 180;

/**
 * The pool a spot launch of `typeName` gets when some pools are out (`isOpen` false): the one in `zone` when it is
 * open, else the type's first open pool, price-capacity-optimized; undefined when none is open.
 */
export function openSpotPool(
  market: SpotMarket | undefined,
  typeName: string,
  zone: string | undefined,
  isOpen: (pool: SpotOffering) => boolean,
): SpotOffering | undefined {
  if (market === undefined) return undefined;
  const open = offeringsOf(market, typeName).filter(isOpen);
  return (zone === undefined ? undefined : open.find((p) => p.zone === zone)) ?? open[0];
}

/**
 * The market limited to the pools of `zones` (the zones the cluster can launch in: its subnets'): a plan priced at a
 * pool the cloud cannot launch in would be bought in another, at another price and interruption rate.
 */
export function spotInZones(
  market: SpotMarket | undefined,
  zones: readonly string[],
): SpotMarket | undefined {
  if (market === undefined) return undefined;
  const open = new Set(zones);
  return { ...market, offerings: market.offerings.filter((o) => open.has(o.zone)) };
}

/** $ per hour of an instance bought in `market`: the list price on demand, its pool's price on spot. */
export function marketPricePerHour(
  onDemandPerHour: number,
  spot: SpotMarket | undefined,
  typeName: string,
  market: Market,
  zone?: string,
): number {
  if (market === 'on-demand') return onDemandPerHour;
  const offering = spotOffering(spot, typeName, zone);
  if (offering === undefined)
    throw new Error(`no spot offering for ${typeName}${zone === undefined ? '' : ` in ${zone}`}`);
  return offering.pricePerHour;
}

/** A job's use of spot capacity: never, allowed when it is cheaper at its expected cost (default), or preferred. */
export const SPOT_PREFERENCES = ['never', 'allowed', 'preferred'] as const;
export type SpotPreference = (typeof SPOT_PREFERENCES)[number];
export const DEFAULT_SPOT_PREFERENCE: SpotPreference = 'allowed';
/** The longest delay one spot interruption may be allowed to cost a job (a job spec's `spotMaxDelayMinutes`): a week. */
export const MAX_SPOT_MAX_DELAY_MINUTES = 10_080;

/**
 * A spot instance EC2 interrupts within this long of its launch is not charged at all (AWS, "Billing for interrupted
 * Spot Instances"); one stopped or terminated by its owner is charged for the seconds it ran, as any other. The
 * controller's cost reports and both simulator runtimes bill by it.
 */
export const FREE_INTERRUPTED_SPOT_SECONDS = 3600;

/** Whether AWS charges nothing for a spot instance launched at `launchedAtSeconds` that EC2 reclaims at `atSeconds`. */
export function reclaimIsFree(launchedAtSeconds: number, atSeconds: number): boolean {
  return atSeconds - launchedAtSeconds < FREE_INTERRUPTED_SPOT_SECONDS;
}
