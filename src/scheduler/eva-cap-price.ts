import type { Catalog } from '../core/catalog.js';
import type { ClusterSnapshot } from '../core/model.js';
import { toPlanned, type DraftInstance } from './full-reconfiguration.js';
import { chooseMarket, marketContext, plannedPricePerHour, type MarketInput } from './market-choice.js';
import type { PlannedInstance } from './types.js';

/**
 * What Eva's plan instances are bought as and what they cost in dollars: each at the market it will be bought in (an
 * existing instance at its own, a new one where `chooseMarket` puts it), the price the round's check charges a plan
 * (round/plan-caps.ts). The caps are held to this price, not to the one candidates are valued at: that one carries
 * the rebalance risk premium of a flagged spot instance (eva-pack-input.ts), a valuation the fleet never pays.
 */
export interface PlanMarkets {
  /** The draft as the plan lists it, its market chosen when spot is on. */
  planned(d: DraftInstance): PlannedInstance;
  /** $/hour the draft costs at that market. */
  pricePerHour(d: DraftInstance): number;
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
  // The caps check every candidate's drafts, and the cut re-sums them as it drops instances: each draft (final once
  // packed) is bought and priced once a round.
  const bought = new WeakMap<DraftInstance, { planned: PlannedInstance; pricePerHour: number }>();
  const buy = (d: DraftInstance): { planned: PlannedInstance; pricePerHour: number } => {
    let b = bought.get(d);
    if (b === undefined) {
      const p = toPlanned([d])[0] as PlannedInstance;
      const planned = markets === undefined || context === undefined ? p : chooseMarket(p, markets, context);
      b = { planned, pricePerHour: plannedPricePerHour(catalog, planned) };
      bought.set(d, b);
    }
    return b;
  };
  return { planned: (d) => buy(d).planned, pricePerHour: (d) => buy(d).pricePerHour };
}
