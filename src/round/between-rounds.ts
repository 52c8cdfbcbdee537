import { demandOn, sub, type FamilyDemand, type Resources } from '../core/resources.js';
import {
  bindOrLaunch,
  placeJobOnSlots,
  taskShareOf,
  type BindOrLaunchChoice,
  type ExpectedSlot,
  type SlotPlacement,
} from '../scheduler/expected-start.js';

/**
 * Placement between rounds (Murmuration digest §7.1 "fast path"): a waiting job whose tasks all fit on capacity that
 * is already paid for is placed at once, each task in one attempt on the slot with the smallest expected start,
 * instead of waiting up to a round period for the next plan; that plan then sees the job as placed. Paid capacity
 * adds nothing to the fleet's $/hour or instance count, so the caps hold whatever is placed here. With `bind`, an
 * instance still coming up counts too, as a slot ready when it is (a bind instead of a launch, digest E2): taken only
 * when it is ready no later than a launch made now would be, which `bindOrLaunch` prices and records.
 */

export interface WaitingJob {
  readonly id: string;
  readonly tasks: readonly { readonly id: string; readonly demand: FamilyDemand }[];
  /** Expected run time of each task, seconds (prices the bind-or-launch choice). */
  readonly taskSeconds: number;
}

export interface PaidInstance {
  readonly id: string;
  readonly family: string;
  readonly capacity: Resources;
  /** Capacity minus what its committed tasks and occupants use. */
  readonly free: Resources;
  /** When it can start a task (now for a registered instance, later for one coming up). */
  readonly readyAtSeconds: number;
  readonly costPerHour: number;
}

export interface BetweenRoundsInput {
  readonly nowSeconds: number;
  /** Waiting jobs in the queue's order (the admission's ordering). */
  readonly jobs: readonly WaitingJob[];
  readonly instances: readonly PaidInstance[];
  /** Also place on instances still coming up (bind instead of a launch). */
  readonly bind: boolean;
  /** How long a launch made now for this job takes until a task can start on it (acquisition + setup). */
  readonly launchDelaySeconds: (job: WaitingJob) => number;
  /** $/hour of the instance a launch would bring (the job's reservation-price type), for the decision record. */
  readonly launchCostPerHour: (job: WaitingJob) => number;
}

export interface BetweenRoundsPlacement {
  readonly jobId: string;
  readonly placements: readonly SlotPlacement[];
  readonly jobStartSeconds: number;
  /** The bind-or-launch choice, when the job was bound to an instance still coming up. */
  readonly bindChoice?: BindOrLaunchChoice | undefined;
}

/**
 * Place waiting jobs on paid capacity, in queue order; a job that does not fit whole is skipped (it waits for the
 * round), the ones after it may still fit (the capacity is paid whether used or not).
 */
export function placeBetweenRounds(input: BetweenRoundsInput): BetweenRoundsPlacement[] {
  const usable = input.instances.filter((i) => input.bind || i.readyAtSeconds <= input.nowSeconds);
  const free = new Map(usable.map((i) => [i.id, i.free]));
  const byId = new Map(usable.map((i) => [i.id, i]));
  const out: BetweenRoundsPlacement[] = [];
  for (const job of input.jobs) {
    const launchReady = input.nowSeconds + input.launchDelaySeconds(job);
    const slots: ExpectedSlot[] = [];
    for (const inst of usable) {
      const room = free.get(inst.id) as Resources;
      if (room.every((r) => r <= 0) || inst.readyAtSeconds > launchReady) continue;
      slots.push({
        instanceId: inst.id,
        freeAtSeconds: Math.max(input.nowSeconds, inst.readyAtSeconds),
        free: room,
        virtual: false,
        costPerHour: inst.costPerHour,
        capacity: inst.capacity,
      });
    }
    if (slots.length === 0) continue;
    const demands = new Map(job.tasks.map((t) => [t.id, t.demand]));
    const placement = placeJobOnSlots(
      job.tasks.map((t) => ({
        taskId: t.id,
        demandOn: (instanceId: string) => demandOn(t.demand, (byId.get(instanceId) as PaidInstance).family),
      })),
      slots,
    );
    if (placement === undefined) continue;
    let bindChoice: BindOrLaunchChoice | undefined;
    if (placement.jobStartSeconds > input.nowSeconds) {
      // Bound to an instance still coming up: priced against launching the job's own instance now.
      const latest = placement.placements.reduce((a, p) =>
        p.expectedStartSeconds > a.expectedStartSeconds ? p : a,
      );
      const inst = byId.get(latest.instanceId) as PaidInstance;
      const demand = demandOn(demands.get(latest.taskId) as FamilyDemand, inst.family) as Resources;
      bindChoice = bindOrLaunch({
        nowSeconds: input.nowSeconds,
        taskSeconds: job.taskSeconds,
        bind: {
          instanceId: inst.id,
          freeAtSeconds: placement.jobStartSeconds,
          costPerHour: inst.costPerHour,
          share: taskShareOf(demand, inst.capacity),
        },
        launch: {
          typeName: 'reservation-price',
          readyAtSeconds: launchReady,
          costPerHour: input.launchCostPerHour(job),
        },
      });
      if (bindChoice.choice !== 'bind') continue;
    }
    for (const p of placement.placements) {
      const inst = byId.get(p.instanceId) as PaidInstance;
      const d = demandOn(demands.get(p.taskId) as FamilyDemand, inst.family) as Resources;
      free.set(p.instanceId, sub(free.get(p.instanceId) as Resources, d));
    }
    out.push({
      jobId: job.id,
      placements: placement.placements,
      jobStartSeconds: placement.jobStartSeconds,
      bindChoice,
    });
  }
  return out;
}
