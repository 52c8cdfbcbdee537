import { inNoMoveWindow, type SchedJob } from '../core/model.js';
import { interruptionRatePerHour, type SpotOffering } from '../core/spot.js';
import { perHourToPerSecond } from '../core/units.js';

/**
 * The expected cost of a spot instance (fleetwise, beyond Eva): its pool's price plus its interruption rate times
 * what an interruption costs the jobs on it, in Eva's migration-cost terms (reference `Job.get_migration_cost` plus
 * lost work, src/scheduler/eva-pins.ts `jobMoveCost`): the seconds each job is out of service (restore, its new
 * instance's launch) and the work it loses, at its reservation price per second. A job of several tasks loses all
 * of them when any one's instance is reclaimed, so its whole reservation price counts. Reservation prices stay on
 * demand: they value the work, whatever capacity carries it.
 */

/** One job with a task on the instance, as the interruption cost needs it. */
export interface JobAtRisk {
  readonly job: SchedJob;
  /** Σ reservation prices of all its tasks, $/hour (on demand). */
  readonly rpPerHour: number;
}

/**
 * Seconds of a job's work an interruption now would lose. The whole work (done so far and still to do: the job
 * starts over) when it never checkpoints or is inside its no-move window (it asked not to be disturbed: nothing
 * bounds what a disturbance costs it); else the work since its last checkpoint, or half its checkpoint interval
 * (the mean age of a periodic checkpoint) before it has run.
 */
export function workAtRiskSeconds(job: SchedJob, nowSeconds: number): number {
  const ranFor =
    job.runningSinceSeconds === undefined ? 0 : Math.max(0, nowSeconds - job.runningSinceSeconds);
  if (job.checkpointIntervalSeconds === 0 || inNoMoveWindow(job, nowSeconds))
    return ranFor + (job.expectedRemainingSeconds ?? 0);
  if (job.lastCheckpointSeconds !== undefined) return Math.max(0, nowSeconds - job.lastCheckpointSeconds);
  return (job.checkpointIntervalSeconds ?? 0) / 2;
}

/** Seconds an interruption now would delay a job: work at risk + restore + relaunch of its replacement. */
export function interruptionDelaySeconds(job: SchedJob, nowSeconds: number, relaunchSeconds: number): number {
  return workAtRiskSeconds(job, nowSeconds) + job.migrationDelaySeconds + relaunchSeconds;
}

/** Whether one interruption now would delay the job past the bound its owner set (`spotMaxDelaySeconds`). */
export function interruptionExceedsBound(
  job: SchedJob,
  nowSeconds: number,
  relaunchSeconds: number,
): boolean {
  return (
    job.spotMaxDelaySeconds !== undefined &&
    interruptionDelaySeconds(job, nowSeconds, relaunchSeconds) > job.spotMaxDelaySeconds
  );
}

/** $ an interruption costs one job: (work at risk + restore + relaunch) × its reservation price per second. */
export function interruptionCost(at: JobAtRisk, nowSeconds: number, relaunchSeconds: number): number {
  return interruptionDelaySeconds(at.job, nowSeconds, relaunchSeconds) * perHourToPerSecond(at.rpPerHour);
}

/**
 * Expected $/hour of a spot instance in `offering` hosting `jobs`: price + λ · Σ interruption costs, λ the pool's
 * interruptions per hour. `relaunchSeconds` is the launch of the replacement (the catalog's setup delays).
 */
export function expectedSpotCostPerHour(
  offering: SpotOffering,
  jobs: readonly JobAtRisk[],
  nowSeconds: number,
  relaunchSeconds: number,
): number {
  let cost = 0;
  for (const at of jobs) cost += interruptionCost(at, nowSeconds, relaunchSeconds);
  return offering.pricePerHour + interruptionRatePerHour(offering.interruption) * cost;
}

/**
 * Interruptions per hour assumed for an instance EC2 recommended rebalancing before any has been seen (the prior of
 * rebalance-risk.ts, which learns the rate from the flagged instances the rounds see). EC2 publishes no figure: the
 * signal says "elevated risk" and often comes minutes to hours before the two-minute notice, or never. Taken as one
 * expected within about two hours: far above any Advisor class (≤ 4e-4 /h), so the tasks' risk is priced as
 * imminent, yet a job whose move would cost more than that risk (a long restore, a fresh checkpoint) stays.
 */
export const REBALANCE_INTERRUPTION_RATE_PER_HOUR = 0.5;

/**
 * The risk premium, $/hour, of an instance EC2 recommended rebalancing: λ_rebalance · Σ interruption costs of its
 * jobs (λ_rebalance as learned, rebalance-risk.ts; this constant before any evidence). Eva adds it to the instance's price, so its decision rule moves the tasks off ahead of a notice exactly when
 * the saving pays the move (eq. 1), rather than always (Karpenter's optional rebalance draining) or never.
 */
export function rebalanceRiskPerHour(
  jobs: readonly JobAtRisk[],
  nowSeconds: number,
  relaunchSeconds: number,
  reclaimsPerHour: number = REBALANCE_INTERRUPTION_RATE_PER_HOUR,
): number {
  let cost = 0;
  for (const at of jobs) cost += interruptionCost(at, nowSeconds, relaunchSeconds);
  return reclaimsPerHour * cost;
}
