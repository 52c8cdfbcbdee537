import { setupSeconds, type InstanceType } from '../core/catalog.js';
import type { ClusterSnapshot, SchedInstance, SchedJob, SchedTask } from '../core/model.js';
import type { FamilyDemand } from '../core/resources.js';
import { pinnedTasks } from './eva-pins.js';
import { jobLaunchSeconds } from './job-launch-seconds.js';
import { tagCurrent, type StayingPerformance } from './latency-placement.js';
import type { LatencyView } from './latency-view.js';
import type { PackTask, RateModel } from './packing.js';
import type { PlanningInput } from './reconfiguration.js';
import type { PriceBook } from './reservation-price.js';
import { interruptionExceedsBound, rebalanceRiskPerHour, type JobAtRisk } from './spot-cost.js';

/** How Eva turns a round's snapshot into the input of its packing passes (Full and Partial Reconfiguration). */

/** The price of a task that set values and move costs use (EvaOptions.reservationPrice). */
export type TaskPrice = (book: PriceBook, demand: FamilyDemand, jobTaskCount: number) => number;

/** What the scheduler contributes to a round's packing input besides the snapshot. */
export interface PackInputOptions {
  /** The round's prices (roundBook): spot prices when some job may use spot. */
  readonly book: PriceBook;
  /** On-demand prices: what a job's work is worth whatever carries it. */
  readonly onDemandBook: PriceBook;
  readonly priceOf: TaskPrice;
  /** $ per hour of the job's completion time. */
  readonly valueOfTimeOf: (job: SchedJob) => number;
  readonly model: RateModel;
  /** The round's network view; undefined: the network is ignored. */
  readonly view: LatencyView | undefined;
  /** P_job a job can expect over the horizon where it is now (undefined: the network does not matter to it). */
  readonly staying: StayingPerformance;
  /** The migrations-per-round cap. */
  readonly maxMovedJobs: number;
  /** Reclaims per hour of an instance EC2 recommended rebalancing (rebalance-risk.ts); default the prior. */
  readonly rebalanceReclaimsPerHour?: number | undefined;
}

/** A round's packing input and the per-job figures the rest of the round prices candidates with. */
export interface PackInput {
  readonly input: PlanningInput;
  readonly jobs: ReadonlyMap<string, SchedJob>;
  /** The round's tasks at their reservation prices, untagged by the network view. */
  readonly packTasks: ReadonlyMap<string, PackTask>;
  /** Σ reservation prices of a job's tasks at the round's prices, $/hour. */
  readonly jobRp: ReadonlyMap<string, number>;
  /** Σ reservation prices of a job's tasks on demand, $/hour. */
  readonly jobRpOnDemand: ReadonlyMap<string, number>;
  /** Per instance EC2 recommended rebalancing, the premium added to its price, $/hour. */
  readonly riskPremium: ReadonlyMap<string, number>;
  readonly pinnedTaskIds: ReadonlySet<string>;
  readonly pinned: { jobId: string; why: string }[];
}

/** The price book a round packs with: spot prices when some job may use spot, else on-demand ones. */
export function roundBook(
  onDemandBook: PriceBook,
  spotBook: PriceBook | undefined,
  snapshot: ClusterSnapshot,
): PriceBook {
  // Instances and task prices are at spot where some job may use it. Why task prices too: Eva's tests weigh a set's
  // Σ price × rate against its instance's price and a move's saving against its delay × price (eq. 1), and with
  // on-demand task prices over spot instances every set "pays" (a c7i task is worth 2× its share of a spot
  // instance) so nothing is ever repacked, and moves look 2-3× dearer than the capacity they save. Measured with
  // `simulate --spot on`: eva migrated 0.92 jobs per job instead of 2.44 and paid 4% (Alibaba) and 6% (pai_200)
  // more than with spot task prices. The work an interruption loses is still valued on demand (jobRpOnDemand).
  const spotRound = spotBook !== undefined && snapshot.jobs.some((j) => j.spot !== 'never');
  return spotRound ? (spotBook as PriceBook) : onDemandBook;
}

/**
 * What keeping an instance EC2 recommended rebalancing costs on top of its price, $/hour: the risk its jobs run
 * there (spot-cost.ts `rebalanceRiskPerHour`, their work valued at on-demand prices); 0 for any other instance.
 * Added to its price, keeping it costs what the risk is worth, and the round moves its tasks off only when that
 * pays their moves: a priced proactive move.
 */
export function rebalancePremium(
  inst: SchedInstance,
  type: InstanceType,
  snapshot: ClusterSnapshot,
  jobs: ReadonlyMap<string, SchedJob>,
  taskCount: ReadonlyMap<string, number>,
  priceOf: TaskPrice,
  onDemandBook: PriceBook,
  reclaimsPerHour?: number,
): number {
  if (inst.rebalanceRecommended !== true) return 0;
  const jobIds = new Set(snapshot.tasks.filter((t) => t.instanceId === inst.id).map((t) => t.jobId));
  const atRisk: JobAtRisk[] = [];
  for (const id of jobIds) {
    const job = jobs.get(id);
    if (job === undefined) continue;
    const rpPerHour = snapshot.tasks
      .filter((t) => t.jobId === id)
      .reduce((sum, t) => sum + priceOf(onDemandBook, t.demand, taskCount.get(id) ?? 1), 0);
    atRisk.push({ job, rpPerHour });
  }
  return rebalanceRiskPerHour(atRisk, snapshot.nowSeconds, setupSeconds(type), reclaimsPerHour);
}

/**
 * The jobs one interruption now would delay past the bound their owners set (`spotMaxDelaySeconds`), their
 * replacement's launch the longest setup of their tasks' reservation-price types (job-launch-seconds.ts): as a new
 * instance is bought on demand for them (market-choice.ts), the free room of a spot instance already running is no
 * place for them either. A task already on a spot instance may stay there (spot-host-rules.ts): its risk is taken,
 * and moving it off would cost the job a move.
 */
export function jobsPastSpotBound(snapshot: ClusterSnapshot, book: PriceBook): Set<string> {
  const bounded = snapshot.jobs.filter((j) => j.spotMaxDelaySeconds !== undefined);
  if (bounded.length === 0) return new Set();
  const tasksOf = new Map<string, SchedTask[]>();
  for (const t of snapshot.tasks) {
    const tasks = tasksOf.get(t.jobId);
    if (tasks === undefined) tasksOf.set(t.jobId, [t]);
    else tasks.push(t);
  }
  return new Set(
    bounded
      .filter((j) =>
        interruptionExceedsBound(j, snapshot.nowSeconds, jobLaunchSeconds(book, tasksOf.get(j.id) ?? [])),
      )
      .map((j) => j.id),
  );
}

/** The round's packing input: instances at the round's prices plus rebalance premiums, priced tasks, pins. */
export function packInput(snapshot: ClusterSnapshot, o: PackInputOptions): PackInput {
  const { book, view, staying } = o;
  const jobs = new Map(snapshot.jobs.map((j) => [j.id, j]));
  const taskCount = new Map(snapshot.jobs.map((j) => [j.id, j.taskIds.length]));
  const instanceType = new Map<string, InstanceType>();
  const riskPremium = new Map<string, number>();
  for (const inst of snapshot.instances) {
    const type = book.type(inst.typeName);
    const premium = rebalancePremium(
      inst,
      type,
      snapshot,
      jobs,
      taskCount,
      o.priceOf,
      o.onDemandBook,
      o.rebalanceReclaimsPerHour,
    );
    if (premium > 0) riskPremium.set(inst.id, premium);
    instanceType.set(inst.id, premium > 0 ? { ...type, costPerHour: type.costPerHour + premium } : type);
  }
  // Jobs that never run on spot, or that one interruption would now delay past their bound, are kept off the fleet's
  // spot instances (spot-host-rules.ts); without any, nothing changes.
  const spotInstanceIds = new Set(snapshot.instances.filter((i) => i.market === 'spot').map((i) => i.id));
  const pastBound = jobsPastSpotBound(snapshot, book);
  const onDemandOnly = (job: SchedJob) =>
    spotInstanceIds.size > 0 && (job.spot === 'never' || pastBound.has(job.id));
  const packTasks = new Map<string, PackTask>();
  for (const t of snapshot.tasks) {
    const job = jobs.get(t.jobId);
    if (job === undefined) continue;
    const jobValueOfTime = o.valueOfTimeOf(job);
    packTasks.set(t.id, {
      id: t.id,
      jobId: t.jobId,
      key: t.key,
      demand: t.demand,
      rp: o.priceOf(book, t.demand, taskCount.get(t.jobId) ?? 1),
      jobTaskCount: taskCount.get(t.jobId) ?? 1,
      currentInstanceId:
        t.instanceId !== undefined && instanceType.has(t.instanceId) ? t.instanceId : undefined,
      // The job's value of time shared among its tasks: a set holding all of them at rate r loses V·(1 − r).
      ...(jobValueOfTime > 0 ? { timeValue: jobValueOfTime / (taskCount.get(t.jobId) ?? 1) } : {}),
      ...(onDemandOnly(job) ? { onDemandOnly: true } : {}),
    });
  }
  const jobRp = new Map<string, number>();
  for (const t of packTasks.values()) jobRp.set(t.jobId, (jobRp.get(t.jobId) ?? 0) + t.rp);
  // What a job's work is worth whatever carries it: the interruption risk of a spot instance (market-choice.ts).
  const jobRpOnDemand = new Map<string, number>();
  for (const t of snapshot.tasks)
    jobRpOnDemand.set(
      t.jobId,
      (jobRpOnDemand.get(t.jobId) ?? 0) + o.priceOf(o.onDemandBook, t.demand, taskCount.get(t.jobId) ?? 1),
    );

  const { pinnedTaskIds, pinned } = pinnedTasks(
    snapshot,
    packTasks,
    instanceType,
    jobRp,
    (jobId) => staying(jobId) ?? 1,
  );
  const input: PlanningInput = {
    book,
    model: o.model,
    tasks: view === undefined ? packTasks : tagCurrent(view, packTasks, staying),
    instances: snapshot.instances.map((i) => ({
      id: i.id,
      type: instanceType.get(i.id) as InstanceType,
      taskIds: i.taskIds.filter((id) => packTasks.has(id)),
      ...(i.rebalanceRecommended === true ? { retiring: true } : {}),
    })),
    pinnedTaskIds,
    maxMovedJobs: o.maxMovedJobs,
    latency: view,
    ...(snapshot.jobs.some(onDemandOnly) ? { spotInstanceIds } : {}),
  };
  return { input, jobs, packTasks, jobRp, jobRpOnDemand, riskPremium, pinnedTaskIds, pinned };
}
