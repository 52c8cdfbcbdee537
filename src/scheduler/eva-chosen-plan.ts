import type { Caps } from '../core/model.js';
import { capRankValue, enforceCaps } from './caps.js';
import type { Candidate } from './eva-choice.js';
import type { PlanMarkets } from './eva-cap-price.js';
import type { PackTask, RateModel } from './packing.js';
import type { PriceBook } from './reservation-price.js';
import type { CandidateSummary, Configuration, Plan } from './types.js';

/** Eva's chosen candidate as the round's plan: each instance's market chosen, caps and quotas enforced, the decision recorded. */

/** The chosen candidate, the round's figures the plan is built with, and what its decision record shows. */
export interface ChosenPlanInput {
  readonly scheduler: string;
  readonly now: number;
  readonly chosen: Candidate;
  /** Every candidate's summary, cap violations included. */
  readonly candidates: readonly CandidateSummary[];
  /** Why the decision rule chose it. */
  readonly reason: string;
  readonly caps: Caps;
  /** The round's tasks as its candidates were packed from (PlanningInput.tasks). */
  readonly tasks: ReadonlyMap<string, PackTask>;
  readonly pinnedTaskIds: ReadonlySet<string>;
  readonly pinned: readonly { readonly jobId: string; readonly why: string }[];
  readonly model: RateModel;
  /** How each instance is bought and what it costs there (the price the caps are held to). */
  readonly markets: PlanMarkets;
  /** The types new instances may be merged into over `maxInstances` (caps.ts enforceCaps). */
  readonly book: PriceBook;
  readonly horizon: number;
  readonly paybackMargin: number;
  /** The task prices savings were figured at, and θ with packed prices (DecisionRecord.prices). */
  readonly prices: 'standalone' | 'packed';
  readonly packingEfficiency: number;
  /** The default value of time, $ per job-hour (recorded when > 0). */
  readonly valueOfTime: number;
  /** λ, events per second (undefined before two events). */
  readonly eventRatePerSecond: number | undefined;
  readonly fullFraction: number;
}

/** The round's plan from the chosen candidate, with its decision record. */
export function chosenPlan(c: ChosenPlanInput): Plan {
  const { markets } = c;
  const capped = enforceCaps(
    c.chosen.drafts,
    c.caps,
    c.tasks,
    c.pinnedTaskIds,
    capRankValue(c.model),
    markets.pricePerHour,
    c.book,
  );
  // As bought together: where the plan's spot instances would break a spot quota, some are bought on demand.
  const configuration: Configuration = { instances: capped.drafts.map(capped.bought.planned) };
  return {
    configuration,
    decision: {
      scheduler: c.scheduler,
      nowSeconds: c.now,
      candidates: c.candidates,
      chosen: c.chosen.summary.name,
      horizonSeconds: c.horizon,
      paybackMargin: c.paybackMargin,
      prices: c.prices,
      ...(c.prices === 'packed' ? { packingEfficiency: c.packingEfficiency } : {}),
      ...(c.valueOfTime > 0 ? { valueOfTimePerJobHour: c.valueOfTime } : {}),
      eventRatePerSecond: c.eventRatePerSecond,
      fullFraction: c.fullFraction,
      reason: capped.note === undefined ? c.reason : `${c.reason}; ${capped.note}`,
      waiting: [...(c.chosen.capWaits ?? []), ...capped.waiting],
      pinned: c.pinned,
    },
  };
}
