import { setupSeconds } from '../core/catalog.js';
import type { Caps, SchedJob } from '../core/model.js';
import { perHourToPerSecond, roundCents } from '../core/units.js';
import { chooseFull, netValue } from './decision-rule.js';
import type { DraftInstance } from './full-reconfiguration.js';
import { compositionValue, type PackTask } from './packing.js';
import type { PlanningInput } from './reconfiguration.js';
import { jobMoveCost } from './eva-pins.js';
import { planNetwork, tagWithPlan, type StayingPerformance } from './latency-placement.js';
import { draftWithTasks } from './reconfiguration.js';
import type { CandidateSummary } from './types.js';

/**
 * How Eva weighs its candidate plans against each other: each is priced (cost, TNRP saving, migration cost), checked
 * against the caps, and the time-amortized rule (§4.5, eq. 1) picks one.
 */

/** The order the decision rule weighs candidates in: a later one must beat the best so far, so ties keep staying. */
const CANDIDATE_ORDER: readonly CandidateSummary['name'][] = [
  'stay',
  'partial',
  'latency',
  'full',
  'full-standalone',
  'consolidate',
  'rebalance',
  'exact',
];

/** A candidate plan: its instances and what the decision rule knows of it. */
export interface Candidate {
  readonly summary: CandidateSummary;
  readonly drafts: readonly DraftInstance[];
  /** Weighed as cut to the caps (eva-cap-cut.ts): the jobs the cut leaves waiting, and the cap each waits for. */
  readonly capWaits?: readonly { readonly jobId: string; readonly cap: string }[] | undefined;
  /**
   * Rejected only for caps the plan's cut to the caps repairs ($/hour, instance count: eva-chosen-plan.ts drops
   * instances and their jobs wait), none it cannot (migrations per round): a last resort when every candidate is
   * rejected (chooseCandidate).
   */
  readonly cutRepairs?: boolean | undefined;
}

/**
 * A candidate's cost per hour, saving per second against its cost, and the migration cost of getting there. With the
 * round's network view (latency-aware placement, research digest §10.2), each network-aware job's TNRP is taken at
 * the P_job the plan gives it, and the traffic its tasks would send across zones is a cost of the plan.
 */
export function summarizeCandidate(
  name: CandidateSummary['name'],
  drafts: readonly DraftInstance[],
  input: PlanningInput,
  jobs: ReadonlyMap<string, SchedJob>,
  jobRp: ReadonlyMap<string, number>,
  now: number,
  crossZonePricePerGiB = 0,
  staying?: StayingPerformance,
  /** $ per hour of a job's completion time (0: dollars only, Eva's rule). */
  valueOfTime: (job: SchedJob) => number = () => 0,
): CandidateSummary {
  let costPerHour = 0;
  let tnrp = 0;
  const network =
    input.latency === undefined || input.latency.jobs.size === 0
      ? undefined
      : planNetwork(input.latency, drafts, crossZonePricePerGiB, staying);
  let newInstances = 0;
  let launchCost = 0;
  const moved = new Set<string>();
  /** Per moved job, the longest setup of a new instance it must wait for. */
  const waitForSetup = new Map<string, number>();
  /** Per job not yet placed, the longest setup of a new instance it must wait for (value of time only). */
  const waitToStart = new Map<string, number>();
  const timed = [...input.tasks.values()].some((t) => (t.timeValue ?? 0) > 0);
  /** Σ TNRP in dollars only, when time is weighed (the summary shows the two parts apart). */
  let dollarTnrp = 0;
  const dollarsOnly: PlanningInput = { ...input, model: { ...input.model, valueOfTime: false } };
  for (const d of drafts) {
    costPerHour += d.type.costPerHour;
    tnrp += draftValue(d, input, network?.performance);
    if (timed) dollarTnrp += draftValue(d, dollarsOnly, network?.performance);
    if (d.isNew) {
      newInstances += 1;
      // A new instance is paid while it boots and before its tasks run (catalog launch delays).
      launchCost += perHourToPerSecond(d.type.costPerHour) * setupSeconds(d.type);
    }
    for (const id of d.taskIds) {
      const t = input.tasks.get(id) as PackTask;
      if (t.currentInstanceId !== undefined && t.currentInstanceId !== d.id) {
        moved.add(t.jobId);
        if (d.isNew)
          waitForSetup.set(t.jobId, Math.max(waitForSetup.get(t.jobId) ?? 0, setupSeconds(d.type)));
      } else if (timed && t.currentInstanceId === undefined && d.isNew)
        waitToStart.set(t.jobId, Math.max(waitToStart.get(t.jobId) ?? 0, setupSeconds(d.type)));
    }
  }
  let migrationCost = launchCost;
  let migrationTimeCost = 0;
  for (const jobId of moved) {
    // A job moved onto a new instance is also out of service while that instance boots (beyond the reference). With
    // make before break it works on instead, while the instance it leaves is paid through the boot: priced alike.
    const job = jobs.get(jobId) as SchedJob;
    const rpPerSecond = perHourToPerSecond(jobRp.get(jobId) ?? 0);
    migrationCost +=
      jobMoveCost(job, jobRp.get(jobId) ?? 0, now) + (waitForSetup.get(jobId) ?? 0) * rpPerSecond;
    // The same seconds out of service (and the work to redo) delay the job's completion.
    if (timed)
      migrationTimeCost +=
        jobMoveCost(job, valueOfTime(job), now) +
        (waitForSetup.get(jobId) ?? 0) * perHourToPerSecond(valueOfTime(job));
  }
  // A new job placed on a new instance starts when that instance is ready, not now.
  for (const [jobId, seconds] of waitToStart)
    migrationTimeCost += seconds * perHourToPerSecond(valueOfTime(jobs.get(jobId) as SchedJob));
  const traffic = network?.crossZoneCostPerHour ?? 0;
  return {
    name,
    costPerHour,
    instances: drafts.length,
    newInstances,
    // Reference `provision_saving_per_sec`: (Σ TNRP − round(Σ cost, 2)) / 3600.
    // In dollars only; the value of time is apart (timeCostPerHour) and the decision rule adds the two.
    savingPerSecond: perHourToPerSecond((timed ? dollarTnrp : tnrp) - roundCents(costPerHour + traffic)),
    migrationCost,
    movedJobs: [...moved].sort(),
    ...(traffic > 0 ? { crossZoneCostPerHour: traffic } : {}),
    ...(timed ? { timeCostPerHour: Math.max(0, dollarTnrp - tnrp), migrationTimeCost } : {}),
  };
}

/** A draft's TNRP, its network-aware jobs at the P_job the plan gives them. */
function draftValue(
  d: DraftInstance,
  input: PlanningInput,
  performance: ReadonlyMap<string, number> | undefined,
): number {
  if (performance === undefined || d.composition.latencyMembers === 0)
    return compositionValue(d.composition, input.model, false);
  const { tasks } = tagWithPlan(
    d.taskIds.map((id) => input.tasks.get(id) as PackTask),
    performance,
  );
  return compositionValue(draftWithTasks(d, tasks).composition, input.model, false);
}

/**
 * Why a candidate breaks the caps, or undefined when it keeps them. Its $/hour is taken at the markets its instances
 * are bought in (`pricePerHour`, eva-cap-price.ts), not at `costPerHour`, which carries rebalance risk premiums.
 */
export function capViolation(
  c: Pick<Candidate, 'summary' | 'drafts'>,
  caps: Caps,
  pricePerHour: (d: DraftInstance) => number,
): string | undefined {
  const s = c.summary;
  if (caps.maxCostPerHour !== undefined) {
    const cost = c.drafts.reduce((sum, d) => sum + pricePerHour(d), 0);
    if (cost > caps.maxCostPerHour + 1e-9)
      return `costs $${cost.toFixed(2)}/h over the $${caps.maxCostPerHour}/h cap`;
  }
  if (caps.maxInstances !== undefined && s.instances > caps.maxInstances)
    return `${s.instances} instances over the cap of ${caps.maxInstances}`;
  if (caps.maxMigrationsPerRound !== undefined && s.movedJobs.length > caps.maxMigrationsPerRound)
    return `moves ${s.movedJobs.length} jobs over the cap of ${caps.maxMigrationsPerRound} per round`;
  return undefined;
}

/**
 * What the decision rule weighs: the saving rate less the value of the time the plan's slowdown adds, and the
 * migration cost plus the value of the time its moves and waits add (both parts 0 without a value of time).
 */
export function weighed(s: CandidateSummary): { savingPerSecond: number; migrationCost: number } {
  return {
    savingPerSecond: s.savingPerSecond - perHourToPerSecond(s.timeCostPerHour ?? 0),
    migrationCost: s.migrationCost + (s.migrationTimeCost ?? 0),
  };
}

/** Whether a cut to the caps (dropping instances, never moving a job) can bring the candidate under them. */
export function cutRepairs(s: CandidateSummary, caps: Caps): boolean {
  return caps.maxMigrationsPerRound === undefined || s.movedJobs.length <= caps.maxMigrationsPerRound;
}

/**
 * Eq. 1 between the candidates in turn (CANDIDATE_ORDER: each replaces the best so far only if it beats it, its
 * extra migration cost counted `paybackMargin` times), so that no move is approved without a positive net saving
 * over the horizon. Candidates that break a cap are skipped while another is eligible; when none is, only those the
 * plan's cut to the caps repairs are weighed (a plan over the migrations cap would be refused round after round,
 * while `stay` cut to a lowered $ cap stops a job, which a later round restarts). With a value of time, both
 * sides of eq. 1 carry it (weighed): a plan that saves dollars by slowing jobs down loses when their time is worth
 * more, and a move's downtime counts with its dollars, `paybackMargin` times.
 */
export function chooseCandidate(
  candidates: readonly Candidate[],
  horizon: number,
  paybackMargin: number,
): { chosen: Candidate; reason: string } {
  const eligible = candidates.filter((c) => c.summary.rejectedBecause === undefined);
  const repairable = candidates.filter((c) => c.cutRepairs === true);
  const lastResort = eligible.length === 0 && repairable.length > 0;
  const pool = eligible.length > 0 ? eligible : lastResort ? repairable : candidates;
  const margin = paybackMargin === 1 ? '' : ` ×${paybackMargin}`;
  const describe = (c: Candidate) => {
    const s = c.summary;
    const w = weighed(s);
    const time =
      s.timeCostPerHour === undefined
        ? ''
        : ` (time: −$${s.timeCostPerHour.toFixed(2)}/h slowdown, +$${(s.migrationTimeCost ?? 0).toFixed(2)} delays)`;
    return `${s.name}: saving $${(s.savingPerSecond * 3600).toFixed(2)}/h over T=${Math.round(horizon)} s, migration $${s.migrationCost.toFixed(2)}${margin}${time}, net $${netValue(w.savingPerSecond, paybackMargin * w.migrationCost, horizon).toFixed(2)}`;
  };
  if (pool.length === 1) {
    const only = pool[0] as Candidate;
    const resort = lastResort
      ? 'every candidate breaks a cap; the only one a cut to the caps repairs'
      : 'only candidate';
    return { chosen: only, reason: `${resort} (${describe(only)})` };
  }
  const ordered = CANDIDATE_ORDER.flatMap((name) => pool.filter((c) => c.summary.name === name));
  let best = ordered[0];
  if (best === undefined) throw new Error('no candidate plan');
  for (const c of ordered.slice(1))
    if (chooseFull(weighed(c.summary), weighed(best.summary), horizon, paybackMargin)) best = c;
  const resort = lastResort ? 'every candidate breaks a cap; of those a cut to the caps repairs, ' : '';
  const reason = `${resort}chose ${best.summary.name} — ${pool.map(describe).join('; ')}`;
  return { chosen: best, reason };
}
