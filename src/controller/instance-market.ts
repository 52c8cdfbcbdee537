import { typesByName, type Catalog, type InstanceType } from '../core/catalog.js';
import type { Market } from '../core/market.js';
import { marketPricePerHour, type SpotOffering } from '../core/spot.js';
import { launchIntentKey, type InstanceRecord, type IntentRecord, type StateStore } from './state-store.js';

/**
 * How a live instance was bought, as the store knows it: what its launch asked for (its launch intent, keyed by the
 * instance) unless an event says the cloud gave something else. Caps, the snapshot's prices and Eva's spot risk
 * all read it, so an instance bought on demand must never pass for spot, nor the reverse.
 */

/** A spot launch that was bought on demand (no spot capacity, a provider without a spot market, found so later). */
export const MARKET_FALLBACK_EVENT = 'instance.market-fallback';
/** An instance the controller did not launch (adopted from EC2) that runs on spot. */
export const ADOPTED_SPOT_EVENT = 'instance.adopted-spot';

/** Record that a launch which asked for spot got on-demand capacity, and why. */
export function recordMarketFallback(
  store: StateStore,
  instanceId: string,
  why: string,
  obtained: Market = 'on-demand',
): void {
  store.appendEvent({
    kind: MARKET_FALLBACK_EVENT,
    instanceId,
    message: `launched on demand instead of spot: ${why}`,
    data: { asked: 'spot', obtained, why },
  });
}

/** Record the market of an instance adopted from the cloud, when that is spot (absent: on demand). */
export function recordAdoptedMarket(store: StateStore, instanceId: string, market: Market | undefined): void {
  if (market !== 'spot') return;
  store.appendEvent({
    kind: ADOPTED_SPOT_EVENT,
    instanceId,
    message: `${instanceId} runs on spot capacity (as EC2 lists it)`,
    data: { market },
  });
}

/** Whether the instance's launch asked for spot: the market its launch intent carries, if it has one. */
export function launchAskedForSpot(store: StateStore, instanceId: string): boolean {
  return asksForSpot(store.getIntentByKey(launchIntentKey(instanceId)));
}

function asksForSpot(launch: IntentRecord | undefined): boolean {
  return launch?.kind === 'launch' && launch.payload.market === 'spot';
}

/**
 * Whether the instance runs on spot: launched by this controller, its launch asked for spot and did not fall back to
 * on demand; adopted from the cloud, the cloud listed it as spot.
 */
export function launchedOnSpot(store: StateStore, instanceId: string): boolean {
  const launch = store.getIntentByKey(launchIntentKey(instanceId));
  if (launch === undefined)
    return store.listEvents({ instanceId, kind: ADOPTED_SPOT_EVENT, limit: 1 }).length > 0;
  if (!asksForSpot(launch)) return false;
  return store.listEvents({ instanceId, kind: MARKET_FALLBACK_EVENT, limit: 1 }).length === 0;
}

/** The market an instance was bought in, as its bill takes it (`launchedOnSpot`). */
export function instanceMarket(store: StateStore, instanceId: string): Market {
  return launchedOnSpot(store, instanceId) ? 'spot' : 'on-demand';
}

/** What an instance is billed at, $/hour, by the market the store says it was bought in (`billedPricePerHour`). */
export function instanceBilledPricePerHour(
  catalog: Catalog,
  store: StateStore,
  instance: InstanceRecord,
): number {
  return billedPricePerHour(catalog, instance, launchedOnSpot(store, instance.id));
}

/**
 * What an instance is billed at, $/hour: its pool's spot price when it runs on spot (`onSpot`, `launchedOnSpot`),
 * else its type's on-demand price; the on-demand price for a pool the catalog no longer lists. A type the catalog
 * lacks is priced by the bundled catalog at the controller's start (`BillingTypes`), or, when that lacks it too (an
 * orphan of another type, drained at once), said so at the start and billed at $0.
 */
export function billedPricePerHour(catalog: Catalog, instance: InstanceRecord, onSpot: boolean): number {
  const type = typesByName(catalog).get(instance.typeName);
  if (type === undefined) return 0;
  if (!onSpot) return type.costPerHour;
  try {
    return marketPricePerHour(type.costPerHour, catalog.spot, type.name, 'spot', instance.availabilityZone);
  } catch {
    return type.costPerHour;
  }
}

/**
 * Instance types and spot pools to bill with beside the catalog's: those only ended instances of the state ran, which
 * the catalog no longer lists (the controller's start takes them from the bundled catalog). Reports bill with them;
 * nothing plans with them.
 */
export interface BillingTypes {
  readonly types: readonly InstanceType[];
  readonly spotOfferings: readonly SpotOffering[];
}

/** `catalog` with `extra`'s types and spot pools it lacks: the catalog the bills are priced from. */
export function withBillingTypes(catalog: Catalog, extra: BillingTypes | undefined): Catalog {
  if (extra === undefined || extra.types.length === 0) return catalog;
  const types = extra.types.filter((t) => !catalog.types.some((c) => c.name === t.name));
  if (types.length === 0) return catalog;
  const names = new Set(types.map((t) => t.name));
  const spot = catalog.spot;
  return {
    ...catalog,
    types: [...catalog.types, ...types],
    ...(spot === undefined
      ? {}
      : {
          spot: {
            ...spot,
            offerings: [...spot.offerings, ...extra.spotOfferings.filter((o) => names.has(o.typeName))],
          },
        }),
  };
}
