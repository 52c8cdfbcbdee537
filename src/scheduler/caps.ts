import type { Caps } from '../core/model.js';
import { mergeNewInstances } from './count-cap-merge.js';
import { toPlanned, type DraftInstance } from './full-reconfiguration.js';
import { compositionValue, type PackTask, type RateModel } from './packing.js';
import { dimensionUse, planQuotaBreaches, quotaGroupOf, type QuotaBreach } from './plan-quotas.js';
import { draftWithTasks } from './reconfiguration.js';
import type { PriceBook } from './reservation-price.js';
import type { PlannedInstance } from './types.js';

export interface CappedPlan {
  readonly drafts: DraftInstance[];
  /** The kept drafts as bought: each one's market and price in this plan (spot quotas applied). */
  readonly bought: BoughtPlan;
  readonly waiting: { jobId: string; cap: string }[];
  readonly note?: string | undefined;
}

/** A plan's instances as bought together: the market each is bought in, and its $/hour there. */
export interface BoughtPlan {
  planned(d: DraftInstance): PlannedInstance;
  pricePerHour(d: DraftInstance): number;
}

/**
 * How a plan is bought. Per instance (a price alone, every instance on demand), or as a whole (eva-cap-price.ts: a
 * draft's price alone, and `buy`, which applies the spot quotas across the plan): a spot quota makes one instance's
 * market depend on the others', so every cap is checked on the plan as bought.
 */
export type PlanPricing = ((d: DraftInstance) => number) | PlanPrice;

/** The price of a draft at its own market choice, and `buy`: the whole plan's markets and prices under the caps. */
export interface PlanPrice {
  (d: DraftInstance): number;
  buy(drafts: readonly DraftInstance[], caps: Caps): BoughtPlan;
}

/** A plan bought under the caps: as `pricing` buys it, or every instance on demand at `pricing`'s price. */
export function buyPlan(pricing: PlanPricing, drafts: readonly DraftInstance[], caps: Caps): BoughtPlan {
  if ('buy' in pricing) return pricing.buy(drafts, caps);
  return { planned: (d) => toPlanned([d])[0] as PlannedInstance, pricePerHour: pricing };
}

/**
 * Hard caps ($/hour, instance count, quotas) that no plan may exceed. Over the instance count, new instances are first
 * merged two into one where a type holds both (count-cap-merge.ts). When a plan still breaks one, whole jobs wait
 * (multi-task jobs are gang-scheduled): instances are dropped least cost-efficient first (TNRP per dollar), new
 * instances before existing ones, and instances holding pinned jobs last; for a quota, only instances that count
 * against it. The plan is bought anew after each drop (spot quotas move new spot instances on demand,
 * plan-quotas.ts), so the $/hour cap is held at the prices it will be bought at and the quotas on the markets each
 * instance is bought in, as the round's check counts them (round/plan-caps.ts). The queue layer decides who waits more
 * carefully; this is the safety rail under it.
 */
export function enforceCaps(
  drafts: readonly DraftInstance[],
  caps: Caps,
  tasks: ReadonlyMap<string, PackTask>,
  pinnedTaskIds: ReadonlySet<string>,
  valueOf: (d: DraftInstance) => number,
  /** How the plan is bought and at what $/hour (default: every instance on demand at its type's price). */
  pricing: PlanPricing = (d) => d.type.costPerHour,
  /** The types new instances may be merged into over `maxInstances` (count-cap-merge.ts); without it, none are. */
  book?: PriceBook,
): CappedPlan {
  const maxCost = caps.maxCostPerHour ?? Number.POSITIVE_INFINITY;
  const maxCount = caps.maxInstances ?? Number.POSITIVE_INFINITY;
  let kept = [...drafts];
  let bought = buyPlan(pricing, kept, caps);
  const quotaInstances = () =>
    kept.map((d) => ({ draft: d, type: d.type, market: bought.planned(d).market }));
  /** The first cap the plan breaks, and which instances may be dropped for it (undefined: any). */
  const violated = (): { cap: string; breach?: QuotaBreach } | undefined => {
    if (kept.reduce((s, d) => s + bought.pricePerHour(d), 0) > maxCost + 1e-9)
      return { cap: 'maxCostPerHour' };
    if (kept.length > maxCount) return { cap: 'maxInstances' };
    const breach = planQuotaBreaches(quotaInstances(), caps)[0];
    return breach === undefined ? undefined : { cap: breach.cap, breach };
  };
  const waiting: { jobId: string; cap: string }[] = [];
  let broken = violated();
  let preemptedPinned = false;
  while (broken !== undefined) {
    // Too many instances: two new ones made one, while any pair fits on one type, before a job waits.
    const merged =
      broken.cap === 'maxInstances' && book !== undefined
        ? mergeNewInstances(kept, tasks, book, pricing)
        : undefined;
    if (merged !== undefined) {
      kept = merged;
      bought = buyPlan(pricing, kept, caps);
      broken = violated();
      continue;
    }
    const { breach } = broken;
    // A quota is relieved only by instances that count against it.
    const droppable =
      breach === undefined
        ? kept
        : quotaInstances()
            .filter(
              (i) =>
                quotaGroupOf(i, caps.familyGroups) === breach.group && dimensionUse(i, breach.dimension) > 0,
            )
            .map((i) => i.draft);
    const rankOf = (d: DraftInstance) => rank(d, valueOf, bought.pricePerHour, pinnedTaskIds);
    const victim = droppable.reduce((worst, d) => (rankOf(d) < rankOf(worst) ? d : worst));
    if (victim.taskIds.some((id) => pinnedTaskIds.has(id))) preemptedPinned = true;
    const jobs = new Set(victim.taskIds.map((id) => (tasks.get(id) as PackTask).jobId));
    for (const jobId of [...jobs].sort()) waiting.push({ jobId, cap: broken.cap });
    kept = kept
      .filter((d) => d !== victim)
      .map((d) => {
        const remaining = d.taskIds.filter((id) => !jobs.has((tasks.get(id) as PackTask).jobId));
        return remaining.length === d.taskIds.length ? d : withTasksOnly(d, remaining, tasks);
      })
      .filter((d) => d.taskIds.length > 0);
    bought = buyPlan(pricing, kept, caps);
    broken = violated();
  }
  return {
    drafts: kept,
    bought,
    waiting,
    note: preemptedPinned
      ? // The diff cannot stop a job being launched or moved: it keeps its instances until that ends.
        'a cap would stop jobs being launched or moved: they run on until that ends, then stop (and resume from ' +
        'their last checkpoint)'
      : undefined,
  };
}

/**
 * The draft holding only `taskIds`: its composition and usage rebuilt too, so that what the cut plan is valued at
 * (TNRP, interference) and ranked by is the tasks it keeps, not those of the jobs the cap sent back to wait.
 */
function withTasksOnly(
  d: DraftInstance,
  taskIds: readonly string[],
  tasks: ReadonlyMap<string, PackTask>,
): DraftInstance {
  const rebuilt = draftWithTasks(
    d,
    taskIds.map((id) => tasks.get(id) as PackTask),
  );
  return d.placement === undefined ? rebuilt : { ...rebuilt, placement: d.placement };
}

/** What `enforceCaps` ranks an instance by: its tasks' TNRP (Eva §4.3), without the multi-task correction. */
export function capRankValue(model: RateModel): (d: DraftInstance) => number {
  return (d) => compositionValue(d.composition, model, false);
}

/**
 * Lower = dropped first: new instances, then existing ones, then (a hard cap is hard) those holding pinned jobs;
 * within each group the least TNRP per dollar.
 */
function rank(
  d: DraftInstance,
  valueOf: (d: DraftInstance) => number,
  priceOf: (d: DraftInstance) => number,
  pinned: ReadonlySet<string>,
): number {
  const efficiency = valueOf(d) / priceOf(d);
  const group = d.isNew ? 0 : d.taskIds.some((id) => pinned.has(id)) ? 2e6 : 1e6;
  return group + efficiency;
}
