import type { Catalog } from '../core/catalog.js';
import type { Caps, ClusterSnapshot } from '../core/model.js';
import { capRankValue, enforceCaps } from './caps.js';
import type { Candidate } from './eva-choice.js';
import { toPlanned, type DraftInstance } from './full-reconfiguration.js';
import {
  chooseMarket,
  marketContext,
  plannedPricePerHour,
  type MarketContext,
  type MarketInput,
} from './market-choice.js';
import type { PackTask, RateModel } from './packing.js';
import type { CandidateSummary, Configuration, Plan, PlannedInstance } from './types.js';

/** Eva's chosen candidate as the round's plan: caps enforced, each instance's market chosen, the decision recorded. */

/** The chosen candidate, the round's figures the plan is built with, and what its decision record shows. */
export interface ChosenPlanInput {
  readonly scheduler: string;
  readonly now: number;
  readonly snapshot: ClusterSnapshot;
  readonly catalog: Catalog;
  readonly chosen: Candidate;
  /** Every candidate's summary, cap violations included. */
  readonly candidates: readonly CandidateSummary[];
  /** Why the decision rule chose it. */
  readonly reason: string;
  readonly caps: Caps;
  readonly packTasks: ReadonlyMap<string, PackTask>;
  readonly pinnedTaskIds: ReadonlySet<string>;
  readonly pinned: readonly { readonly jobId: string; readonly why: string }[];
  readonly model: RateModel;
  /** Whether new instances may be bought on spot (EvaOptions.spot and a catalog with spot prices). */
  readonly spot: boolean;
  /** Σ reservation prices of a job's tasks on demand, $/hour. */
  readonly jobRpOnDemand: ReadonlyMap<string, number>;
  readonly horizon: number;
  readonly paybackMargin: number;
  /** The default value of time, $ per job-hour (recorded when > 0). */
  readonly valueOfTime: number;
  /** λ, events per second (undefined before two events). */
  readonly eventRatePerSecond: number | undefined;
  readonly fullFraction: number;
}

/** The round's plan from the chosen candidate, with its decision record. */
export function chosenPlan(c: ChosenPlanInput): Plan {
  const markets: MarketInput | undefined = !c.spot
    ? undefined
    : { catalog: c.catalog, snapshot: c.snapshot, rpPerHourOfJob: (id) => c.jobRpOnDemand.get(id) ?? 0 };
  const context = markets === undefined ? undefined : marketContext(c.snapshot);
  const bought = (d: DraftInstance) =>
    chooseMarket(toPlanned([d])[0] as PlannedInstance, markets as MarketInput, context as MarketContext);
  const capped = enforceCaps(
    c.chosen.drafts,
    c.caps,
    c.packTasks,
    c.pinnedTaskIds,
    capRankValue(c.model),
    markets === undefined ? undefined : (d) => plannedPricePerHour(c.catalog, bought(d)),
  );
  const planned = toPlanned(capped.drafts);
  const configuration: Configuration = {
    instances:
      markets === undefined
        ? planned
        : planned.map((i) => chooseMarket(i, markets, context as MarketContext)),
  };
  return {
    configuration,
    decision: {
      scheduler: c.scheduler,
      nowSeconds: c.now,
      candidates: c.candidates,
      chosen: c.chosen.summary.name,
      horizonSeconds: c.horizon,
      paybackMargin: c.paybackMargin,
      ...(c.valueOfTime > 0 ? { valueOfTimePerJobHour: c.valueOfTime } : {}),
      eventRatePerSecond: c.eventRatePerSecond,
      fullFraction: c.fullFraction,
      reason: capped.note === undefined ? c.reason : `${c.reason}; ${capped.note}`,
      waiting: [...(c.chosen.capWaits ?? []), ...capped.waiting],
      pinned: c.pinned,
    },
  };
}
