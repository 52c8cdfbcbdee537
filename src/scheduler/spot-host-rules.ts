import type { DraftInstance, PlacementRules } from './full-reconfiguration.js';
import type { Composition, PackTask, TaskClass } from './packing.js';

/**
 * A job that never runs on spot (`spot: never`) stays off spot capacity: a new instance holding one of its tasks is
 * bought on demand (market-choice.ts), and these rules keep its tasks off the fleet's existing spot instances, whose
 * free room the packing loops would otherwise fill. Other rules (latency-aware placement) are asked as before.
 */
export class SpotHostRules implements PlacementRules {
  constructor(
    private readonly spotInstanceIds: ReadonlySet<string>,
    private readonly inner?: PlacementRules,
  ) {}

  mayFill(cls: TaskClass, draft: DraftInstance): boolean {
    if (cls.onDemandOnly && this.spotInstanceIds.has(draft.id)) return false;
    return this.inner === undefined || cls.latency === undefined || this.inner.mayFill(cls, draft);
  }

  mayReuse(comp: Composition, instanceId: string): boolean {
    if (comp.onDemandMembers > 0 && this.spotInstanceIds.has(instanceId)) return false;
    return this.inner === undefined || comp.latencyMembers === 0 || this.inner.mayReuse(comp, instanceId);
  }

  placed(cls: TaskClass, draft: DraftInstance): void {
    this.inner?.placed(cls, draft);
  }
}

/**
 * Whether a plan puts a `spot: never` task on a spot instance it is not already on: candidates built outside the
 * packing loops (consolidation, the exact ILP) are checked with it.
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
