import { demandOn, sub, type FamilyDemand, type Resources } from '../core/resources.js';
import type { WaitReason } from '../queue/admit.js';
import {
  bindOrLaunch,
  placeJobOnSlots,
  taskShareOf,
  type BindOrLaunchChoice,
  type ExpectedSlot,
  type JobPlacement,
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
  readonly tasks: readonly {
    readonly id: string;
    readonly demand: FamilyDemand;
    /**
     * What the task would cost alone, $/hour (its reservation price, Eva §4.2). Given, the task goes only where its
     * share of the instance's $/hour is no more: paid capacity is free now, but a task placed where it costs more than
     * alone holds a costly instance (a GPU type's spare vCPUs, a large type's last corner) that the next plans then keep
     * or move it off; Eva's packing is worth it only below the reservation prices, and so is this.
     */
    readonly reservationPricePerHour?: number | undefined;
    /** Co-location key (Eva §4.4), for the interference its placement would cause. */
    readonly key?: string | undefined;
  }[];
  /** Expected run time of each task, seconds (prices the bind-or-launch choice). */
  readonly taskSeconds: number;
}

type WaitingTask = WaitingJob['tasks'][number];

export interface PaidInstance {
  readonly id: string;
  readonly family: string;
  readonly capacity: Resources;
  /** Capacity minus what its committed tasks and occupants use. */
  readonly free: Resources;
  /** When it can start a task (now for a registered instance, later for one coming up). */
  readonly readyAtSeconds: number;
  readonly costPerHour: number;
  /** The tasks it holds (committed and occupants): their co-location keys and reservation prices ($/hour). */
  readonly tasks?: readonly { readonly key: string; readonly reservationPricePerHour: number }[] | undefined;
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
  /**
   * The throughput the scheduler expects for a task next to others (its learned co-location rates). Given, a task goes
   * only where the work it does there, at its reservation price, less the work it takes from the tasks already there,
   * pays for its share of the instance (Eva §4.3's throughput-normalized reservation price, for one added task).
   */
  readonly expectedRate?: ((key: string, others: readonly string[]) => number) | undefined;
  /**
   * Whether the last round's admission left a job waiting (`capHoldsJobsBack`: the caps, or a class's share of them,
   * kept it out; a job no type can host does not count). When it did not, the next round admits every waiting job
   * and packs it with the others that arrived meanwhile, within one round period: placing a job alone now saves
   * minutes and costs that joint packing (measured without caps: +0.1–0.5% cost and a longer mean JCT on pai_200 and
   * the Alibaba trace), so nothing is placed. Under a binding cap a job may wait hours, and capacity freed by a
   * completion stays paid and idle until the next round: that is what this fills.
   */
  readonly capHoldsJobsBack: boolean;
}

/** A round's admission (its queued jobs) left a job waiting that some instance could host: the caps bind. */
export function capHoldsJobsBack(queued: readonly { readonly reason: WaitReason }[]): boolean {
  return queued.some((q) => q.reason !== 'never-fits');
}

export interface BetweenRoundsPlacement {
  readonly jobId: string;
  readonly placements: readonly SlotPlacement[];
  readonly jobStartSeconds: number;
  /** The bind-or-launch choice, when the job was bound to an instance still coming up. */
  readonly bindChoice?: BindOrLaunchChoice | undefined;
}

/**
 * Place waiting jobs on paid capacity, in queue order. A job that cannot be placed whole waits for the round, and the
 * room it could use (instances of a family that can host one of its tasks) stays free for it: a job behind it in the
 * queue takes only room it could never use. Without that, a long job that happens to fit jumps the queue and holds
 * the capacity the next round's admission would give to the shorter jobs ahead of it (measured under srpt: a higher
 * median JCT than not placing at all); backfilling only where the jobs ahead cannot go keeps the queue's order.
 */
export function placeBetweenRounds(input: BetweenRoundsInput): BetweenRoundsPlacement[] {
  if (!input.capHoldsJobsBack) return [];
  const usable = input.instances.filter((i) => input.bind || i.readyAtSeconds <= input.nowSeconds);
  const free = new Map(usable.map((i) => [i.id, i.free]));
  const byId = new Map(usable.map((i) => [i.id, i]));
  const held = new Map(usable.map((i) => [i.id, [...(i.tasks ?? [])]]));
  const rate = input.expectedRate;
  const out: BetweenRoundsPlacement[] = [];
  // Jobs ahead in the queue that could not be placed: room they could use stays theirs for the next round.
  const passedOver: WaitingJob[] = [];
  const reservedFor = (inst: PaidInstance): boolean =>
    passedOver.some((j) => j.tasks.some((t) => demandOn(t.demand, inst.family) !== undefined));
  for (const job of input.jobs) {
    const launchReady = input.nowSeconds + input.launchDelaySeconds(job);
    const slots: ExpectedSlot[] = [];
    for (const inst of usable) {
      const room = free.get(inst.id) as Resources;
      if (room.every((r) => r <= 0) || inst.readyAtSeconds > launchReady || reservedFor(inst)) continue;
      slots.push({
        instanceId: inst.id,
        freeAtSeconds: Math.max(input.nowSeconds, inst.readyAtSeconds),
        free: room,
        virtual: false,
        costPerHour: inst.costPerHour,
        capacity: inst.capacity,
      });
    }
    if (slots.length === 0) {
      passedOver.push(job);
      continue;
    }
    const tasksById = new Map(job.tasks.map((t) => [t.id, t]));
    const placement = placeTasksInTurn(job, slots, byId, held, rate);
    if (placement === undefined) {
      passedOver.push(job);
      continue;
    }
    let bindChoice: BindOrLaunchChoice | undefined;
    if (placement.jobStartSeconds > input.nowSeconds) {
      // Bound to an instance still coming up: priced against launching the job's own instance now.
      const latest = placement.placements.reduce((a, p) =>
        p.expectedStartSeconds > a.expectedStartSeconds ? p : a,
      );
      const inst = byId.get(latest.instanceId) as PaidInstance;
      const demand = demandOn((tasksById.get(latest.taskId) as WaitingTask).demand, inst.family) as Resources;
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
      if (bindChoice.choice !== 'bind') {
        passedOver.push(job);
        continue;
      }
    }
    for (const p of placement.placements) {
      const inst = byId.get(p.instanceId) as PaidInstance;
      const task = tasksById.get(p.taskId) as WaitingTask;
      const d = demandOn(task.demand, inst.family) as Resources;
      free.set(p.instanceId, sub(free.get(p.instanceId) as Resources, d));
      if (task.key !== undefined && task.reservationPricePerHour !== undefined)
        held
          .get(p.instanceId)
          ?.push({ key: task.key, reservationPricePerHour: task.reservationPricePerHour });
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

type HeldTask = NonNullable<PaidInstance['tasks']>[number];

/**
 * The job's tasks placed one at a time, in order, each on the slot with the earliest expected start (as
 * `placeJobOnSlots`), and only where its share of the instance's $/hour is within what it is worth there. That worth
 * counts the job's tasks already placed on the instance like the tasks it held before: the slowdown they cause the
 * task and the work it takes from them, or a job whose tasks each look worth it beside the others alone would be
 * packed where together they are not.
 */
function placeTasksInTurn(
  job: WaitingJob,
  slots: readonly ExpectedSlot[],
  byId: ReadonlyMap<string, PaidInstance>,
  held: ReadonlyMap<string, readonly HeldTask[]>,
  rate: BetweenRoundsInput['expectedRate'],
): JobPlacement | undefined {
  let room = slots;
  const siblings = new Map<string, HeldTask[]>();
  const placements: SlotPlacement[] = [];
  for (const t of job.tasks) {
    const demandHere = (instanceId: string): Resources | undefined =>
      demandOn(t.demand, (byId.get(instanceId) as PaidInstance).family);
    const one = placeJobOnSlots(
      [
        {
          taskId: t.id,
          demandOn: (instanceId: string) => {
            const d = demandHere(instanceId);
            if (d === undefined || t.reservationPricePerHour === undefined) return d;
            const inst = byId.get(instanceId) as PaidInstance;
            const sharePrice = taskShareOf(d, inst.capacity) * inst.costPerHour;
            const there = [...(held.get(instanceId) ?? []), ...(siblings.get(instanceId) ?? [])];
            const worth =
              rate === undefined || t.key === undefined || there.length === 0
                ? t.reservationPricePerHour
                : netWorthPerHour(t.key, t.reservationPricePerHour, there, rate);
            return sharePrice <= worth * (1 + 1e-9) ? d : undefined;
          },
        },
      ],
      room,
    );
    const p = one?.placements[0];
    if (p === undefined) return undefined;
    placements.push(p);
    const d = demandHere(p.instanceId) as Resources;
    room = room.map((s) => (s.instanceId === p.instanceId ? { ...s, free: sub(s.free, d) } : s));
    if (t.key !== undefined && t.reservationPricePerHour !== undefined) {
      const list = siblings.get(p.instanceId);
      const task = { key: t.key, reservationPricePerHour: t.reservationPricePerHour };
      if (list === undefined) siblings.set(p.instanceId, [task]);
      else list.push(task);
    }
  }
  return {
    placements,
    jobStartSeconds: placements.length === 0 ? 0 : Math.max(...placements.map((p) => p.expectedStartSeconds)),
  };
}

/**
 * What adding a task to the tasks already on an instance is worth, $/hour: its reservation price at the throughput it
 * would run at there, less the reservation-priced throughput it takes from them.
 */
function netWorthPerHour(
  key: string,
  reservationPricePerHour: number,
  there: readonly { readonly key: string; readonly reservationPricePerHour: number }[],
  rate: (key: string, others: readonly string[]) => number,
): number {
  const keys = there.map((o) => o.key);
  let lost = 0;
  there.forEach((o, i) => {
    const others = keys.filter((_, j) => j !== i);
    lost += o.reservationPricePerHour * (rate(o.key, others) - rate(o.key, [...others, key]));
  });
  return reservationPricePerHour * rate(key, keys) - lost;
}
