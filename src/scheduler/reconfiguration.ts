import type { InstanceType } from '../core/catalog.js';
import { demandOn } from '../core/resources.js';
import {
  fillInstances,
  FreePool,
  NewIds,
  topDownProvisioning,
  type DraftInstance,
  type ExistingInstance,
  type PlacementRules,
} from './full-reconfiguration.js';
import { SpotHostRules } from './spot-host-rules.js';
import {
  classify,
  compositionValue,
  Composition,
  type PackTask,
  type RateModel,
  type TaskClass,
} from './packing.js';
import type { PriceBook } from './reservation-price.js';
import { assignPlacements, LatencyRules, tagForPlacement } from './latency-placement.js';
import type { LatencyView } from './latency-view.js';

/** One round's inputs to Full and Partial Reconfiguration, derived once from the snapshot. */
export interface PlanningInput {
  readonly book: PriceBook;
  readonly model: RateModel;
  readonly tasks: ReadonlyMap<string, PackTask>;
  /** Existing instances (launching or running) with the tasks committed to them. */
  readonly instances: readonly {
    readonly id: string;
    readonly type: InstanceType;
    readonly taskIds: readonly string[];
    /**
     * EC2 recommended rebalancing it (its price then carries its jobs' interruption risk, eva-pack-input.ts): a plan may
     * keep tasks on it, but one that repacks it never puts tasks back on it, so a move off is a real move.
     */
    readonly retiring?: boolean | undefined;
  }[];
  /** Tasks that must stay on their instance in every plan (jobs being launched or migrated, no-move windows…). */
  readonly pinnedTaskIds: ReadonlySet<string>;
  /** Partial Reconfiguration may move at most this many jobs (the migrations-per-round cap). */
  readonly maxMovedJobs: number;
  /** The round's network view (latency-aware placement); undefined: the network is ignored (Eva). */
  readonly latency?: LatencyView | undefined;
  /** Existing spot instances, when some task may not go on one (PackTask.onDemandOnly; spot-host-rules.ts). */
  readonly spotInstanceIds?: ReadonlySet<string> | undefined;
}

/** `rules`, with spot: never tasks also kept off the fleet's spot instances when it has any (spot-host-rules.ts). */
function withSpotRules<R extends PlacementRules | undefined>(
  spot: ReadonlySet<string> | undefined,
  rules: R,
): R | PlacementRules {
  return spot === undefined || spot.size === 0 ? rules : new SpotHostRules(spot, rules);
}

function withoutPlacement(t: PackTask): PackTask {
  return { ...t, currentInstanceId: undefined };
}

/** A draft for an instance holding `tasks` (their classes only serve the set's value). */
export function draftWithTasks(
  inst: { readonly id: string; readonly type: InstanceType; readonly isNew?: boolean },
  tasks: readonly PackTask[],
): DraftInstance {
  const composition = new Composition();
  for (const cls of classify(tasks.map(withoutPlacement))) composition.add(cls, cls.count);
  let used: [number, number, number] = [0, 0, 0];
  for (const t of tasks) {
    const d = demandOn(t.demand, inst.type.family);
    if (d !== undefined) used = [used[0] + d[0], used[1] + d[1], used[2] + d[2]];
  }
  return {
    id: inst.id,
    type: inst.type,
    isNew: inst.isNew ?? false,
    taskIds: tasks.map((t) => t.id),
    composition,
    used,
  };
}

function place(
  input: PlanningInput,
  kept: readonly { inst: PlanningInput['instances'][number]; tasks: PackTask[] }[],
  candidates: readonly PackTask[],
  freeInstances: readonly ExistingInstance[],
): DraftInstance[] {
  const view = input.latency;
  if (view === undefined || view.jobs.size === 0) {
    const drafts = kept.map((k) => draftWithTasks(k.inst, k.tasks));
    const classes: TaskClass[] = classify(candidates);
    const rules = withSpotRules(input.spotInstanceIds, undefined);
    fillInstances(drafts, classes, input.model, rules);
    const rest = topDownProvisioning(
      input.book,
      classes,
      input.model,
      new FreePool(freeInstances),
      new NewIds(),
      rules,
    );
    return [...drafts, ...rest];
  }
  // Latency-aware (NoMora §5.1): jobs being placed are valued where they can go, roots go first, the others follow.
  const tagged = tagForPlacement(
    view,
    kept.map((k) => ({ instanceId: k.inst.id, tasks: k.tasks })),
    candidates,
  );
  const drafts = kept.map((k, i) => draftWithTasks(k.inst, tagged.kept[i] as PackTask[]));
  const classes: TaskClass[] = classify(tagged.candidates);
  const rules = withSpotRules(input.spotInstanceIds, new LatencyRules(view, drafts, classes));
  fillInstances(drafts, classes, input.model, rules);
  const rest = topDownProvisioning(
    input.book,
    classes,
    input.model,
    new FreePool(freeInstances),
    new NewIds(),
    rules,
  );
  const all = [...drafts, ...rest];
  assignPlacements(view, all);
  return all;
}

/**
 * Full Reconfiguration (§4.2): every reconfigurable task is repacked. Instances holding pinned tasks keep them and
 * their free space is filled first; every other instance is free for reuse by top-down provisioning.
 */
export function fullReconfiguration(input: PlanningInput): DraftInstance[] {
  const kept: { inst: PlanningInput['instances'][number]; tasks: PackTask[] }[] = [];
  const free: ExistingInstance[] = [];
  for (const inst of input.instances) {
    const pinned = inst.taskIds
      .filter((id) => input.pinnedTaskIds.has(id))
      .map((id) => input.tasks.get(id) as PackTask);
    if (pinned.length > 0) kept.push({ inst, tasks: pinned });
    else if (inst.retiring !== true)
      free.push({ id: inst.id, typeName: inst.type.name, committedTaskCount: inst.taskIds.length });
  }
  const candidates = [...input.tasks.values()].filter((t) => !input.pinnedTaskIds.has(t.id));
  return place(input, kept, candidates, free);
}

/** TNRP of the tasks now on an instance, without the multi-task correction (reference `local_update`). */
export function committedValue(input: PlanningInput, taskIds: readonly string[]): number {
  const comp = new Composition();
  for (const cls of classify(taskIds.map((id) => withoutPlacement(input.tasks.get(id) as PackTask))))
    comp.add(cls, cls.count);
  return compositionValue(comp, input.model, false);
}

/**
 * An instance stopped being cost-efficient when its tasks' TNRP fell below its price (a task left, or interference
 * was learned), unless it holds a single task on that task's cheapest type.
 */
export function isCostEfficient(input: PlanningInput, inst: PlanningInput['instances'][number]): boolean {
  if (inst.taskIds.length === 0) return false;
  // A task alone on its cheapest type is where it belongs, unless the instance carries a risk premium (retiring).
  if (inst.taskIds.length === 1 && inst.retiring !== true) {
    const t = input.tasks.get(inst.taskIds[0] as string) as PackTask;
    if (input.book.minType(t.demand)?.name === inst.type.name) return true;
  }
  return committedValue(input, inst.taskIds) >= inst.type.costPerHour - 1e-9;
}

/**
 * Instances whose tasks Partial Reconfiguration repacks (§4.5): those that stopped being cost-efficient and hold
 * only movable tasks, most wasteful first, while the jobs they would move stay within `maxMovedJobs`.
 */
export function inefficientInstances(input: PlanningInput): Set<string> {
  const movable = (inst: PlanningInput['instances'][number]) =>
    inst.taskIds.length > 0 && inst.taskIds.every((id) => !input.pinnedTaskIds.has(id));
  const inefficient = input.instances
    .filter((inst) => movable(inst) && !isCostEfficient(input, inst))
    .map((inst) => ({ inst, waste: inst.type.costPerHour - committedValue(input, inst.taskIds) }))
    .sort((a, b) => b.waste - a.waste || (a.inst.id < b.inst.id ? -1 : 1));
  const chosen = new Set<string>();
  const movedJobs = new Set<string>();
  for (const { inst } of inefficient) {
    const jobs = new Set(inst.taskIds.map((id) => (input.tasks.get(id) as PackTask).jobId));
    const added = [...jobs].filter((j) => !movedJobs.has(j));
    if (movedJobs.size + added.length > input.maxMovedJobs) continue;
    added.forEach((j) => movedJobs.add(j));
    chosen.add(inst.id);
  }
  return chosen;
}

/**
 * Partial Reconfiguration (§4.5): only unplaced tasks and the tasks of the `repack` instances (see
 * inefficientInstances) are placed; everything else stays. With an empty `repack` this is the "stay" plan: new
 * tasks are placed and nothing moves. The jobs in `release` are placed again wherever they are (the latency
 * candidate: jobs whose round trips got worse).
 */
export function partialReconfiguration(
  input: PlanningInput,
  repack: ReadonlySet<string>,
  release: ReadonlySet<string> = new Set(),
): DraftInstance[] {
  const kept: { inst: PlanningInput['instances'][number]; tasks: PackTask[] }[] = [];
  const free: ExistingInstance[] = [];
  const placedIds = new Set<string>();
  for (const inst of input.instances) {
    const staying =
      release.size === 0
        ? inst.taskIds
        : inst.taskIds.filter((id) => !release.has((input.tasks.get(id) as PackTask).jobId));
    if (staying.length === 0 || repack.has(inst.id)) {
      if (inst.retiring !== true)
        free.push({ id: inst.id, typeName: inst.type.name, committedTaskCount: inst.taskIds.length });
      continue;
    }
    kept.push({ inst, tasks: staying.map((id) => input.tasks.get(id) as PackTask) });
    staying.forEach((id) => placedIds.add(id));
  }
  const candidates = [...input.tasks.values()].filter((t) => !placedIds.has(t.id));
  return place(input, kept, candidates, free);
}
