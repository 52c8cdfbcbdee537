import { fits, sub, type Resources } from '../core/resources.js';

/**
 * The expected-start index (Murmuration digest §3.2 and §7.1): per instance, when its capacity frees. Murmuration's
 * scheduler keeps E_n, the expected wait at node n, and places each task in one attempt on the feasible node with the
 * smallest one; fleetwise keeps the absolute `freeAtSeconds` instead (digest §7.4: a running task's elapsed time then
 * counts, and an early or late completion shifts it by actual − estimated). Instances still booting, and instances a
 * launch would bring, are slots too: "virtual" slots ready after their launch delays (digest §7.1).
 *
 * A job's start is the latest of its tasks' expected starts (a synchronous job progresses only once all its tasks
 * run), so the greedy below, one task at a time on the slot with the smallest expected start, picks the k earliest
 * feasible slots and with them the earliest start for the job (digest §6 M3–M6).
 */

/** One place a task could go: free capacity that is (or will be) available from `freeAtSeconds`. */
export interface ExpectedSlot {
  readonly instanceId: string;
  /** Absolute time at which `free` is available (now for an idle ready instance). */
  readonly freeAtSeconds: number;
  /** Capacity available from then on. */
  readonly free: Resources;
  /** A launch not yet made (the instance exists only if this placement is chosen). */
  readonly virtual: boolean;
  /** The instance's $/hour, for pricing the choice. */
  readonly costPerHour: number;
  /** The instance's whole capacity (a task's share of its $/hour is its dominant share of this). */
  readonly capacity: Resources;
}

export interface TaskToPlace {
  readonly taskId: string;
  /** The task's demand on the slot's instance family; undefined: cannot run there. */
  readonly demandOn: (instanceId: string) => Resources | undefined;
}

export interface SlotPlacement {
  readonly taskId: string;
  readonly instanceId: string;
  readonly expectedStartSeconds: number;
  readonly virtual: boolean;
}

export interface JobPlacement {
  readonly placements: readonly SlotPlacement[];
  /** S_job: the latest expected start of its tasks. */
  readonly jobStartSeconds: number;
}

/**
 * Place every task of one job in one attempt each (Murmuration Algorithm 1, L8–L11): each task goes to the feasible
 * slot with the smallest expected start, ties to the slot listed first (callers list them in a deterministic order);
 * the slot's free capacity shrinks by the task's demand before the next task (the local cache update). Undefined
 * when some task fits nowhere: the job waits whole (gang).
 */
export function placeJobOnSlots(
  tasks: readonly TaskToPlace[],
  slots: readonly ExpectedSlot[],
): JobPlacement | undefined {
  const free = slots.map((s) => s.free);
  const placements: SlotPlacement[] = [];
  let jobStart = Number.NEGATIVE_INFINITY;
  for (const task of tasks) {
    let best = -1;
    let bestDemand: Resources | undefined;
    for (let i = 0; i < slots.length; i += 1) {
      const slot = slots[i] as ExpectedSlot;
      const demand = task.demandOn(slot.instanceId);
      if (demand === undefined || !fits(demand, free[i] as Resources)) continue;
      if (best === -1 || slot.freeAtSeconds < (slots[best] as ExpectedSlot).freeAtSeconds) {
        best = i;
        bestDemand = demand;
      }
    }
    if (best === -1 || bestDemand === undefined) return undefined;
    const slot = slots[best] as ExpectedSlot;
    free[best] = sub(free[best] as Resources, bestDemand);
    placements.push({
      taskId: task.taskId,
      instanceId: slot.instanceId,
      expectedStartSeconds: slot.freeAtSeconds,
      virtual: slot.virtual,
    });
    jobStart = Math.max(jobStart, slot.freeAtSeconds);
  }
  return { placements, jobStartSeconds: placements.length === 0 ? 0 : jobStart };
}

/** A task's share of its instance's $/hour: its dominant share of the instance's capacity (at most 1). */
export function taskShareOf(demand: Resources, capacity: Resources): number {
  let share = 0;
  for (let d = 0; d < 3; d += 1) {
    const cap = capacity[d] as number;
    const need = demand[d] as number;
    if (need > 0) share = Math.max(share, cap > 0 ? need / cap : 1);
  }
  return Math.min(1, share);
}

/** What a bind-or-launch choice weighs, for one task (digest §7.2, E2). */
export interface BindOrLaunchInput {
  readonly nowSeconds: number;
  /** The task's expected run time (seconds at full throughput). */
  readonly taskSeconds: number;
  /** The busy (or booting) instance the task could be bound to: when it frees room for the task, its $/h share. */
  readonly bind: {
    readonly instanceId: string;
    readonly freeAtSeconds: number;
    readonly costPerHour: number;
    readonly share: number;
  };
  /** The instance a launch would bring: when it would be ready, its $/hour. */
  readonly launch: {
    readonly typeName: string;
    readonly readyAtSeconds: number;
    readonly costPerHour: number;
  };
  /** When the job's other tasks start at the earliest: neither choice can start the job before it. */
  readonly siblingsStartSeconds?: number | undefined;
}

/** The choice, priced like Eva's other choices (a $ figure per option), for the decision record. */
export interface BindOrLaunchChoice {
  readonly choice: 'bind' | 'launch';
  readonly instanceId: string | undefined;
  readonly typeName: string | undefined;
  /** The job's start under each option. */
  readonly bindJobStartSeconds: number;
  readonly launchJobStartSeconds: number;
  /**
   * $ each option costs: a bind, the task's share of an instance already paid for over its run; a launch, the new
   * instance from its launch until the task ends (it is billed while it boots).
   */
  readonly bindCost: number;
  readonly launchCost: number;
  readonly reason: string;
}

/**
 * Bind a task to an instance that frees soon, or launch a new one (digest §7.2 "Cost-aware choice between queueing
 * and launching", E2): bind when that starts the job no later than a launch would and costs less; otherwise launch.
 * A bind adds no instance-hours, so it costs only its share of a paid instance; a launch pays a whole instance from
 * launch to the task's end.
 */
export function bindOrLaunch(input: BindOrLaunchInput): BindOrLaunchChoice {
  const siblings = input.siblingsStartSeconds ?? Number.NEGATIVE_INFINITY;
  const bindStart = Math.max(input.bind.freeAtSeconds, siblings, input.nowSeconds);
  const launchStart = Math.max(input.launch.readyAtSeconds, siblings, input.nowSeconds);
  const bindCost = (input.bind.costPerHour * input.bind.share * input.taskSeconds) / 3600;
  const launchCost =
    (input.launch.costPerHour * (input.launch.readyAtSeconds - input.nowSeconds + input.taskSeconds)) / 3600;
  const base = {
    bindJobStartSeconds: bindStart,
    launchJobStartSeconds: launchStart,
    bindCost,
    launchCost,
  };
  if (bindStart <= launchStart && bindCost < launchCost)
    return {
      ...base,
      choice: 'bind',
      instanceId: input.bind.instanceId,
      typeName: undefined,
      reason: `bind to ${input.bind.instanceId}: the job starts at ${bindStart.toFixed(0)} s, not later than a launch (${launchStart.toFixed(0)} s), for $${bindCost.toFixed(2)} < $${launchCost.toFixed(2)}`,
    };
  return {
    ...base,
    choice: 'launch',
    instanceId: undefined,
    typeName: input.launch.typeName,
    reason:
      bindStart > launchStart
        ? `launch ${input.launch.typeName}: ready at ${launchStart.toFixed(0)} s, before ${input.bind.instanceId} frees (${bindStart.toFixed(0)} s)`
        : `launch ${input.launch.typeName}: $${launchCost.toFixed(2)} ≤ the bind's $${bindCost.toFixed(2)}`,
  };
}
