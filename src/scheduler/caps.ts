import type { Caps } from '../core/model.js';
import type { DraftInstance } from './full-reconfiguration.js';
import { compositionValue, type PackTask, type RateModel } from './packing.js';
import { draftWithTasks } from './reconfiguration.js';

export interface CappedPlan {
  readonly drafts: DraftInstance[];
  readonly waiting: { jobId: string; cap: string }[];
  readonly note?: string | undefined;
}

/**
 * Hard caps ($/hour, instance count) that no plan may exceed. When a plan breaks one, whole jobs wait (multi-task
 * jobs are gang-scheduled): instances are dropped least cost-efficient first (TNRP per dollar), new instances before
 * existing ones, and instances holding pinned jobs last. The queue layer decides who waits more carefully; this is
 * the safety rail under it.
 */
export function enforceCaps(
  drafts: readonly DraftInstance[],
  caps: Caps,
  tasks: ReadonlyMap<string, PackTask>,
  pinnedTaskIds: ReadonlySet<string>,
  valueOf: (d: DraftInstance) => number,
  /** $/hour of an instance at the market it will be bought in (default: its type's on-demand price). */
  priceOf: (d: DraftInstance) => number = (d) => d.type.costPerHour,
): CappedPlan {
  const maxCost = caps.maxCostPerHour ?? Number.POSITIVE_INFINITY;
  const maxCount = caps.maxInstances ?? Number.POSITIVE_INFINITY;
  let kept = [...drafts];
  const cost = () => kept.reduce((s, d) => s + priceOf(d), 0);
  const violated = () =>
    cost() > maxCost + 1e-9 ? 'maxCostPerHour' : kept.length > maxCount ? 'maxInstances' : undefined;
  const waiting: { jobId: string; cap: string }[] = [];
  let cap = violated();
  let preemptedPinned = false;
  while (cap !== undefined) {
    const victim = kept.reduce((worst, d) =>
      rank(d, valueOf, priceOf, pinnedTaskIds) < rank(worst, valueOf, priceOf, pinnedTaskIds) ? d : worst,
    );
    if (victim.taskIds.some((id) => pinnedTaskIds.has(id))) preemptedPinned = true;
    const jobs = new Set(victim.taskIds.map((id) => (tasks.get(id) as PackTask).jobId));
    for (const jobId of [...jobs].sort()) waiting.push({ jobId, cap });
    kept = kept
      .filter((d) => d !== victim)
      .map((d) => {
        const remaining = d.taskIds.filter((id) => !jobs.has((tasks.get(id) as PackTask).jobId));
        return remaining.length === d.taskIds.length ? d : withTasksOnly(d, remaining, tasks);
      })
      .filter((d) => d.taskIds.length > 0);
    cap = violated();
  }
  return {
    drafts: kept,
    waiting,
    note: preemptedPinned
      ? 'a cap forced stopping jobs that were pinned (they resume from their last checkpoint)'
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
