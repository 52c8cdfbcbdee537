import type { Catalog } from '../core/catalog.js';
import type { Caps, ClusterSnapshot } from '../core/model.js';
import type { BoughtPlan, PlanPrice } from './caps.js';
import { toPlanned, type DraftInstance } from './full-reconfiguration.js';
import { marketChoice, marketContext, plannedPricePerHour, type MarketInput } from './market-choice.js';
import { spotQuotaFallback } from './plan-quotas.js';
import type { PlannedInstance } from './types.js';

/**
 * What Eva's plan instances are bought as and what they cost in dollars: each at the market it will be bought in (an
 * existing instance at its own, a new one where `chooseMarket` puts it, or on demand where the plan's spot instances
 * would break a spot quota), the price the round's check charges a plan (round/plan-caps.ts). The caps are held to
 * this price, not to the one candidates are valued at: that one carries the rebalance risk premium of a flagged spot
 * instance (eva-pack-input.ts), a valuation the fleet never pays.
 */
export interface PlanMarkets {
  /** The draft as the plan lists it alone, its market chosen when spot is on (no quota applied). */
  planned(d: DraftInstance): PlannedInstance;
  /** $/hour the draft costs at that market; `pricePerHour.buy` buys a whole plan under the caps' spot quotas. */
  readonly pricePerHour: PlanPrice;
}

interface Bought {
  readonly planned: PlannedInstance;
  readonly pricePerHour: number;
  /** The draft on demand, when it was chosen spot alone (where a spot quota sends it). */
  readonly onDemand?: { readonly planned: PlannedInstance; readonly pricePerHour: number } | undefined;
  readonly savingPerHour: number;
}

/** The round's markets: spot when `spot` (EvaOptions.spot with a catalog offering it), else every plan instance on demand. */
export function planMarkets(
  catalog: Catalog,
  snapshot: ClusterSnapshot,
  spot: boolean,
  /** Σ reservation prices of a job's tasks on demand, $/hour: the work a spot interruption puts at risk. */
  jobRpOnDemand: ReadonlyMap<string, number>,
): PlanMarkets {
  const markets: MarketInput | undefined = spot
    ? { catalog, snapshot, rpPerHourOfJob: (id) => jobRpOnDemand.get(id) ?? 0 }
    : undefined;
  const context = markets === undefined ? undefined : marketContext(snapshot);
  // The caps check every candidate's drafts, and the cut re-buys them as it drops instances: each draft (final once
  // packed) has its market chosen and priced once a round.
  const bought = new WeakMap<DraftInstance, Bought>();
  const alone = (d: DraftInstance): Bought => {
    let b = bought.get(d);
    if (b === undefined) {
      const p = toPlanned([d])[0] as PlannedInstance;
      if (markets === undefined || context === undefined)
        b = { planned: p, pricePerHour: plannedPricePerHour(catalog, p), savingPerHour: 0 };
      else {
        const c = marketChoice(p, markets, context);
        b = {
          planned: c.planned,
          pricePerHour: plannedPricePerHour(catalog, c.planned),
          savingPerHour: c.savingPerHour,
          ...(c.planned.isNew && c.planned.market === 'spot'
            ? { onDemand: { planned: c.onDemand, pricePerHour: plannedPricePerHour(catalog, c.onDemand) } }
            : {}),
        };
      }
      bought.set(d, b);
    }
    return b;
  };
  const buy = (drafts: readonly DraftInstance[], caps: Caps): BoughtPlan => {
    const fallback = spotQuotaFallback(
      drafts.map((d) => {
        const b = alone(d);
        return {
          id: d.id,
          isNew: d.isNew,
          type: d.type,
          market: b.planned.market,
          savingPerHour: b.savingPerHour,
        };
      }),
      caps,
    );
    const asBought = (d: DraftInstance) => {
      const b = alone(d);
      return fallback.has(d.id) && b.onDemand !== undefined ? b.onDemand : b;
    };
    return { planned: (d) => asBought(d).planned, pricePerHour: (d) => asBought(d).pricePerHour };
  };
  const pricePerHour: PlanPrice = Object.assign((d: DraftInstance) => alone(d).pricePerHour, { buy });
  return { planned: (d) => alone(d).planned, pricePerHour };
}
