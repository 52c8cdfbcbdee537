import { DEFAULT_SPOT_PREFERENCE, offeringsOf } from '../../core/spot.js';
import type { PriceBook } from '../../scheduler/reservation-price.js';
import type { JobSpec } from '../job-spec/spec.js';

/**
 * What a dry run quotes on spot besides on demand: a job that may use spot, on a controller that buys spot, is bought
 * there whenever its host's spot price with the interruption risk priced in beats on demand (market-choice.ts), so a
 * quote at the on-demand price alone overstates it about twofold.
 */

export interface DryRunSpotTask {
  readonly name: string;
  /** The task's standalone host (the dry run's instanceType). */
  readonly instanceType: string;
  /** Its cheapest spot pool. */
  readonly zone: string;
  /** That pool's $/hour. */
  readonly costPerHour: number;
}

export interface DryRunSpotQuote {
  /** Σ over replicas of each task's host at its cheapest spot pool (on demand where it has none), $/hour. */
  readonly costPerHour: number;
  /** The tasks whose host is offered on spot. */
  readonly tasks: readonly DryRunSpotTask[];
}

/**
 * The job alone at its hosts' cheapest spot prices, or undefined: the controller buys no spot (`spotMarket`), the job
 * never runs on spot, or none of its hosts is offered there for less than on demand.
 */
export function dryRunSpotQuote(
  spec: JobSpec,
  priceBook: PriceBook,
  spotMarket: boolean,
): DryRunSpotQuote | undefined {
  const market = priceBook.catalog.spot;
  if (!spotMarket || market === undefined || (spec.spot ?? DEFAULT_SPOT_PREFERENCE) === 'never')
    return undefined;
  let costPerHour = 0;
  const tasks: DryRunSpotTask[] = [];
  for (const t of spec.tasks) {
    const type = priceBook.minType(t.demand);
    if (type === undefined) return undefined;
    const cheapest = [...offeringsOf(market, type.name)].sort((a, b) => a.pricePerHour - b.pricePerHour)[0];
    if (cheapest === undefined || cheapest.pricePerHour >= type.costPerHour) {
      costPerHour += type.costPerHour * t.replicas;
      continue;
    }
    costPerHour += cheapest.pricePerHour * t.replicas;
    tasks.push({
      name: t.name,
      instanceType: type.name,
      zone: cheapest.zone,
      costPerHour: cheapest.pricePerHour,
    });
  }
  return tasks.length === 0 ? undefined : { costPerHour, tasks };
}
