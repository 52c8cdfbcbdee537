import type { InstanceType } from '../core/catalog.js';
import type { SchedJob } from '../core/model.js';
import { demandOn, type FamilyDemand, type Resources } from '../core/resources.js';
import { jobLaunchSeconds } from '../scheduler/job-launch-seconds.js';
import type { PriceBook } from '../scheduler/reservation-price.js';
import { interruptionExceedsBound } from '../scheduler/spot-cost.js';
import { placeBetweenRounds, type BetweenRoundsPlacement, type PaidInstance } from './between-rounds.js';

/**
 * Placement between rounds as both runtimes call it: the waiting jobs admission would let in now, in its order, and
 * the paid instances, as plain facts priced at their reservation prices, then `placeBetweenRounds`. The simulator's
 * world and the controller's store differ only in how they read these facts, so the rule is written once.
 */

export interface WaitingJobFacts {
  readonly id: string;
  /** Expected seconds of work each task has left (binding prices it). */
  readonly taskSeconds: number;
  readonly tasks: readonly { readonly id: string; readonly demand: FamilyDemand; readonly key: string }[];
  /** The job never runs on spot (`spot: never`). */
  readonly onDemandOnly?: boolean | undefined;
  /**
   * The job as the round's snapshot has it, when its owner bounds what one interruption may delay it
   * (`spotMaxDelaySeconds`): while one now would delay it past the bound, it goes on no spot instance either.
   */
  readonly scheduled?: SchedJob | undefined;
}

export interface PaidInstanceFacts {
  readonly id: string;
  readonly type: InstanceType;
  /** When it can start a task: now for a running instance, later for one still coming up. */
  readonly readyAtSeconds: number;
  /** What it holds: the tasks committed to it and still on it. */
  readonly tasks: readonly { readonly demand: FamilyDemand; readonly key: string }[];
  /** Bought on spot. */
  readonly spot?: boolean | undefined;
}

export interface PlaceWaitingInput {
  readonly nowSeconds: number;
  /** Waiting jobs: arrived (or sent back), no task committed anywhere. */
  readonly jobs: readonly WaitingJobFacts[];
  /** Instances in the plan that are paid for or being launched (none going away). */
  readonly instances: readonly PaidInstanceFacts[];
  readonly prices: PriceBook;
  /**
   * The waiting jobs admission would let in now onto paid room, in its order (`Admission.admissibleNow`): only these
   * are placed, in this order. A job over its class's ceiling (`maxShare`), or one that never fits, waits for a round
   * and keeps no room for itself (digest §7: "under caps, only jobs that admission lets in"). Asked only when there is
   * paid room and a job to place on it: the decision copies the admission and decides over every live job, at every
   * arrival and completion while a cap holds jobs back.
   */
  readonly admitted: () => readonly string[];
  readonly bind: boolean;
  /** The scheduler's learned co-location rates, when it has them (Eva §4.4). */
  readonly expectedRate?: ((key: string, others: readonly string[]) => number) | undefined;
  /** The last round's admission kept a job out for the caps (between-rounds.ts `capHoldsJobsBack`). */
  readonly capHoldsJobsBack: boolean;
}

export function placeWaitingJobs(input: PlaceWaitingInput): BetweenRoundsPlacement[] {
  if (!input.capHoldsJobsBack || input.jobs.length === 0) return [];
  const { prices } = input;
  const reservation = (demand: FamilyDemand): number | undefined => prices.minType(demand)?.costPerHour;
  const instances = input.instances.flatMap((i) => paidInstance(i, reservation));
  if (instances.length === 0) return [];
  // A spot: never job, or one an interruption would delay past its bound (as a new instance for it is bought on
  // demand: scheduler/market-choice.ts), goes on no spot instance; while the paid capacity has any, it waits for the
  // round, whose packing keeps it off them (scheduler/spot-host-rules.ts).
  const jobs = input.instances.some((i) => i.spot === true)
    ? input.jobs.filter((j) => !keptOffSpot(j, input.nowSeconds, prices))
    : input.jobs;
  if (jobs.length === 0) return [];
  const byId = new Map(jobs.map((j) => [j.id, j]));
  const ordered = input.admitted().flatMap((id) => {
    const job = byId.get(id);
    return job === undefined ? [] : [job];
  });
  if (ordered.length === 0) return [];
  return placeBetweenRounds({
    nowSeconds: input.nowSeconds,
    jobs: ordered.map((job) => ({
      id: job.id,
      tasks: job.tasks.map((t) => ({
        id: t.id,
        demand: t.demand,
        reservationPricePerHour: reservation(t.demand),
        key: t.key,
      })),
      taskSeconds: job.taskSeconds,
    })),
    instances,
    bind: input.bind,
    launchDelaySeconds: (job) => jobLaunchSeconds(prices, job.tasks),
    launchCostPerHour: (job) => job.tasks.reduce((s, t) => s + (reservation(t.demand) ?? 0), 0),
    expectedRate: input.expectedRate,
    capHoldsJobsBack: input.capHoldsJobsBack,
  });
}

/** Whether the job may not go on a spot instance: `spot: never`, or an interruption now would pass its bound. */
function keptOffSpot(job: WaitingJobFacts, nowSeconds: number, prices: PriceBook): boolean {
  if (job.onDemandOnly === true) return true;
  return (
    job.scheduled !== undefined &&
    interruptionExceedsBound(job.scheduled, nowSeconds, jobLaunchSeconds(prices, job.tasks))
  );
}

/** The instance with what its tasks leave free; none when no vCPU or memory is left. */
function paidInstance(
  inst: PaidInstanceFacts,
  reservation: (demand: FamilyDemand) => number | undefined,
): PaidInstance[] {
  let free: Resources = inst.type.capacity;
  for (const t of inst.tasks) {
    const d = demandOn(t.demand, inst.type.family);
    if (d === undefined) throw new Error(`a task on ${inst.id} cannot run on family ${inst.type.family}`);
    free = [free[0] - d[0], free[1] - d[1], free[2] - d[2]];
  }
  if (free[1] <= 0 || free[2] <= 0) return [];
  return [
    {
      id: inst.id,
      family: inst.type.family,
      capacity: inst.type.capacity,
      free,
      readyAtSeconds: inst.readyAtSeconds,
      costPerHour: inst.type.costPerHour,
      tasks: inst.tasks.map((t) => ({ key: t.key, reservationPricePerHour: reservation(t.demand) ?? 0 })),
    },
  ];
}
