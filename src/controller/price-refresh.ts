import {
  applyPriceOverrides,
  priceOverrideProblems,
  type Catalog,
  type InstanceType,
  type PriceOverrides,
} from '../core/catalog.js';
import { isPricePerHour } from '../core/price-per-hour.js';
import { spotInZones } from '../core/spot.js';
import { catalogFamilies, fetchOnDemandPrices, type PricingApi } from '../cloud/aws/pricing.js';
import type { Clock } from './clock.js';
import type { ControllerConfig } from './config.js';
import type { ControllerLogger } from './seams.js';

/**
 * Periodic on-demand price refresh for the running controller (Prices: "the controller
 * refreshes prices periodically and falls back to the bundled catalog"). Only prices change: the set of types, their
 * capacities and launch delays, and the spot pools, stay those of the catalog the controller started with, so a
 * refresh can never make a placed task's instance type or a spot instance's pool unknown. A failed or empty refresh
 * keeps the catalog in use (at first the bundled one) and logs a warning; the controller keeps running either way. A
 * spot pool priced above its type's new on-demand price is priced at it (EC2 sells spot at most at on demand, and a
 * catalog file holding such a pool is refused). The configuration's price overrides (Savings Plans, reserved prices)
 * are laid over every refreshed catalog, so a refresh never hands the controller list prices; then the spot pools
 * outside the fleet's zones are dropped, as at start.
 */

export const SECONDS_PER_HOUR = 3600;

/** Whether this configuration refreshes prices: the aws provider, a positive period, and not in a dry run unless asked. */
export function shouldRefreshPrices(
  config: Pick<ControllerConfig, 'provider' | 'priceRefreshHours' | 'dryRun' | 'priceRefreshInDryRun'>,
): boolean {
  if (config.provider !== 'aws' || config.priceRefreshHours <= 0) return false;
  return !config.dryRun || config.priceRefreshInDryRun;
}

export interface RepricedCatalog {
  readonly catalog: Catalog;
  /** "c7i.large 0.0893 → 0.09" for every type whose price moved. */
  readonly changed: readonly string[];
  /** Types the price list did not price, or priced outside a catalog's bounds: they keep their current price. */
  readonly unpriced: readonly string[];
}

/**
 * The catalog with each type's costPerHour replaced by its fetched price (types without one keep theirs, and so do
 * types priced outside the bounds a catalog file is held to: such a price is a fault of the list, not a price).
 */
export function repriceCatalog(
  current: Catalog,
  pricePerHourOf: ReadonlyMap<string, number>,
): RepricedCatalog {
  const unpriced: string[] = [];
  const types = current.types.map((t): InstanceType => {
    const costPerHour = pricePerHourOf.get(t.name);
    if (costPerHour === undefined || !isPricePerHour(costPerHour)) {
      unpriced.push(t.name);
      return t;
    }
    return { ...t, costPerHour };
  });
  const catalog = { ...current, types };
  return { catalog, changed: onDemandPriceChanges(current, catalog), unpriced };
}

/** "c7i.large 0.0893 → 0.09" for every type of `after` whose on-demand price differs from its price in `before`. */
export function onDemandPriceChanges(before: Catalog, after: Catalog): string[] {
  const was = new Map(before.types.map((t) => [t.name, t.costPerHour]));
  return after.types.flatMap((t) => {
    const old = was.get(t.name);
    return old === undefined || old === t.costPerHour ? [] : [`${t.name} ${old} → ${t.costPerHour}`];
  });
}

/**
 * `catalog` with each spot pool priced above its type's on-demand price (which a catalog file may not hold: EC2's
 * default maximum spot price is the on-demand price) priced at it instead, and those pools ("c7i.large in us-east-1a
 * 0.04195 → 0.02"). The spot prices are the catalog's own snapshot, never refreshed, so a lowered on-demand list price
 * can pass them. The pools stay rather than go: a spot instance running in one is still billed, capped and planned
 * at its pool's price, and never more than EC2 could charge.
 */
export function spotCappedAtOnDemand(catalog: Catalog): {
  readonly catalog: Catalog;
  readonly capped: readonly string[];
} {
  const { spot } = catalog;
  if (spot === undefined) return { catalog, capped: [] };
  const onDemand = new Map(catalog.types.map((t) => [t.name, t.costPerHour]));
  const capped: string[] = [];
  const offerings = spot.offerings.map((o) => {
    const cap = onDemand.get(o.typeName);
    if (cap === undefined || o.pricePerHour <= cap) return o;
    capped.push(`${o.typeName} in ${o.zone} ${o.pricePerHour} → ${cap}`);
    return { ...o, pricePerHour: cap };
  });
  return capped.length === 0
    ? { catalog, capped }
    : { catalog: { ...catalog, spot: { ...spot, offerings } }, capped };
}

/** Fetch the on-demand Linux prices of the catalog's families and reprice it. Throws when nothing was priced. */
export async function fetchRepricedCatalog(
  pricing: PricingApi,
  regionCode: string,
  current: Catalog,
): Promise<RepricedCatalog & { readonly warnings: readonly string[] }> {
  const warnings: string[] = [];
  const prices = await fetchOnDemandPrices(pricing, regionCode, catalogFamilies(current), warnings);
  const pricePerHourOf = new Map([...prices.values()].map((p) => [p.typeName, p.costPerHour]));
  const repriced = repriceCatalog(current, pricePerHourOf);
  if (repriced.unpriced.length === current.types.length)
    throw new Error(
      `the Price List API priced none of the catalog's ${current.types.length} types in ${regionCode}`,
    );
  return { ...repriced, warnings };
}

export type PriceRefreshOutcome =
  | {
      readonly ok: true;
      readonly catalog: Catalog;
      /** The on-demand prices the controller plans with (overrides applied) that this refresh moved. */
      readonly changed: readonly string[];
    }
  | { readonly ok: false; readonly error: string };

export interface PriceRefresherDeps {
  readonly pricing: PricingApi;
  /** The region whose prices apply (where instances launch). */
  readonly regionCode: string;
  /**
   * The catalog in use at start (normally the bundled one), at its list prices and with the spot pools of every zone:
   * the fallback while no refresh has succeeded, and what each refresh reprices.
   */
  readonly initial: Catalog;
  /** The configuration's `priceOverrides`, applied to every repriced catalog before the controller gets it. */
  readonly priceOverrides?: PriceOverrides | undefined;
  /**
   * The zones the fleet launches in (EC2: its subnets'); undefined where any will do. The spot pools elsewhere are
   * dropped after the overrides apply: the configuration was checked against the whole catalog, and may price spot
   * of a type whose pools all lie outside these zones.
   */
  readonly spotZones?: readonly string[] | undefined;
  readonly clock: Clock;
  readonly periodHours: number;
  readonly logger: ControllerLogger;
  /** Hands a repriced catalog to the controller (Controller.applyCatalog). */
  readonly apply: (catalog: Catalog) => Promise<void> | void;
}

/** Refreshes prices at start and then every `periodHours`, in the background, on the injected clock. */
export class PriceRefresher {
  /** At list prices, in every zone: what the next refresh reprices (the controller gets a copy, see forController). */
  private listCatalog: Catalog;
  private currentCatalog: Catalog;
  private running = false;
  private wake = new AbortController();
  private loopDone: Promise<void> | undefined;

  constructor(private readonly deps: PriceRefresherDeps) {
    if (!(deps.periodHours > 0)) throw new Error(`periodHours must be > 0 (got ${deps.periodHours})`);
    this.listCatalog = deps.initial;
    this.currentCatalog = this.forController(deps.initial);
  }

  /**
   * The catalog of the last successful refresh, or the initial one (with the overrides and in the fleet's zones, as
   * the controller has it).
   */
  get catalog(): Catalog {
    return this.currentCatalog;
  }

  /** One refresh: on success the controller gets the new catalog; on failure the current one stays. Never throws. */
  async refreshNow(): Promise<PriceRefreshOutcome> {
    try {
      const fetched = await fetchRepricedCatalog(this.deps.pricing, this.deps.regionCode, this.listCatalog);
      for (const w of fetched.warnings) this.deps.logger.warn(`price refresh: ${w}`);
      if (fetched.unpriced.length > 0)
        this.deps.logger.warn('price refresh: some types were not priced; they keep their current price', {
          unpriced: fetched.unpriced,
        });
      const sellable = spotCappedAtOnDemand(fetched.catalog);
      if (sellable.capped.length > 0)
        this.deps.logger.warn(
          "price refresh: spot pools above their type's new on-demand price are priced at it " +
            '(EC2 sells spot at most at the on-demand price)',
          { pools: sellable.capped },
        );
      const catalog = this.forController(sellable.catalog, true);
      await this.deps.apply(catalog);
      // The list catalog keeps the snapshot's spot prices: a later refresh that raises the on-demand price again
      // gives the pools their own prices back.
      this.listCatalog = fetched.catalog;
      // What moved for the controller: a list price an override replaces did not.
      const changed = onDemandPriceChanges(this.currentCatalog, catalog);
      this.currentCatalog = catalog;
      this.deps.logger.info('prices refreshed', { changed });
      return { ok: true, catalog, changed };
    } catch (e) {
      const error = e instanceof Error ? e.message : String(e);
      this.deps.logger.warn('price refresh failed; keeping the current catalog', { error });
      return { ok: false, error };
    }
  }

  /**
   * The catalog as the controller plans with it: the overrides laid over it, then only the fleet's zones' pools. On a
   * refresh (`refreshed`), a per-type override the new prices refuse (a spot price now above its type's lowered list
   * price) is left out of this catalog and said, rather than failing the refresh: one stale override must not keep
   * every other type at its old price for good. At start the controller refused it.
   */
  private forController(listCatalog: Catalog, refreshed = false): Catalog {
    const { spotZones } = this.deps;
    const priceOverrides =
      refreshed && this.deps.priceOverrides !== undefined
        ? this.applicableOverrides(listCatalog, this.deps.priceOverrides)
        : this.deps.priceOverrides;
    const priced =
      priceOverrides === undefined
        ? listCatalog
        : applyPriceOverrides(listCatalog, priceOverrides, 'priceOverrides');
    return spotZones === undefined ? priced : { ...priced, spot: spotInZones(priced.spot, spotZones) };
  }

  /** `overrides` without the per-type prices `listCatalog` refuses, each refused one warned about. */
  private applicableOverrides(listCatalog: Catalog, overrides: PriceOverrides): PriceOverrides {
    const refused = priceOverrideProblems(listCatalog, overrides);
    if (refused.length === 0) return overrides;
    // A field left with no price goes: an empty table is no override.
    const without = (field: 'pricePerType' | 'spotPricePerType'): Record<string, number> | undefined => {
      const left = new Set(refused.filter((p) => p.path[0] === field).map((p) => p.path[1]));
      const kept = Object.entries(overrides[field] ?? {}).filter(([name]) => !left.has(name));
      return kept.length === 0 ? undefined : Object.fromEntries(kept);
    };
    for (const p of refused)
      this.deps.logger.warn(
        `price refresh: priceOverrides.${p.path.join('.')} left out until its prices allow it: ${p.message}`,
      );
    const { pricePerType: _prices, spotPricePerType: _spotPrices, ...rest } = overrides;
    const pricePerType = without('pricePerType');
    const spotPricePerType = without('spotPricePerType');
    return {
      ...rest,
      ...(pricePerType === undefined ? {} : { pricePerType }),
      ...(spotPricePerType === undefined ? {} : { spotPricePerType }),
    };
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.loopDone = this.loop();
  }

  /** Stop waiting for the next refresh; an in-flight request is not awaited (it cannot block a shutdown). */
  stop(): void {
    this.running = false;
    this.wake.abort();
  }

  /** Resolves once the loop has ended (tests). */
  async stopped(): Promise<void> {
    await this.loopDone;
  }

  private async loop(): Promise<void> {
    while (this.running) {
      await this.refreshNow();
      if (!this.running) break;
      await this.deps.clock.sleep(this.deps.periodHours * SECONDS_PER_HOUR, this.wake.signal);
    }
  }
}
