import type { DraftInstance, PlacementRules } from './full-reconfiguration.js';
import type { Composition, PackTask, TaskClass } from './packing.js';

/**
 * A job that never runs on spot (`spot: never`), or that one interruption would now delay past its owner's bound
 * (`spotMaxDelaySeconds`), stays off spot capacity: a new instance holding one of its tasks is bought on demand
 * (market-choice.ts), and these rules keep its tasks (PackTask.onDemandOnly, eva-pack-input.ts) off the fleet's
 * existing spot instances, whose free room the packing loops would otherwise fill. Other rules (latency-aware
 * placement) are asked as before.
 */
export class SpotHostRules implements PlacementRules {
  constructor(
    private readonly spotInstanceIds: ReadonlySet<string>,
    private readonly inner?: PlacementRules,
  ) {}

  // A member already on the spot instance may stay: a class hands out its members on the instance first
  // (TaskClass.take), so a class with one there left places that one.
  mayFill(cls: TaskClass, draft: DraftInstance): boolean {
    if (cls.onDemandOnly && this.spotInstanceIds.has(draft.id) && cls.countOn(draft.id) === 0) return false;
    return this.inner === undefined || cls.latency === undefined || this.inner.mayFill(cls, draft);
  }

  mayReuse(comp: Composition, instanceId: string): boolean {
    if (comp.onDemandMembers > 0 && this.spotInstanceIds.has(instanceId) && !staysOn(comp, instanceId))
      return false;
    return this.inner === undefined || comp.latencyMembers === 0 || this.inner.mayReuse(comp, instanceId);
  }

  placed(cls: TaskClass, draft: DraftInstance): void {
    this.inner?.placed(cls, draft);
  }
}

/** Whether every member of `comp` kept off spot can be one already on `instanceId` (it only stays there). */
function staysOn(comp: Composition, instanceId: string): boolean {
  return comp.classes.every(
    (cls, i) => !cls.onDemandOnly || cls.countOn(instanceId) >= (comp.counts[i] as number),
  );
}

/**
 * Whether a plan puts a task kept off spot (PackTask.onDemandOnly) on a spot instance it is not already on:
 * candidates built outside the packing loops (consolidation, the exact ILP) are checked with it.
 */
export function putsOnDemandTaskOnSpot(
  drafts: readonly DraftInstance[],
  tasks: ReadonlyMap<string, PackTask>,
  spotInstanceIds: ReadonlySet<string> | undefined,
): boolean {
  if (spotInstanceIds === undefined || spotInstanceIds.size === 0) return false;
  return drafts.some(
    (d) =>
      spotInstanceIds.has(d.id) &&
      d.taskIds.some((id) => {
        const t = tasks.get(id);
        return t?.onDemandOnly === true && t.currentInstanceId !== d.id;
      }),
  );
}
