import { expectedRemainingSeconds, sevcikRank, successRank, type StageDistribution } from './success.js';
import { waterFill } from './class-shares.js';
import { intraClassAllocation } from './intra-class.js';

/**
 * Tiny deterministic event models, just enough to reproduce the papers' worked examples (time in abstract units).
 * 1. A fluid single-pool model (PCS §2–§4, digest §10 P2/P3): C units of capacity shared by elastic jobs, with
 *    FIFO, SRSF (Tiresias as PCS emulates it), Themis and WFQ, and a JCT prediction made at every arrival by
 *    running the state forward with no future arrivals.
 * 2. A stage-level k-server model (Yao/Paolieri/Golubchik §V, digest §4): jobs switch only at checkpoints; the
 *    expected mean sojourn of successful jobs is computed exactly by enumerating every outcome.
 * Not the simulator: no instances, delays or caps.
 */

// ------------------------------------------------------------------------------------------------------------
// 1. Fluid model

export interface FluidJob {
  readonly id: string;
  readonly arrival: number;
  /** Service at 1 unit (PCS "size", demand_min). */
  readonly size: number;
  readonly maxUnits?: number | undefined;
}

export type FluidPolicy =
  | { readonly kind: 'fifo' }
  | { readonly kind: 'srsf' }
  /** Themis as PCS runs it: re-divide every `lease` after any event, highest finish-time fairness ρ first. */
  | { readonly kind: 'themis'; readonly lease: number }
  | {
      readonly kind: 'wfq';
      /** Class upper size bounds, last = Infinity. */
      readonly thresholds: readonly number[];
      readonly weights: readonly number[];
      readonly zetaMin?: number | undefined;
      readonly zetaStep?: number | undefined;
    };

interface FluidState {
  readonly id: string;
  readonly arrival: number;
  readonly size: number;
  readonly maxUnits: number;
  readonly classIndex: number;
  remaining: number;
  /** Σ active-job counts and number of events the job observed (Themis N̄, PCS unfairness). */
  seenSum: number;
  seenCount: number;
}

export interface FluidJobResult {
  readonly id: string;
  readonly arrival: number;
  readonly end: number;
  /** End predicted when the job arrived. */
  readonly predictedEnd: number;
  /** PCS Pred_err: 100·|JCT − predicted JCT| / predicted JCT (digest §2). */
  readonly predErrPercent: number;
}

export interface FluidRun {
  readonly jobs: readonly FluidJobResult[];
  readonly meanJct: number;
  readonly meanPredErrPercent: number;
}

const EPS = 1e-9;

function allocate(
  policy: FluidPolicy,
  active: readonly FluidState[],
  now: number,
  capacity: number,
): Map<string, number> {
  const out = new Map<string, number>();
  const greedy = (ordered: readonly FluidState[]): void => {
    let left = capacity;
    for (const j of ordered) {
      const give = Math.min(left, j.maxUnits);
      out.set(j.id, give);
      left -= give;
    }
  };
  switch (policy.kind) {
    case 'fifo':
      greedy(active);
      return out;
    case 'srsf':
      greedy([...active].sort((a, b) => a.remaining - b.remaining));
      return out;
    case 'themis': {
      // PCS's Themis emulation: repeatedly give the job with the highest ρ = T_shared/T_ideal its max allocation,
      // T_ideal = size / min(C/N̄, demand), T_shared = elapsed + remaining/allocation. Stable on ties.
      let left = Math.min(
        capacity,
        active.reduce((s, j) => s + j.maxUnits, 0),
      );
      let pool = [...active];
      while (left > EPS && pool.length > 0) {
        const rho = (j: FluidState): number => {
          const alloc = Math.min(left, j.maxUnits);
          const nBar = j.seenSum / j.seenCount;
          return (now - j.arrival + j.remaining / alloc) / (j.size / Math.min(capacity / nBar, j.maxUnits));
        };
        const top = pool.reduce((best, j) => (rho(j) > rho(best) + EPS ? j : best));
        const give = Math.min(left, top.maxUnits);
        out.set(top.id, give);
        left -= give;
        pool = pool.filter((j) => j !== top);
      }
      return out;
    }
    case 'wfq': {
      const k = policy.weights.length;
      const demand = Array.from({ length: k }, (_, c) =>
        active.filter((j) => j.classIndex === c).reduce((s, j) => s + j.maxUnits, 0),
      );
      const shares = waterFill(demand, policy.weights, capacity);
      for (let c = 0; c < k; c++) {
        const inClass = active
          .filter((j) => j.classIndex === c)
          .map((j) => ({ id: j.id, maxUnits: j.maxUnits }));
        const alloc = intraClassAllocation(
          inClass,
          shares[c] as number,
          policy.zetaMin ?? 0,
          policy.zetaStep ?? 0.1,
        );
        for (const [id, u] of alloc) out.set(id, u);
      }
      return out;
    }
  }
}

interface FluidSim {
  now: number;
  active: FluidState[];
  alloc: Map<string, number>;
  /** Next Themis re-division. */
  redivideAt: number;
  readonly ends: Map<string, number>;
}

/** Advance until every active job ends, taking arrivals from `pending` (sorted); calls `onArrival` after each. */
function runFluidSim(
  sim: FluidSim,
  pending: FluidState[],
  policy: FluidPolicy,
  capacity: number,
  onArrival: (job: FluidState, sim: FluidSim) => void,
): void {
  const lease = policy.kind === 'themis' ? policy.lease : Number.POSITIVE_INFINITY;
  while (sim.active.length > 0 || pending.length > 0) {
    let nextEnd = Number.POSITIVE_INFINITY;
    for (const j of sim.active) {
      const u = sim.alloc.get(j.id) ?? 0;
      if (u > EPS) nextEnd = Math.min(nextEnd, sim.now + j.remaining / u);
    }
    const nextArrival = pending[0]?.arrival ?? Number.POSITIVE_INFINITY;
    // Completions before arrivals before re-divisions at equal times (PCS code: Event ordering).
    const t = Math.min(nextEnd, nextArrival, sim.redivideAt);
    if (!Number.isFinite(t)) throw new Error('fluid model stalled: active jobs without allocation');
    for (const j of sim.active) j.remaining -= (sim.alloc.get(j.id) ?? 0) * (t - sim.now);
    sim.now = t;
    for (const j of sim.active) {
      j.seenSum += sim.active.length;
      j.seenCount += 1;
    }
    let arrived: FluidState | undefined;
    if (nextEnd <= t + EPS) {
      for (const j of sim.active) if (j.remaining <= EPS) sim.ends.set(j.id, t);
      sim.active = sim.active.filter((j) => j.remaining > EPS);
    } else if (nextArrival <= t) {
      arrived = pending.shift() as FluidState;
      sim.active.push(arrived);
      arrived.seenSum = sim.active.length;
      arrived.seenCount = 1;
    }
    sim.redivideAt = sim.active.length > 0 ? t + lease : Number.POSITIVE_INFINITY;
    sim.alloc = allocate(policy, sim.active, t, capacity);
    if (arrived !== undefined) onArrival(arrived, sim);
  }
}

function cloneSim(sim: FluidSim): FluidSim {
  return {
    now: sim.now,
    active: sim.active.map((j) => ({ ...j })),
    alloc: new Map(sim.alloc),
    redivideAt: sim.redivideAt,
    ends: new Map(),
  };
}

/**
 * Run the fluid model. Arrivals at the same time are taken in the given order, one event each (the PCS toy's
 * "J2 processed after J1"). Each job's prediction is made right after its arrival by simulating the copied state
 * with no future arrivals (PCS §4).
 */
export function runFluid(jobs: readonly FluidJob[], capacity: number, policy: FluidPolicy): FluidRun {
  const classOf = (size: number): number =>
    policy.kind === 'wfq'
      ? Math.max(
          0,
          policy.thresholds.findIndex((t) => size <= t),
        )
      : 0;
  const pending: FluidState[] = jobs
    .map((j) => ({
      id: j.id,
      arrival: j.arrival,
      size: j.size,
      maxUnits: j.maxUnits ?? 1,
      classIndex: classOf(j.size),
      remaining: j.size,
      seenSum: 0,
      seenCount: 0,
    }))
    .sort((a, b) => a.arrival - b.arrival);
  const sim: FluidSim = {
    now: 0,
    active: [],
    alloc: new Map(),
    redivideAt: Number.POSITIVE_INFINITY,
    ends: new Map(),
  };
  const predicted = new Map<string, number>();
  runFluidSim(sim, pending, policy, capacity, (job, s) => {
    const copy = cloneSim(s);
    runFluidSim(copy, [], policy, capacity, () => undefined);
    predicted.set(job.id, copy.ends.get(job.id) as number);
  });
  const results = jobs.map((j) => {
    const end = sim.ends.get(j.id) as number;
    const predictedEnd = predicted.get(j.id) as number;
    const predJct = predictedEnd - j.arrival;
    return {
      id: j.id,
      arrival: j.arrival,
      end,
      predictedEnd,
      predErrPercent: predJct > 0 ? (100 * Math.abs(end - j.arrival - predJct)) / predJct : 0,
    };
  });
  const mean = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;
  return {
    jobs: results,
    meanJct: mean(results.map((r) => r.end - r.arrival)),
    meanPredErrPercent: mean(results.map((r) => r.predErrPercent)),
  };
}

// ------------------------------------------------------------------------------------------------------------
// 2. Stage-level k-server model (success paper)

export interface StageJob {
  readonly id: string;
  readonly arrival: number;
  readonly dist: StageDistribution;
}

/** Priority of a job that has passed `stagesDone` checkpoints; lower runs first; ties by arrival then id. */
export type StageKey = (job: StageJob, stagesDone: number) => number;

export const RANK_KEY: StageKey = (j, m) => successRank(j.dist, m);
export const SERPT_KEY: StageKey = (j, m) => expectedRemainingSeconds(j.dist, m);
export const SR_KEY: StageKey = (j, m) => sevcikRank(j.dist, m);
export const FIFO_KEY: StageKey = (j) => j.arrival;

/** A fixed non-preemptive order (for OPTIMAL and hand-checked orders). */
export function fixedOrderKey(order: readonly string[]): StageKey {
  return (j) => order.indexOf(j.id);
}

export interface StageOutcomeResult {
  readonly end: number;
  readonly success: boolean;
}

/**
 * One realisation: `endIndex` gives each job's checkpoint where it ends (last = success). The scheduler does not
 * see it: at every checkpoint it re-ranks the contending jobs (digest §4: stage completions, then arrivals, then
 * free servers take the min-key jobs).
 */
export function runStages(
  jobs: readonly StageJob[],
  servers: number,
  key: StageKey,
  endIndex: ReadonlyMap<string, number>,
): Map<string, StageOutcomeResult> {
  const done = new Map<string, number>(jobs.map((j) => [j.id, 0]));
  const results = new Map<string, StageOutcomeResult>();
  const pending = [...jobs].sort((a, b) => a.arrival - b.arrival);
  const waiting: StageJob[] = [];
  const busy: { job: StageJob; until: number }[] = [];
  let now = 0;
  while (pending.length > 0 || waiting.length > 0 || busy.length > 0) {
    const nextStage = busy.reduce((m, b) => Math.min(m, b.until), Number.POSITIVE_INFINITY);
    const nextArrival = pending[0]?.arrival ?? Number.POSITIVE_INFINITY;
    now = Math.min(nextStage, nextArrival);
    for (const b of busy.filter((x) => x.until <= now + EPS)) {
      busy.splice(busy.indexOf(b), 1);
      const m = (done.get(b.job.id) as number) + 1;
      done.set(b.job.id, m);
      const last = endIndex.get(b.job.id) as number;
      if (m - 1 === last)
        results.set(b.job.id, { end: now, success: last === b.job.dist.checkpointsSeconds.length - 1 });
      else waiting.push(b.job);
    }
    while (pending.length > 0 && (pending[0] as StageJob).arrival <= now + EPS)
      waiting.push(pending.shift() as StageJob);
    waiting.sort(
      (a, b) =>
        key(a, done.get(a.id) as number) - key(b, done.get(b.id) as number) ||
        a.arrival - b.arrival ||
        (a.id < b.id ? -1 : 1),
    );
    while (busy.length < servers && waiting.length > 0) {
      const job = waiting.shift() as StageJob;
      const m = done.get(job.id) as number;
      const x = job.dist.checkpointsSeconds;
      busy.push({ job, until: now + (x[m] as number) - (m > 0 ? (x[m - 1] as number) : 0) });
    }
  }
  return results;
}

/** Mean sojourn of the successful jobs in one realisation; 0 when none succeeds (digest §1 convention). */
export function successfulMeanSojourn(
  jobs: readonly StageJob[],
  results: ReadonlyMap<string, StageOutcomeResult>,
): number {
  const ok = jobs.filter((j) => results.get(j.id)?.success === true);
  return ok.length === 0
    ? 0
    : ok.reduce((s, j) => s + (results.get(j.id) as StageOutcomeResult).end - j.arrival, 0) / ok.length;
}

/** E[mean sojourn of successful jobs], exactly, by enumerating every combination of end checkpoints. */
export function expectedSuccessfulSojourn(jobs: readonly StageJob[], servers: number, key: StageKey): number {
  let total = 0;
  const walk = (i: number, prob: number, ends: Map<string, number>): void => {
    if (prob === 0) return;
    if (i === jobs.length) {
      total += prob * successfulMeanSojourn(jobs, runStages(jobs, servers, key, ends));
      return;
    }
    const job = jobs[i] as StageJob;
    job.dist.endProbabilities.forEach((p, e) => walk(i + 1, prob * p, new Map(ends).set(job.id, e)));
  };
  walk(0, 1, new Map());
  return total;
}

/** All permutations of ids (for OPTIMAL over N! orders; keep N ≤ 8). */
export function permutations<T>(items: readonly T[]): T[][] {
  if (items.length <= 1) return [[...items]];
  return items.flatMap((x, i) =>
    permutations([...items.slice(0, i), ...items.slice(i + 1)]).map((p) => [x, ...p]),
  );
}
