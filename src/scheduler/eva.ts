import { crossZonePricePerGiB, type Catalog, type InstanceType as CatalogType } from '../core/catalog.js';
import {
  MAX_VALUE_OF_TIME_PER_JOB_HOUR,
  progressSinceSeconds,
  type ValueOfTimeSetting,
  type Caps,
  type ClusterSnapshot,
  type SchedJob,
} from '../core/model.js';
import { ColocationTable, type SerializedColocationTable } from './colocation-table.js';
import { SlowdownBudget, type SlowdownBudgetState } from './slowdown-budget.js';
import { JobEvents, type JobEventsState } from './eva-events.js';
import { candidateEvaluator, generateCandidates, slowJobsDue, type EvaVariant } from './eva-candidates.js';
import { chooseCandidate } from './eva-choice.js';
import { cutToCaps } from './eva-cap-cut.js';
import { chosenPlan } from './eva-chosen-plan.js';
import { planMarkets } from './eva-cap-price.js';
import { repackedUnderCaps, type ChosenRound } from './eva-cap-repack.js';
import type { ExactCandidateOptions } from './eva-extra-candidates.js';
import { packInput, roundBook, type PackInput, type TaskPrice } from './eva-pack-input.js';
import { planFingerprint, unchangedPlan } from './eva-plan-reuse.js';
import type { RateModel } from './packing.js';
import { capRankValue } from './caps.js';
import { PriceBook } from './reservation-price.js';
import { ConsolidationCandidate } from './consolidation-candidate.js';
import { spotPlanningCatalog } from './market-choice.js';
import { SlowJobTracker } from './latency-migration.js';
import { RebalanceRiskTracker, type RebalanceRiskState } from './rebalance-risk.js';
import {
  LatencyView,
  resolveLatencyOptions,
  type LatencyOptions,
  type ResolvedLatencyOptions,
} from './latency-view.js';
import type { Plan, PlanContext, Scheduler, ThroughputObservation } from './types.js';
import { typeFitsQuotas } from '../core/quota-groups.js';

export type { EvaVariant } from './eva-candidates.js';

/**
 * EvaOptions.packingEfficiency's default, θ = 0.7, measured with the learned value of time (README "How the scheduler
 * decides", "Packed prices"): on the Alibaba conversions at seeds 1–6 it cost 1.7% (single-task) and 2.1% (half
 * multi-task) less than 0.8 at the same mean JCT, and the full trace 3.3% less; pai_200 costs 1.0% more (0.656).
 */
export const DEFAULT_PACKING_EFFICIENCY = 0.7;
/** EvaOptions.paybackMargin's default, measured in README "How the scheduler decides" (k = 8). */
export const DEFAULT_PAYBACK_MARGIN = 8;
/**
 * EvaOptions.valueOfTimePerJobHour's default: learned from a slowdown budget (slowdown-budget.ts), since the dollar
 * figure that keeps completion times near No-Packing's differs from workload to workload. See DEFAULT_TARGET_SLOWDOWN.
 */
export const DEFAULT_VALUE_OF_TIME_PER_JOB_HOUR: ValueOfTimeSetting = 'auto';
/**
 * EvaOptions.targetSlowdown's default: running jobs may go 9% slower than alone on average. Chosen on 300-job Alibaba
 * conversions at seeds 1–6, which the frontier's seeds (21–30) do not include (README "Value of time"), at θ = 0.8.
 * Mean cost and JCT of No-Packing's, single-task / half multi-task: 8%: 0.566, 1.090 / 0.608, 1.091; 9%: 0.552, 1.101 / 0.597,
 * 1.104; 10%: 0.545, 1.107 / 0.593, 1.120 (a fixed $8: 0.562, 1.107 / 0.595, 1.124).
 */
export const DEFAULT_TARGET_SLOWDOWN = 0.09;

/** Eva's user-facing tunables as the CLI and the controller config name them (all optional: Eva's defaults). */
export interface EvaTunables {
  readonly prices?: 'standalone' | 'packed' | undefined;
  readonly packingEfficiency?: number | undefined;
  readonly paybackMargin?: number | undefined;
  readonly defaultRate?: number | undefined;
  readonly valueOfTimePerJobHour?: ValueOfTimeSetting | undefined;
  readonly targetSlowdown?: number | undefined;
}

/** EvaOptions for the tunables that are set (unset ones keep Eva's defaults). */
export function evaTunables(
  t: EvaTunables,
): Pick<
  EvaOptions,
  | 'reservationPrice'
  | 'packingEfficiency'
  | 'paybackMargin'
  | 'defaultRate'
  | 'valueOfTimePerJobHour'
  | 'targetSlowdown'
> {
  return {
    ...(t.valueOfTimePerJobHour !== undefined ? { valueOfTimePerJobHour: t.valueOfTimePerJobHour } : {}),
    ...(t.targetSlowdown !== undefined ? { targetSlowdown: t.targetSlowdown } : {}),
    ...(t.prices !== undefined ? { reservationPrice: t.prices } : {}),
    ...(t.packingEfficiency !== undefined ? { packingEfficiency: t.packingEfficiency } : {}),
    ...(t.paybackMargin !== undefined ? { paybackMargin: t.paybackMargin } : {}),
    ...(t.defaultRate !== undefined ? { defaultRate: t.defaultRate } : {}),
  };
}

export interface EvaOptions {
  /** eva (default); ablations: full-only, partial-only, rp (no throughput awareness), single (multi-task unaware). */
  readonly variant?: EvaVariant;
  /** Co-location rate assumed per co-located task before anything is learned (Eva §4.3: 0.95). */
  readonly defaultRate?: number;
  /**
   * What earlier runs learned of co-location (a saved table, §4.4), to start from instead of nothing: a simulation of
   * a controller that has been running. `defaultRate`, when set, replaces the table's own prior.
   */
  readonly learnedColocation?: SerializedColocationTable | undefined;
  readonly caps?: Caps;
  /**
   * The price set values weigh each task's throughput with. `standalone` is Eva's reservation price (§4.2): the
   * cheapest type that hosts the task alone. `packed` (default) is what the task costs in a packed fleet: its
   * dominant-share price ÷ `packingEfficiency`, capped at the standalone price (PriceBook.packedReservationPrice).
   * Why: the standalone price overstates a task that straddles instance sizes by up to 2.7× (a [1 GPU, 12 vCPU]
   * task needs a $12.24/h p3.8xlarge alone but takes $4.59/h of a p3.16xlarge), so growing a set by Σ price × rate
   * adds such a task whatever slowdown it causes its neighbours, and interference looks cheap next to packing. With
   * packed prices, "a set pays for its instance" (Algorithm 1 line 15) reads: Σ dominant share × rate ≥ efficiency.
   * Tasks of multi-task jobs keep the standalone price: the straggler correction (§4.4) already cuts their value in
   * a shared set by n·(1 − r), and at packed prices such sets rarely pass that test, so the gang would be isolated on
   * standalone instances (measured on Alibaba with 30% multi-task jobs: +2.7% cost packed, −1.7% this way).
   */
  readonly reservationPrice?: 'standalone' | 'packed';
  /** Share of a packed instance's bottleneck capacity the fleet expects to use (default 0.7); `packed` pricing only. */
  readonly packingEfficiency?: number;
  /**
   * A plan that moves jobs must save this many times its extra migration cost over the horizon (eq. 1 with
   * k·M; Eva: 1). Default DEFAULT_PAYBACK_MARGIN. Why: the saving a move promises rests on estimates (learned
   * co-location rates, the horizon, remaining durations) while its disruption is certain, and at k = 1 many moves
   * are coin flips. Measured at k = 8 against k = 1 (README "How the scheduler decides"): cost within ±0.3% on
   * pai_200 and four Alibaba conversions, 18–47% fewer migrations.
   */
  readonly paybackMargin?: number;
  /**
   * Offer a fourth candidate, targeted consolidation (src/scheduler/consolidation-candidate.ts), to the decision
   * rule. Default: on for eva, eva-rp and eva-single; the full-only and partial-only ablations never use it.
   */
  readonly consolidation?: boolean;
  /**
   * Also offer the exact ILP optimum (§4.1, glpk.js) as a candidate when at most `maxTasks` tasks are waiting or
   * running and none is pinned. Load the solver first with `loadIlpSolver()`. The candidate is priced like the others
   * (TNRP, migration cost), so the decision rule takes it only when it pays off.
   */
  readonly exact?: ExactCandidateOptions;
  /**
   * Latency-aware placement of multi-task jobs that declare a network sensitivity or traffic (NoMora, research digest
   * §10): their P_job multiplies their TNRP, roots go first and the other tasks follow, new instances get a zone and a
   * cluster placement group, slow jobs may move. Default true; false is the `eva-latency-blind` ablation, which plans
   * as if the network were free. Jobs without a declaration are planned exactly as without the feature.
   */
  readonly latencyAware?: boolean;
  /** Domain defaults, NoMora's thresholds and the migration trigger (latency-view.ts LatencyOptions). */
  readonly latency?: LatencyOptions;
  /**
   * Use spot capacity where the catalog offers it (default false): plans pack with instances and task prices at spot
   * prices, and each new instance is bought on spot when its jobs allow it and its expected cost (price plus
   * interruption risk, the work at risk valued at on-demand reservation prices, src/scheduler/spot-cost.ts) is below
   * the on-demand price (src/scheduler/market-choice.ts).
   */
  readonly spot?: boolean;
  /**
   * What an hour of a job's completion time is worth, in $, for jobs that do not say (SchedJob.valueOfTimePerHour).
   * Candidates are then compared on dollars plus the value of the time they add: the slowdown co-location causes
   * (set values lose v·(1 − r), packing.ts compositionValue), a move's downtime and lost work, and the wait for new
   * instances (eva-choice.ts summarizeCandidate). 'auto' (the default): learned each round so that running jobs' mean
   * slowdown stays near `targetSlowdown` (slowdown-budget.ts); 0 is Eva's rule.
   */
  readonly valueOfTimePerJobHour?: ValueOfTimeSetting;
  /** With an 'auto' value of time: the mean slowdown of running jobs to hold, in (0, 1) (DEFAULT_TARGET_SLOWDOWN). */
  readonly targetSlowdown?: number;
}

/** One round's packing input with what Eva's choice needs beside it. */
interface EvaRoundInput extends PackInput {
  readonly snapshot: ClusterSnapshot;
  readonly view: LatencyView | undefined;
  readonly book: PriceBook;
  readonly staying: (jobId: string) => number | undefined;
  readonly valueOfTimeOf: (job: SchedJob) => number;
}

/**
 * Eva (EuroSys '25): each round, Full and Partial Reconfiguration are both computed and the time-amortized rule
 * (§4.5, eq. 1) picks one. Beyond the paper, a third candidate, "stay" (place new tasks, move nothing), guards
 * every move: a plan that moves jobs is chosen only when its saving over the horizon exceeds its migration cost
 * relative to staying. Jobs in a no-move window, or expected to finish before a move could pay back, are pinned.
 */
export class EvaScheduler implements Scheduler {
  readonly name: string;
  table: ColocationTable;
  private readonly book: PriceBook;
  /** Types at spot prices, for rounds where some job may use spot (undefined: spot off). */
  private readonly spotBook: PriceBook | undefined;
  private readonly variant: EvaVariant;
  private readonly caps: Caps;
  private readonly exact: ExactCandidateOptions | undefined;
  /** Arrivals, completions and Full Reconfigurations: the horizon T (eva-events.ts). */
  private events = JobEvents.empty();
  private previous: { fingerprint: string; plan: Plan } | undefined;
  private readonly consolidation: ConsolidationCandidate | undefined;
  /** The price of a task that set values and move costs use (EvaOptions.reservationPrice). */
  private readonly priceOf: TaskPrice;
  private readonly packedPrices: boolean;
  /** θ of packed prices (EvaOptions.packingEfficiency). */
  private readonly packingEfficiency: number;
  private readonly paybackMargin: number;
  /** $ per job-hour of completion time for jobs that do not say, when fixed (EvaOptions.valueOfTimePerJobHour). */
  private readonly fixedValueOfTime: number | undefined;
  /** Learns the value of time when it is 'auto'. */
  private slowdownBudget: SlowdownBudget | undefined;
  /** Undefined: latency-blind. */
  private readonly latency: ResolvedLatencyOptions | undefined;
  private slowJobs = new SlowJobTracker();
  /** How often an instance EC2 recommended rebalancing is reclaimed, as the rounds have seen (rebalance-risk.ts). */
  private rebalanceRisk = new RebalanceRiskTracker();

  constructor(
    private readonly catalog: Catalog,
    private readonly options: EvaOptions = {},
  ) {
    this.variant = options.variant ?? 'eva';
    const aware = options.latencyAware ?? true;
    this.latency = aware ? resolveLatencyOptions(options.latency) : undefined;
    this.name =
      this.variant !== 'eva'
        ? this.variant
        : !aware
          ? 'eva-latency-blind'
          : this.latency?.migrate === false
            ? 'eva-latency-no-migration'
            : 'eva';
    // A type whose one instance breaks its group's quota (and, planning spot, its spot quota) is bought only where no
    // other type can host a task: a plan counting on it is refused every round, and its jobs wait for ever.
    const quotas = options.caps?.quotas ?? [];
    const buyable = (type: CatalogType): boolean =>
      quotas.length === 0 || typeFitsQuotas(type, quotas, options.caps?.familyGroups, options.spot === true);
    this.book = new PriceBook(catalog, buyable);
    this.spotBook =
      options.spot === true && catalog.spot !== undefined
        ? new PriceBook(spotPlanningCatalog(catalog), buyable)
        : undefined;
    this.table =
      options.learnedColocation === undefined
        ? new ColocationTable(options.defaultRate)
        : ColocationTable.fromJSON({
            ...options.learnedColocation,
            ...(options.defaultRate === undefined ? {} : { defaultRate: options.defaultRate }),
          });
    this.caps = options.caps ?? {};
    this.exact = options.exact;
    const efficiency = options.packingEfficiency ?? DEFAULT_PACKING_EFFICIENCY;
    if (!(efficiency > 0 && efficiency <= 1))
      throw new Error(`packing efficiency must be in (0, 1], got ${efficiency}`);
    this.paybackMargin = options.paybackMargin ?? DEFAULT_PAYBACK_MARGIN;
    if (!(Number.isFinite(this.paybackMargin) && this.paybackMargin >= 1))
      throw new Error(`payback margin must be a finite number ≥ 1, got ${this.paybackMargin}`);
    const valueOfTime = options.valueOfTimePerJobHour ?? DEFAULT_VALUE_OF_TIME_PER_JOB_HOUR;
    if (valueOfTime === 'auto') {
      this.fixedValueOfTime = undefined;
      this.slowdownBudget = new SlowdownBudget(options.targetSlowdown ?? DEFAULT_TARGET_SLOWDOWN);
    } else {
      if (!(valueOfTime >= 0 && valueOfTime <= MAX_VALUE_OF_TIME_PER_JOB_HOUR))
        throw new Error(
          `value of time must be in [0, ${MAX_VALUE_OF_TIME_PER_JOB_HOUR}] $ per job-hour, got ${valueOfTime}`,
        );
      this.fixedValueOfTime = valueOfTime;
      this.slowdownBudget = undefined;
    }
    this.packedPrices = (options.reservationPrice ?? 'packed') === 'packed';
    this.packingEfficiency = efficiency;
    this.priceOf = this.packedPrices
      ? (b, d, n) => (n > 1 ? b.reservationPrice(d) : b.packedReservationPrice(d, efficiency))
      : (b, d) => b.reservationPrice(d);
    const singlePlan = this.variant === 'eva-full-only' || this.variant === 'eva-partial-only';
    this.consolidation =
      !singlePlan && (options.consolidation ?? true) ? new ConsolidationCandidate(catalog) : undefined;
  }

  /** $ per job-hour of completion time for jobs that do not say: fixed, or learned from the slowdown budget. */
  private get valueOfTime(): number {
    return this.fixedValueOfTime ?? (this.slowdownBudget as SlowdownBudget).valuePerJobHour;
  }

  private get model(): RateModel {
    return {
      table: this.table,
      throughputAware: this.variant !== 'eva-rp',
      multiTaskAware: this.variant !== 'eva-single',
    };
  }

  /**
   * Learn the co-location table from observed normalized throughputs (§4.3–§4.4). A task's co-located set is the
   * other observed (running) tasks on its instance; single-task jobs record directly, multi-task jobs record their
   * slowest task's value once all their tasks are observed, against the task the attribution rules pick. An instance
   * where a running task has no value teaches nothing, as in Eva's reference.
   */
  observe(snapshot: ClusterSnapshot, observations: readonly ThroughputObservation[]): void {
    const value = new Map(observations.map((o) => [o.taskId, o.normalizedThroughput]));
    // A job's observed throughput includes what its network costs it (P_job); what co-location costs it is the rest.
    const view = this.latencyView(snapshot);
    if (view !== undefined)
      for (const job of view.jobs.values()) {
        const p = view.current(job.id)?.performance;
        if (p === undefined || p >= 1) continue;
        for (const id of job.taskIds) {
          const v = value.get(id);
          if (v !== undefined) value.set(id, Math.min(1, v / p));
        }
      }
    const tasks = new Map(snapshot.tasks.map((t) => [t.id, t]));
    const jobs = new Map(snapshot.jobs.map((j) => [j.id, j]));
    // A task of a running job that has no value (its workload never seen alone, or no throughput reported) still
    // slows its neighbours: what they show is not their rate next to the observed tasks only, and recorded as such
    // it would also pull the prior of unseen pairs. A task held at its co-start barrier or still being prepared
    // belongs to a job not running yet and runs nothing.
    const unobservedRunning = (id: string): boolean => {
      const task = tasks.get(id);
      return task !== undefined && !value.has(id) && jobs.get(task.jobId)?.runningSinceSeconds !== undefined;
    };
    const keysOn = new Map<string, { id: string; key: string }[]>();
    for (const inst of snapshot.instances) {
      if (inst.taskIds.some(unobservedRunning)) continue;
      keysOn.set(
        inst.id,
        inst.taskIds
          .filter((id) => value.has(id) && tasks.has(id))
          .map((id) => ({ id, key: tasks.get(id)?.key as string })),
      );
    }
    const othersOf = (taskId: string): string[] | undefined => {
      const inst = tasks.get(taskId)?.instanceId;
      const here = inst === undefined ? undefined : keysOn.get(inst);
      return here?.filter((x) => x.id !== taskId).map((x) => x.key);
    };
    /** Each fully observed job's slowdown from co-location (a gang's is its slowest task's), for the slowdown budget. */
    const slowdowns: number[] = [];
    const placedSeconds: (number | undefined)[] = [];
    for (const job of snapshot.jobs) {
      const observed = job.taskIds.map((id) => value.get(id));
      if (observed.some((v) => v === undefined)) continue;
      if (observed.length > 0) {
        slowdowns.push(1 - Math.min(1, ...(observed as number[])));
        placedSeconds.push(progressSinceSeconds(job, snapshot.nowSeconds));
      }
      const members = job.taskIds.map((id) => ({ key: tasks.get(id)?.key, others: othersOf(id) }));
      if (members.some((m) => m.key === undefined || m.others === undefined)) continue;
      const typed = members as { key: string; others: string[] }[];
      if (typed.length === 1) {
        const only = typed[0] as { key: string; others: string[] };
        this.table.record(only.key, only.others, observed[0] as number);
      } else this.table.recordJob(typed, Math.min(...(observed as number[])));
    }
    // Unseen pairs are priced at what the pairs seen so far showed (the configured rate is where it starts).
    this.table.refreshPrior();
    this.slowdownBudget?.observe(snapshot.nowSeconds, slowdowns, {
      holdsJobsBack: snapshot.capHoldsJobsBack === true,
      placedSeconds,
    });
  }

  plan(snapshot: ClusterSnapshot, context?: PlanContext): Plan {
    const now = snapshot.nowSeconds;
    this.events.track(snapshot, context?.liveJobIds);
    this.rebalanceRisk.observe(snapshot);
    const view = this.latencyView(snapshot);
    if (this.latency !== undefined) this.slowJobs.update(snapshot, view, this.latency.migrationThreshold);
    const horizon = this.events.horizonSeconds(now);
    const round = this.roundInput(snapshot, view, horizon);
    const fingerprint = this.fingerprint(snapshot, round.pinnedTaskIds, horizon, view);
    const previous = this.previous;
    if (previous !== undefined && previous.fingerprint === fingerprint) {
      const unchanged = unchangedPlan(previous.plan, snapshot);
      this.rebalanceRisk.notePlan(unchanged.configuration);
      return unchanged;
    }

    const chosen = repackedUnderCaps(snapshot, this.choose(round, horizon), (fewer) =>
      this.choose(this.roundInput(fewer, this.latencyView(fewer), horizon), horizon),
    );
    const plan = chosen.plan;
    if (chosen.full) this.events.recordFull();
    // The fingerprint after the choice: a Full Reconfiguration changes p, hence T, so the next round re-plans.
    this.previous = {
      fingerprint: this.fingerprint(snapshot, round.pinnedTaskIds, this.events.horizonSeconds(now), view),
      plan,
    };
    this.rebalanceRisk.notePlan(plan.configuration);
    return plan;
  }

  /** What the round's candidates are packed from: the snapshot's tasks with their prices, pins and risk premiums. */
  private roundInput(
    snapshot: ClusterSnapshot,
    view: LatencyView | undefined,
    horizon: number,
  ): EvaRoundInput {
    const now = snapshot.nowSeconds;
    const staying =
      view === undefined
        ? () => undefined
        : (jobId: string) => this.stayingPerformance(view, jobId, now, horizon);
    const valueOfTimeOf = (j: SchedJob) => this.valueOfTimeOf(j);
    const book = roundBook(this.book, this.spotBook, snapshot);
    const packed = packInput(snapshot, {
      book,
      onDemandBook: this.book,
      priceOf: this.priceOf,
      valueOfTimeOf,
      model: this.model,
      view,
      staying,
      maxMovedJobs: this.caps.maxMigrationsPerRound ?? Number.POSITIVE_INFINITY,
      rebalanceReclaimsPerHour: this.rebalanceRisk.ratePerHour(),
    });
    return { ...packed, snapshot, view, book, staying, valueOfTimeOf };
  }

  /** The candidates of one round, the one the decision rule picks, and it as a plan under the caps. No state changes. */
  private choose(round: EvaRoundInput, horizon: number): ChosenRound {
    const { snapshot, view, input, jobs, packTasks, jobRp, pinnedTaskIds, staying, valueOfTimeOf } = round;
    const now = snapshot.nowSeconds;
    const trafficPrice = crossZonePricePerGiB(this.catalog);
    const evaluate = candidateEvaluator({ input, jobs, jobRp, now, trafficPrice, staying, valueOfTimeOf });

    const candidates = generateCandidates({
      variant: this.variant,
      snapshot,
      book: round.book,
      input,
      packTasks,
      jobs,
      jobRp,
      riskPremium: round.riskPremium,
      now,
      horizon,
      paybackMargin: this.paybackMargin,
      packedPrices: this.packedPrices,
      consolidation: this.consolidation,
      exact: this.exact,
      slowJobsDue: () => slowJobsDue(view, this.latency, this.slowJobs, pinnedTaskIds, packTasks),
      evaluate,
    });
    const valueOf = capRankValue(input.model);
    const markets = planMarkets(this.catalog, snapshot, this.spotBook !== undefined, round.jobRpOnDemand);
    // Cut with the tasks the candidates were packed from (network tags included), so cut drafts are valued alike.
    const checked = candidates.map((c) =>
      cutToCaps(
        c,
        this.caps,
        input.tasks,
        pinnedTaskIds,
        valueOf,
        markets.pricePerHour,
        evaluate,
        round.book,
      ),
    );
    const { chosen, reason } = chooseCandidate(checked, horizon, this.paybackMargin);
    const plan = chosenPlan({
      scheduler: this.name,
      now,
      chosen,
      candidates: checked.map((c) => c.summary),
      reason,
      caps: this.caps,
      tasks: input.tasks,
      pinnedTaskIds,
      pinned: round.pinned,
      model: input.model,
      markets,
      book: round.book,
      horizon,
      paybackMargin: this.paybackMargin,
      prices: this.packedPrices ? 'packed' : 'standalone',
      packingEfficiency: this.packingEfficiency,
      valueOfTime: this.valueOfTime,
      eventRatePerSecond: this.events.eventRatePerSecond,
      fullFraction: this.events.fullFraction,
    });
    return { plan, full: chosen.summary.name === 'full' || chosen.summary.name === 'full-standalone' };
  }

  /** $ per hour of the job's completion time: its own, else the scheduler's default; eva-rp ignores time as it does interference. */
  private valueOfTimeOf(job: SchedJob): number {
    return this.variant === 'eva-rp' ? 0 : (job.valueOfTimePerHour ?? this.valueOfTime);
  }

  /** The round's network view, or undefined when latency-blind or no job of the snapshot declares a network. */
  private latencyView(snapshot: ClusterSnapshot): LatencyView | undefined {
    if (this.latency === undefined || !snapshot.jobs.some((j) => j.network !== undefined)) return undefined;
    const view = new LatencyView(snapshot, this.latency);
    return view.jobs.size === 0 ? undefined : view;
  }

  /**
   * P_job a job can expect over the horizon where it is now. A slowness its placement does not explain (the domains'
   * defaults say it should be fast: congestion) is expected to last about as long as it has lasted so far (the older a
   * spell, the likelier it persists), then the placement's own P_job returns: over T that averages to
   * P_now · w + P_domains · (1 − w) with w = min(1, slow so far / T). Measured slowness that the placement explains
   * (across zones, say) stays. So a short congestion episode cannot pay for a move, whichever candidate would make it,
   * while one that lasts soon can.
   */
  private stayingPerformance(
    view: LatencyView,
    jobId: string,
    now: number,
    horizon: number,
  ): number | undefined {
    const current = view.current(jobId);
    if (current === undefined) return undefined;
    const slowFor = this.slowJobs.slowForSeconds(jobId, now);
    if (slowFor === undefined || current.byDomain <= current.performance) return current.performance;
    const w = horizon > 0 ? Math.min(1, slowFor / horizon) : 1;
    return current.performance * w + current.byDomain * (1 - w);
  }

  /** The round's inputs as a string (eva-plan-reuse.ts): an unchanged one reuses the last plan. */
  private fingerprint(
    snapshot: ClusterSnapshot,
    pinned: ReadonlySet<string>,
    horizon: number,
    view: LatencyView | undefined,
  ): string {
    return planFingerprint(
      this.table.version,
      this.valueOfTime,
      this.slowJobs,
      snapshot,
      pinned,
      horizon,
      view,
    );
  }

  /** Same options, a deep copy of the learned state (table, event history, known jobs). */
  fork(): EvaScheduler {
    const copy = new EvaScheduler(this.catalog, this.options);
    copy.importState(structuredClone(this.exportState()));
    return copy;
  }

  /** The co-location table's estimate (§4.4: exact set, else pairwise product, else the default). */
  expectedRate(taskKey: string, otherKeys: readonly string[]): number {
    return this.variant === 'eva-rp' ? 1 : this.table.rate(taskKey, otherKeys);
  }

  /** The co-location table as learned so far (§4.4), in the form a later run can start from. */
  learnedColocation(): SerializedColocationTable {
    return this.table.toJSON();
  }

  /** Scheduler state to persist across controller restarts. */
  exportState(): JobEventsState & {
    table: SerializedColocationTable;
    /** Each slow latency-sensitive job's rounds and since when (absent in state saved before latency-aware placement). */
    slowJobs?: [string, number, number][];
    /** What the slowdown budget learned (an 'auto' value of time only). */
    slowdownBudget?: SlowdownBudgetState;
    /** Reclaims of instances EC2 recommended rebalancing (absent in state saved before it was learned). */
    rebalanceRisk?: RebalanceRiskState;
  } {
    return {
      table: this.learnedColocation(),
      ...this.events.toJSON(),
      slowJobs: this.slowJobs.toJSON(),
      ...(this.slowdownBudget === undefined ? {} : { slowdownBudget: this.slowdownBudget.toJSON() }),
      rebalanceRisk: this.rebalanceRisk.toJSON(),
    };
  }

  importState(state: ReturnType<EvaScheduler['exportState']>): void {
    // Every part is read before any is kept: a state unreadable in one part leaves the scheduler as it was (the
    // controller then starts from defaults), not with a table learned elsewhere beside events of its own.
    const table = ColocationTable.fromJSON(state.table);
    const events = JobEvents.fromJSON(state);
    const slowJobs = SlowJobTracker.fromJSON(state.slowJobs);
    const rebalanceRisk = RebalanceRiskTracker.fromJSON(state.rebalanceRisk);
    const slowdownBudget =
      this.slowdownBudget === undefined
        ? undefined
        : SlowdownBudget.fromJSON(this.slowdownBudget.target, state.slowdownBudget);
    this.table = table;
    this.events = events;
    this.slowJobs = slowJobs;
    this.rebalanceRisk = rebalanceRisk;
    if (slowdownBudget !== undefined) this.slowdownBudget = slowdownBudget;
  }
}
