import {
  addUsage,
  capsUsed,
  capViolations,
  dominantShare,
  hasAnyCap,
  NO_USAGE,
  type CapUsage,
  type JobFootprint,
  type QueueCaps,
} from './caps.js';
import { LAG_EPS_SECONDS } from './class-lag.js';
import { classify, waterFill } from './class-shares.js';
import { orderQueue, type OrderableJob } from './ordering.js';
import type { WfqConfig } from './wfq.js';

/** Admission under caps: which waiting jobs enter the plan this round, and which running ones a class may reclaim. */

const EPS = 1e-9;

/** A job the queue layer manages. */
export interface QueuedJob extends OrderableJob {
  /** PCS size for class mapping: resource-time at the minimum allocation (e.g. $-hours or task-seconds). */
  readonly sizeSeconds: number;
  readonly team?: string | undefined;
  /** Expected use of the caps once admitted (e.g. `reservationFootprint`); multi-task jobs are admitted whole. */
  readonly footprint: JobFootprint;
  /**
   * What decides whether the job can ever fit (never-fits), when not `footprint`: a footprint sized for the fleet as it
   * is now (plan-cost admission counting idle instances) says whether it fits now, not whether it ever can.
   */
  readonly fitFootprint?: JobFootprint | undefined;
  /**
   * What the job holds of the caps once it runs, when not `footprint`: plan-cost sizing above a packing factor of 1
   * spreads the fleet's idle room over every job's footprint, room no job holds. A class's ceiling (`maxShare`) is
   * judged on this.
   */
  readonly heldFootprint?: JobFootprint | undefined;
}

export interface RunningQueuedJob extends QueuedJob {
  /** When it was admitted; the most recently admitted job of a class is its first preemption candidate. */
  readonly admittedSeconds: number;
  /**
   * Whether a round could stop it now (reconfigurable, placed, outside its no-move window); default true. A
   * preemption plan counts only such jobs, so a plan is never carried out in part.
   */
  readonly preemptible?: boolean | undefined;
}

export interface AdmissionInput {
  readonly nowSeconds: number;
  readonly caps: QueueCaps;
  readonly config: WfqConfig;
  readonly running: readonly RunningQueuedJob[];
  readonly waiting: readonly QueuedJob[];
  /** Consecutive rounds each class has been short of its guarantee (from the previous result). */
  readonly shortRounds?: ReadonlyMap<string, number> | undefined;
  /**
   * Each class's lag now (class-lag.ts: seconds of the capped capacity its fluid share owed it while it waited, less
   * what it held); a class not listed is at 0. It ranks the classes in the work-conserving pass.
   */
  readonly lagSeconds?: ReadonlyMap<string, number> | undefined;
  /**
   * The waiting jobs would go on capacity already paid for (placement between rounds): they add no instance, dollar
   * or quota use to the fleet, so neither the caps' exact check nor the whole capacity's bound (a share of 1) applies.
   * A class's own ceiling (`maxShare`), the order, and never-fits still hold: they divide the capped capacity between
   * jobs whatever it runs on.
   */
  readonly onPaidRoom?: boolean | undefined;
}

export type WaitReason = 'class-share' | 'caps' | 'never-fits';

export interface QueuedPosition {
  readonly jobId: string;
  readonly classId: string;
  /** 0 = head of its class queue. */
  readonly position: number;
  readonly reason: WaitReason;
}

export interface PreemptionCandidate {
  readonly jobId: string;
  readonly classId: string;
  readonly forClassId: string;
  readonly reason: string;
}

export interface ClassShare {
  readonly classId: string;
  /** Normalised weight = guaranteed share when the class has enough demand. */
  readonly weightShare: number;
  /** Dominant-share demand of the class (running + waiting). */
  readonly demandShare: number;
  /** min(weight share, demand): what the class can reclaim by preemption. */
  readonly guaranteedShare: number;
  /** Water-filled fluid share of the capped capacity (Σ over classes = min(1, Σ demand)). */
  readonly fluidShare: number;
  /** Dominant share used by running + newly admitted jobs. */
  readonly usedShare: number;
}

export interface AdmissionResult {
  /** Waiting jobs that enter the plan this round, in admission order. */
  readonly admitted: readonly string[];
  /** Waiting jobs that stay queued, in class order. */
  readonly queued: readonly QueuedPosition[];
  /**
   * Running jobs to stop so a class can reclaim its guarantee. Only a proposal: the caller stops them at their
   * next checkpoint (lost work and restore delay count like a migration), and the reclaiming class's head is
   * admitted in a later round once the capacity is actually free.
   */
  readonly preemptions: readonly PreemptionCandidate[];
  readonly classes: readonly ClassShare[];
  /** Pass to the next round's input. */
  readonly shortRounds: ReadonlyMap<string, number>;
  /** Cap use of running + admitted jobs. */
  readonly usage: CapUsage;
}

interface Entry<J extends QueuedJob> {
  readonly job: J;
  readonly classId: string;
  readonly share: number;
  /** Its dominant share by `fitFootprint`: over its class's ceiling, it never fits. */
  readonly fitShare: number;
  /** Its dominant share by `heldFootprint`, what its class's ceiling counts. */
  readonly heldShare: number;
}

/**
 * Decide which waiting jobs enter the plan this round.
 * 1. Every job's demand is its dominant share of the caps (`dominantShare`); class demands are water-filled over
 *    the capacity 1 with the class weights.
 * 2. Share pass: per class, in its ordering, admit the prefix of waiting jobs that fits in the class's fluid share
 *    and the exact caps (head-of-line blocking inside a class keeps its order, hence its predictions).
 * 3. Work-conserving pass: while some class's head job fits the exact caps (and its class's `maxShare` ceiling, judged
 *    on what its jobs hold), admit it: no class idles capacity another class's head could use. Classes below their
 *    fluid share go first, then the largest lag (service owed over time, class-lag.ts), then the largest
 *    (fluid − used) deficit, then config order.
 *    The deficit alone has no memory: when a job ends every class may hold nothing, and the heavier class, or the
 *    one listed first, would win every freed room while a head bigger than its class's share waits for good. A class
 *    below its fluid share whose head the caps hold back keeps what is free for that head (a reservation): otherwise a
 *    head larger than what one ending job frees, in a class whose weight is below the head's share (so preemption
 *    never asks for it), would wait for good while smaller classes take each freed unit, and a class over its share
 *    could take room in the round that preempts its running jobs for the short class.
 * 4. Preemption: a class whose head would fit inside its guarantee min(w_k, D_k), short by ≥ the margin for
 *    `minShortRounds` rounds, proposes stopping the most recently admitted jobs of the classes furthest over their
 *    fluid share until the head fits.
 * With no caps at all every waiting job is admitted.
 */
export function admit(input: AdmissionInput): AdmissionResult {
  const { caps, config, nowSeconds } = input;
  const classIds = config.classes.map((c) => c.id);
  const wSum = config.classes.reduce((s, c) => s + c.weight, 0);
  const weightShare = config.classes.map((c) => c.weight / wSum);
  const idx = new Map(classIds.map((id, i) => [id, i]));
  const entry = <J extends QueuedJob>(job: J): Entry<J> => {
    const share = hasAnyCap(caps) ? dominantShare(job.footprint, caps) : 0;
    const fit = job.fitFootprint;
    const held = job.heldFootprint;
    return {
      job,
      classId: classify(config, job),
      share,
      fitShare: fit === undefined || !hasAnyCap(caps) ? share : dominantShare(fit, caps),
      heldShare: held === undefined || !hasAnyCap(caps) ? share : dominantShare(held, caps),
    };
  };
  const running = input.running.map(entry);
  const waiting = input.waiting.map(entry);

  let usage = running.reduce((u, e) => addUsage(u, e.job.footprint, caps), NO_USAGE);
  const used = classIds.map(() => 0);
  /** Per class, Σ `heldShare` of its running and admitted jobs: what its ceiling counts. */
  const held = classIds.map(() => 0);
  for (const e of running) {
    const k = idx.get(e.classId) as number;
    used[k] = (used[k] as number) + e.share;
    held[k] = (held[k] as number) + e.heldShare;
  }
  // A class never holds more than its ceiling, so it never asks for more: the rest of its share flows to the others.
  const ceiling = config.classes.map((c) => Math.min(1, c.maxShare ?? 1));
  // A class with no ceiling of its own is held at 1 by the caps alone: a head over it is one the caps hold back.
  const capsAreCeiling = config.classes.map((c) => c.maxShare === undefined && input.onPaidRoom !== true);
  const fitsCeiling = (e: Entry<QueuedJob>): boolean =>
    e.fitShare <= (ceiling[idx.get(e.classId) as number] as number) + EPS;
  const demand = [...used];
  for (const e of waiting) {
    const k = idx.get(e.classId) as number;
    if (fitsCeiling(e)) demand[k] = (demand[k] as number) + e.share;
  }
  classIds.forEach((_, k) => (demand[k] = Math.min(demand[k] as number, ceiling[k] as number)));
  const fluid = waterFill(demand, weightShare, 1);

  // A job over the caps (or its class's ceiling) on its own can never be admitted; it must not block its class's queue
  // (head-of-line), so it stays out of the orderings and is listed last with reason never-fits.
  const neverFits = waiting.filter((e) => !fitsCeiling(e));
  const queues = config.classes.map((c) =>
    orderQueue(
      c.ordering,
      waiting.filter((e) => e.classId === c.id && fitsCeiling(e)).map((e) => ({ ...e.job, entry: e })),
      nowSeconds,
      config.ordering,
    ).map((j) => j.entry),
  );
  const heads = classIds.map(() => 0);
  const admitted: string[] = [];
  const fitsNow = (e: Entry<QueuedJob>): boolean =>
    e.share <= 1 + EPS &&
    (input.onPaidRoom === true || capViolations(addUsage(usage, e.job.footprint, caps), caps).length === 0);
  const take = (k: number): void => {
    const e = (queues[k] as Entry<QueuedJob>[])[heads[k] as number] as Entry<QueuedJob>;
    usage = addUsage(usage, e.job.footprint, caps);
    used[k] = (used[k] as number) + e.share;
    held[k] = (held[k] as number) + e.heldShare;
    heads[k] = (heads[k] as number) + 1;
    admitted.push(e.job.id);
  };
  const head = (k: number): Entry<QueuedJob> | undefined =>
    (queues[k] as Entry<QueuedJob>[])[heads[k] as number];

  // 2. share pass
  classIds.forEach((_, k) => {
    for (let e = head(k); e !== undefined; e = head(k)) {
      if ((used[k] as number) + e.share > (fluid[k] as number) + EPS || !fitsNow(e)) break;
      take(k);
    }
  });
  // 3. work-conserving pass
  // What the pass lets a class hold. A ceiling the class declares counts what its jobs hold: sized with the idle
  // room plan-cost counts in, a head within it would be kept from room (paid room above all, which that idle room
  // is) and the room handed to a class over its share, which the next rounds preempt. Without one, the whole
  // capacity bounds its jobs' sizes, save on paid room, which adds nothing to the fleet.
  const overHoldLimit = (k: number, e: Entry<QueuedJob>): boolean =>
    config.classes[k]?.maxShare !== undefined
      ? (held[k] as number) + e.heldShare > (ceiling[k] as number) + EPS
      : input.onPaidRoom !== true && (used[k] as number) + e.share > 1 + EPS;
  const lag = classIds.map((id) => input.lagSeconds?.get(id) ?? 0);
  const deficitOf = (k: number): number => (fluid[k] as number) - (used[k] as number);
  // Below its share first: a class's lag does not move while this pass gives it jobs, so ranked by lag alone one class
  // could take every leftover room of the round, and room taken over its share from a class short of its guarantee is
  // what the next rounds preempt.
  const ranksAhead = (k: number, best: number): boolean => {
    const below = deficitOf(k) > EPS;
    if (below !== deficitOf(best) > EPS) return below;
    const lagGap = (lag[k] as number) - (lag[best] as number);
    if (Math.abs(lagGap) > LAG_EPS_SECONDS) return lagGap > 0;
    return deficitOf(k) > deficitOf(best) + EPS;
  };
  const passedOver = new Set<number>();
  let reserved: ReadonlySet<string> | undefined; // the caps the reservation's head waits on
  for (;;) {
    let best = -1;
    classIds.forEach((_, k) => {
      const e = head(k);
      if (e === undefined || passedOver.has(k)) return;
      // Behind a reservation, only what leaves the reserved caps alone (a CPU job while a GPU quota is awaited).
      if (reserved !== undefined && capsUsed(e.job.footprint, caps).some((c) => reserved?.has(c))) return;
      const deficit = deficitOf(k);
      // Over its ceiling a head is never taken, but one only the caps hold back (it would fit them alone) still
      // reserves below its share: else the room a preemption freed for it goes to the preempted class again, whose
      // job the next round preempts again (plan-cost sizing moves with the fleet, so such a head can be over 1 at one
      // round and short of its guarantee at the next).
      const mayReserve =
        capsAreCeiling[k] === true && reserved === undefined && deficit > EPS && e.share <= 1 + EPS;
      if (overHoldLimit(k, e) && !mayReserve) return;
      if (best < 0 || ranksAhead(k, best)) best = k;
    });
    if (best < 0) break;
    const e = head(best) as Entry<QueuedJob>;
    if (fitsNow(e) && !overHoldLimit(best, e)) take(best);
    else {
      if (reserved === undefined && deficitOf(best) > EPS)
        reserved = new Set(capViolations(addUsage(usage, e.job.footprint, caps), caps));
      passedOver.add(best);
    }
  }

  // 4. preemption proposals
  const guaranteed = classIds.map((_, k) => Math.min(weightShare[k] as number, demand[k] as number));
  const shortRounds = new Map<string, number>();
  const preemptions: PreemptionCandidate[] = [];
  const victims = new Set<string>();
  classIds.forEach((id, k) => {
    const e = head(k);
    const short =
      e !== undefined &&
      e.share <= 1 + EPS &&
      (used[k] as number) + e.share <= (guaranteed[k] as number) + EPS &&
      (guaranteed[k] as number) - (used[k] as number) >= config.preemption.marginShare - EPS;
    const rounds = short ? (input.shortRounds?.get(id) ?? 0) + 1 : 0;
    shortRounds.set(id, rounds);
    if (!short || !config.preemption.enabled || rounds < config.preemption.minShortRounds) return;
    const plan = preemptionPlan(k, e, running, victims, usage, used, fluid, caps, idx);
    if (plan === undefined) return;
    for (const v of plan) {
      victims.add(v.job.id);
      const j = idx.get(v.classId) as number;
      preemptions.push({
        jobId: v.job.id,
        classId: v.classId,
        forClassId: id,
        reason:
          `class ${id} reclaims its guaranteed share ${fmt(guaranteed[k] as number)} (using ${fmt(used[k] as number)}, ` +
          `head job ${e.job.id} needs ${fmt(e.share)}); class ${v.classId} uses ${fmt(used[j] as number)} over its ` +
          `fair share ${fmt(fluid[j] as number)}`,
      });
    }
  });

  const queued: QueuedPosition[] = [];
  classIds.forEach((id, k) => {
    const waitingHere = (queues[k] as Entry<QueuedJob>[]).slice(heads[k]);
    waitingHere.forEach((e, position) => {
      // A job over the whole capacity as sized now (plan-cost counting idle room) waits for the caps, whatever its
      // class's share; so does one whose class holds less than its share (the work-conserving pass would have taken
      // it, or its head, had the caps let it): its class's share keeps back only a class already at it.
      const reason: WaitReason =
        e.share <= 1 + EPS &&
        (used[k] as number) >= (fluid[k] as number) - EPS &&
        (used[k] as number) + e.share > (fluid[k] as number) + EPS
          ? 'class-share'
          : 'caps';
      queued.push({ jobId: e.job.id, classId: id, position, reason });
    });
    neverFits
      .filter((e) => e.classId === id)
      .forEach((e, i) =>
        queued.push({ jobId: e.job.id, classId: id, position: waitingHere.length + i, reason: 'never-fits' }),
      );
  });
  return {
    admitted,
    queued,
    preemptions,
    classes: classIds.map((classId, k) => ({
      classId,
      weightShare: weightShare[k] as number,
      demandShare: demand[k] as number,
      guaranteedShare: guaranteed[k] as number,
      fluidShare: fluid[k] as number,
      usedShare: used[k] as number,
    })),
    shortRounds,
    usage,
  };
}

function fmt(x: number): string {
  return x.toFixed(3);
}

/** Victims for class k's head, or undefined when stopping over-share jobs cannot make it fit. */
function preemptionPlan(
  k: number,
  headEntry: Entry<QueuedJob>,
  running: readonly Entry<RunningQueuedJob>[],
  taken: ReadonlySet<string>,
  usageNow: CapUsage,
  usedNow: readonly number[],
  fluid: readonly number[],
  caps: QueueCaps,
  idx: ReadonlyMap<string, number>,
): Entry<RunningQueuedJob>[] | undefined {
  const used = [...usedNow];
  let usage = usageNow;
  const plan: Entry<RunningQueuedJob>[] = [];
  const pool = running.filter(
    (e) => e.job.preemptible !== false && !taken.has(e.job.id) && idx.get(e.classId) !== k,
  );
  while (capViolations(addUsage(usage, headEntry.job.footprint, caps), caps).length > 0) {
    let worst = -1;
    used.forEach((u, j) => {
      if (j === k || u <= (fluid[j] as number) + EPS) return;
      if (!pool.some((e) => idx.get(e.classId) === j && !plan.includes(e))) return;
      if (worst < 0 || u - (fluid[j] as number) > (used[worst] as number) - (fluid[worst] as number))
        worst = j;
    });
    if (worst < 0) return undefined;
    const candidates = pool.filter((e) => idx.get(e.classId) === worst && !plan.includes(e));
    const victim = candidates.reduce((a, b) =>
      b.job.admittedSeconds > a.job.admittedSeconds ||
      (b.job.admittedSeconds === a.job.admittedSeconds && b.job.id > a.job.id)
        ? b
        : a,
    );
    plan.push(victim);
    used[worst] = (used[worst] as number) - victim.share;
    usage = addUsage(usage, victim.job.footprint, caps, -1);
  }
  return plan;
}
