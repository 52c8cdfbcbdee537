import { instancePricePerHour, setupSeconds, typesByName, type Catalog } from '../core/catalog.js';
import type { ClusterSnapshot, SchedInstance, SchedJob } from '../core/model.js';
import { offeringsOf, spotOffering, type SpotMarket, type SpotOffering } from '../core/spot.js';
import { expectedSpotCostPerHour, interruptionExceedsBound, type JobAtRisk } from './spot-cost.js';
import type { PlannedInstance } from './types.js';

/**
 * How each instance of a plan is bought. An existing instance keeps its market (a purchase option cannot change).
 * A new one goes to spot when the catalog offers its type there and its jobs allow it: when one prefers spot (and
 * none refuses it) and spot's price is below on demand's, else when its expected spot cost (spot-cost.ts) is below
 * the on-demand price; never when one interruption would delay one of its jobs past the bound its owner set
 * (`spotMaxDelaySeconds`). A spot instance without a zone is placed in the pool a spot launch gets
 * (price-capacity-optimized), so the plan, the caps and the cloud price the same pool. Chosen per instance; a plan
 * whose new spot instances would break a spot quota buys some of them on demand instead (plan-quotas.ts
 * spotQuotaFallback, applied by eva-cap-price.ts).
 */

export interface MarketInput {
  readonly catalog: Catalog;
  readonly snapshot: ClusterSnapshot;
  /** Σ reservation prices of a job's tasks, $/hour (on demand): what its work is worth. */
  readonly rpPerHourOfJob: (jobId: string) => number;
  /** Spot pools to avoid for a job (SkyPilot's EAGER_NEXT_REGION): none by default. */
  readonly avoidZones?: ((jobIds: readonly string[]) => readonly string[]) | undefined;
  /** Spot whenever offered and allowed, without pricing the risk (the spot baselines). */
  readonly riskBlind?: boolean | undefined;
  /**
   * How a new spot instance without a zone picks its pool: `price-capacity` (default) the one a spot launch gets
   * (EC2's price-capacity-optimized allocation); `cheapest` the cheapest of its type's pools, as SkyPilot's optimizer
   * picks the zone of least cost (digest industry-anchors §3), ties in price-capacity-optimized order.
   */
  readonly zoneOrder?: 'price-capacity' | 'cheapest' | undefined;
}

/** The market of one planned instance and, for a new spot one, its zone. */
export function chooseMarket(
  instance: PlannedInstance,
  input: MarketInput,
  context: MarketContext,
): PlannedInstance {
  return marketChoice(instance, input, context).planned;
}

/** A planned instance's market choice, with what the plan would buy instead and what spot saves. */
export interface MarketChoice {
  /** The instance at the market chosen for it alone. */
  readonly planned: PlannedInstance;
  /** The same instance on demand (its placement as planned): where a spot quota sends a new one back to. */
  readonly onDemand: PlannedInstance;
  /**
   * For a new spot instance, its type's on-demand $/hour less its expected spot cost (spot-cost.ts): what buying it
   * on demand instead gives up (negative when a spot preference bought it dearer once its risk is priced); 0
   * otherwise.
   */
  readonly savingPerHour: number;
}

/** `chooseMarket`, with the on-demand alternative and the saving of spot (the spot quota fallback ranks by it). */
export function marketChoice(
  instance: PlannedInstance,
  input: MarketInput,
  context: MarketContext,
): MarketChoice {
  const onDemand = withoutMarket(instance);
  const stay = (planned: PlannedInstance): MarketChoice => ({ planned, onDemand, savingPerHour: 0 });
  if (!instance.isNew) {
    // An existing spot instance carries the zone it is in, so it is priced at its own pool.
    const existing = context.existing.get(instance.id);
    if (existing?.market !== 'spot') return stay(onDemand);
    return stay(
      existing.placement === undefined
        ? { ...instance, market: 'spot' }
        : { ...instance, market: 'spot', placement: existing.placement },
    );
  }
  const jobIds = [...new Set(instance.taskIds.map((id) => context.jobOfTask.get(id) ?? ''))].filter(
    (id) => id !== '',
  );
  const jobs = jobIds.flatMap((id) => {
    const job = context.jobs.get(id);
    return job === undefined ? [] : [job];
  });
  if (jobs.some((j) => j.spot === 'never')) return stay(onDemand);
  const avoid = input.avoidZones?.(jobIds) ?? [];
  const offering =
    input.zoneOrder === 'cheapest' && instance.placement?.zone === undefined
      ? cheapestOffering(input.catalog.spot, instance.typeName, avoid)
      : spotOffering(input.catalog.spot, instance.typeName, instance.placement?.zone, avoid);
  if (offering === undefined) return stay(onDemand);
  const spot: PlannedInstance = {
    ...instance,
    market: 'spot',
    placement: instance.placement ?? { zone: offering.zone },
  };
  const riskBlind = input.riskBlind === true;
  const type = typesByName(input.catalog).get(instance.typeName);
  if (type === undefined)
    return stay(riskBlind || jobs.some((j) => j.spot === 'preferred') ? spot : onDemand);
  // The owner's bound on the ETA slip wins over a spot preference: one interruption must not delay the job past it.
  const now = input.snapshot.nowSeconds;
  if (!riskBlind && jobs.some((j) => interruptionExceedsBound(j, now, setupSeconds(type))))
    return stay(onDemand);
  const atRisk: JobAtRisk[] = jobs.map((job) => ({ job, rpPerHour: input.rpPerHourOfJob(job.id) }));
  const expected = expectedSpotCostPerHour(offering, atRisk, now, setupSeconds(type));
  const savingPerHour = type.costPerHour - expected;
  // A preference takes the cheaper, riskier market, not a dearer one: where spot's price is at or above on demand's
  // (price overrides discount on demand), spot would cost more and risk the work too, and admission sizes the job on
  // demand there (queue/caps.ts FootprintPrices): bought on spot, the plan would break the $ cap admission kept.
  const preferred = jobs.some((j) => j.spot === 'preferred') && offering.pricePerHour < type.costPerHour;
  return riskBlind || preferred || savingPerHour > 0
    ? { planned: spot, onDemand, savingPerHour }
    : stay(onDemand);
}

export interface MarketContext {
  readonly jobs: ReadonlyMap<string, SchedJob>;
  readonly jobOfTask: ReadonlyMap<string, string>;
  readonly existing: ReadonlyMap<string, SchedInstance>;
}

export function marketContext(snapshot: ClusterSnapshot): MarketContext {
  return {
    jobs: new Map(snapshot.jobs.map((j) => [j.id, j])),
    jobOfTask: new Map(snapshot.tasks.map((t) => [t.id, t.jobId])),
    existing: new Map(snapshot.instances.map((i) => [i.id, i])),
  };
}

/** Every instance of a plan with its market. */
export function assignMarkets(instances: readonly PlannedInstance[], input: MarketInput): PlannedInstance[] {
  const context = marketContext(input.snapshot);
  return instances.map((i) => chooseMarket(i, input, context));
}

/**
 * $/hour of a planned instance at its market's price (spot: its zone's pool, else the one a launch gets). An existing
 * spot instance whose pool the catalog lacks (a catalog file replaced across a restart) is priced on demand,
 * as its bill is (instance-market.ts `billedPricePerHour`): EC2 charges spot at most that, and a round that threw here
 * would stop every plan.
 */
export function plannedPricePerHour(catalog: Catalog, instance: PlannedInstance): number {
  const market = instance.market ?? 'on-demand';
  const zone = instance.placement?.zone;
  if (
    market === 'spot' &&
    !instance.isNew &&
    spotOffering(catalog.spot, instance.typeName, zone) === undefined
  )
    return instancePricePerHour(catalog, instance.typeName, 'on-demand');
  return instancePricePerHour(catalog, instance.typeName, market, zone);
}

/**
 * The cheapest spot pool of `typeName` outside `avoidZones` (all of them when every one is avoided, as `spotOffering`
 * falls back), the first in price-capacity-optimized order among equally cheap ones.
 */
function cheapestOffering(
  market: SpotMarket | undefined,
  typeName: string,
  avoidZones: readonly string[],
): SpotOffering | undefined {
  if (market === undefined) return undefined;
  const all = offeringsOf(market, typeName);
  const allowed = all.filter((o) => !avoidZones.includes(o.zone));
  return (allowed.length > 0 ? allowed : all).reduce<SpotOffering | undefined>(
    (best, o) => (best === undefined || o.pricePerHour < best.pricePerHour ? o : best),
    undefined,
  );
}

function withoutMarket(instance: PlannedInstance): PlannedInstance {
  if (instance.market === undefined) return instance;
  const { market: _market, ...rest } = instance;
  return rest;
}

/**
 * The catalog a spot-aware plan packs with: each type at its spot pool's price where the catalog offers it (what a
 * new instance of it will most likely cost), on demand elsewhere. Reservation prices keep the on-demand catalog, so
 * a set of tasks pays for a spot instance far more often (the risk is priced per instance by `chooseMarket`).
 */
export function spotPlanningCatalog(catalog: Catalog): Catalog {
  return {
    ...catalog,
    types: catalog.types.map((t) => {
      const offering = spotOffering(catalog.spot, t.name);
      return offering === undefined || offering.pricePerHour >= t.costPerHour
        ? t
        : { ...t, costPerHour: offering.pricePerHour };
    }),
  };
}
