import { z } from 'zod';
import { Rng } from '../../core/random.js';
import { parseWith } from '../../core/validation.js';
import type { SuccessSpec } from '../../queue/success.js';
import {
  buildJob,
  drawTaskCount,
  gavelDurationSeconds,
  generationStreams,
  poissonArrivalSeconds,
  resolveGenerationOptions,
  type GenerationOptions,
} from './generation.js';
import type { Trace, TraceJob } from '../../world/trace.js';
import { singleTaskWorkloads, type WorkloadCatalog } from './workloads.js';

/**
 * The workload of Yao, Paolieri & Golubchik, "Scheduling to Optimize Sojourn Time of Successful Jobs"
 * (shared/papers/success-sojourn.txt; digest shared/research/success-ranked-ordering.md), on Eva-style jobs.
 *
 * Paper §VI-A ("Data Set and Methodology", the Philly trace of Jeon et al.) builds its online workload this way:
 * each attempt of a job is a stage, failed/killed jobs get extra stages whose lengths come from the trace's
 * stage-length distribution, every stage gets a success probability "from a uniform distribution", and ≈ 75% of
 * the jobs pass (82,445 of 109,967). What we follow, and where we have to choose:
 *
 * - **Stage count.** Table XV gives the attempts A per Philly job (86.6% have 1). The paper pads failed/killed
 *   jobs with extra stages after they are known to fail; a generator must fix the declared stages before it
 *   draws the outcome (else the count would give the outcome away), so every job gets its Table XV attempts plus
 *   one stage: M = A + 1. 86.6% of the jobs then have two stages, the base case of the paper's §IV-A2.
 * - **Stage lengths.** i.i.d. per stage (§IV-A2, §VI-A). Philly's attempt lengths are not published in the paper,
 *   so each stage draws from Eva's synthetic duration law (`gavelDurationSeconds(rng, 1)`: 10^U(1.5, 3) minutes,
 *   31.6 min–16.7 h, mean ≈ 4.7 h), as `synthetic.ts` draws a whole job. No further scaling: sizes are seconds at
 *   full throughput, like every trace here.
 * - **Continuation probabilities.** c_j ~ U(lo, 1) i.i.d. per checkpoint (§VI-A "each stage's success
 *   probability from a uniform distribution"; which uniform is not said, digest §10). lo is solved so that the
 *   mean P(success) = E[Π c_j] is Philly's pass rate 0.75 (lo ≈ 0.59 with Table XV); `meanSuccessProbability`
 *   changes it (the paper's synthetic sets I and II use 0.5 and 0.25; with U(lo, 1) the mean cannot go below
 *   ≈ 0.45, reached at lo = 0).
 * - **Outcome.** Unlike §VI-A, whose outcomes come from the trace and are independent of the drawn
 *   probabilities, the outcome here is drawn from the declared model itself (the paper's §II model: the size
 *   distribution is known): at each checkpoint the job continues with probability c_j. A job that stops after
 *   stage j runs x_j = d_1 + … + d_j seconds (`successful: false`); one that passes all M stages runs x_M.
 *   The job's iterations are those it actually runs.
 * - **Arrivals.** Poisson (as Eva's generators), mean inter-arrival `DEFAULT_SUCCESS_MEAN_INTERARRIVAL_SECONDS`.
 *
 * Demands, delays and workloads are drawn exactly as `synthetic.ts` draws them: a uniformly drawn single-task
 * workload of the catalog with its own per-family demand, one task (or 2/4 with `multiTaskShare`).
 */

/** Default job count of `--format success` (the target experiment runs 400). */
export const DEFAULT_SUCCESS_JOBS = 400;

/** Philly's pass rate (paper §VI-A: 82,445 of 109,967 jobs passed). */
export const PHILLY_PASS_RATE = 0.75;

/** Attempts per job in the Philly trace (paper Table XV), for A = 1 … 7. */
export const PHILLY_ATTEMPT_COUNTS = [95188, 5465, 1674, 954, 6574, 67, 1] as const;

/** Job slots the default arrival rate is sized for: `--cap-instances 8` admits 8 jobs (one instance per task). */
export const DESIGN_SLOTS = 8;

/**
 * Mean of Eva's short-range duration law 10^U(1.5, 3) minutes, in seconds: (10^3 − 10^1.5) / (1.5 ln 10) min,
 * less 0.5 s for the truncation to whole seconds.
 */
export const MEAN_STAGE_SECONDS = ((10 ** 3 - 10 ** 1.5) / (1.5 * Math.log(10))) * 60 - 0.5;

/** P(A = a) for a = 1 … 7 (Table XV counts, normalised; the table sums to 109,923). */
const ATTEMPT_TOTAL = PHILLY_ATTEMPT_COUNTS.reduce((s, c) => s + c, 0);

/**
 * Expected seconds a job actually runs when c_j ~ U(lo, 1): E[d] · Σ_a P(A = a) Σ_{k=0}^{a} m^k with m = E[c] =
 * (1 + lo)/2 (stage k + 1 runs iff the first k checkpoints were passed). ≈ 9.2 h at the default lo.
 */
export function expectedRunSeconds(lo: number): number {
  const m = (1 + lo) / 2;
  return (
    PHILLY_ATTEMPT_COUNTS.reduce((s, count, i) => {
      let stages = 0;
      for (let k = 0; k <= i + 1; k++) stages += m ** k;
      return s + (count / ATTEMPT_TOTAL) * stages;
    }, 0) * MEAN_STAGE_SECONDS
  );
}

const successOptionsSchema = z.object({
  /** Mean P(success) over jobs; sets the lower end of the continuation probabilities' uniform law. */
  meanSuccessProbability: z.number().finite().gt(0).lt(1).default(PHILLY_PASS_RATE),
  traceName: z.string().min(1).optional(),
});

export type SuccessTraceOptions = GenerationOptions & {
  readonly workloadCatalog: WorkloadCatalog;
  readonly meanSuccessProbability?: number | undefined;
  readonly traceName?: string | undefined;
};

/** E[Π c_j] for c_j ~ U(lo, 1) i.i.d. and M − 1 = A checkpoints: Σ_a P(A = a) · ((1 + lo) / 2)^a. */
export function meanSuccessProbabilityFor(lo: number): number {
  const m = (1 + lo) / 2;
  return PHILLY_ATTEMPT_COUNTS.reduce((s, count, i) => s + (count / ATTEMPT_TOTAL) * m ** (i + 1), 0);
}

/**
 * The lower end lo ∈ [0, 1) of U(lo, 1) with mean P(success) = `target` (bisection; the mean is increasing in
 * lo). Throws naming the reachable range when the target is below the lo = 0 mean.
 */
export function continueProbabilityLowerBound(target: number): number {
  const floor = meanSuccessProbabilityFor(0);
  if (target < floor)
    throw new Error(
      `success trace options: meanSuccessProbability ${target} is below ${floor.toFixed(3)}, the least that ` +
        'continuation probabilities drawn from U(lo, 1) reach (lo = 0)',
    );
  let lo = 0;
  let hi = 1;
  for (let i = 0; i < 60; i++) {
    const mid = (lo + hi) / 2;
    if (meanSuccessProbabilityFor(mid) < target) lo = mid;
    else hi = mid;
  }
  return (lo + hi) / 2;
}

/**
 * Mean inter-arrival of the success workload: the rate at which 8 busy job slots finish jobs, E[run] / 8 ≈ 4,140 s
 * (0.87 jobs/hour), i.e. an offered load of 1 on the 8 slots `--cap-instances 8` allows. Ordering only matters
 * when a queue forms, and the paper evaluates loaded fleets (§VI-B: even with 300 servers FIFO's mean delay is
 * ≈ 30 days). In the simulator the slots deliver a bit less than 8 jobs' worth of work (launch and build delays,
 * 300 s rounds, interference), so a queue builds up over the trace. The rate is the same for every ordering and
 * every `meanSuccessProbability` (the paper's synthetic sets keep the trace's inter-arrivals);
 * `arrivalRateScale` scales it.
 */
export const DEFAULT_SUCCESS_MEAN_INTERARRIVAL_SECONDS = Math.round(
  expectedRunSeconds(continueProbabilityLowerBound(PHILLY_PASS_RATE)) / DESIGN_SLOTS,
);

/** A from Table XV by inverse CDF on one uniform draw. */
function drawAttempts(rng: Rng): number {
  let u = rng.next() * ATTEMPT_TOTAL;
  for (let i = 0; i < PHILLY_ATTEMPT_COUNTS.length; i++) {
    u -= PHILLY_ATTEMPT_COUNTS[i] as number;
    if (u < 0) return i + 1;
  }
  return PHILLY_ATTEMPT_COUNTS.length;
}

/** A job's declared stages and the stage it actually stops at (1-based; = stages for a success). */
interface DrawnStages {
  readonly spec: Extract<SuccessSpec, { kind: 'stages' }>;
  readonly stagesRun: number;
}

/**
 * Declared model and outcome of one job. Each stream is consumed by a fixed count per stage or per checkpoint,
 * so the outcome stream's u_j is the same whatever the probabilities: raising `meanSuccessProbability` only
 * turns failures into successes (common random numbers), and the first N jobs do not depend on the job count.
 */
function drawStages(
  streams: { readonly stages: Rng; readonly probability: Rng; readonly outcome: Rng; readonly duration: Rng },
  lo: number,
): DrawnStages {
  const stages = drawAttempts(streams.stages) + 1;
  const stageSeconds = Array.from({ length: stages }, () => gavelDurationSeconds(streams.duration, 1));
  const continueProbabilities = Array.from({ length: stages - 1 }, () =>
    // U(lo, 1) is [lo, 1): never 0, so the spec is valid (a probability of 0 makes the rank infinite).
    Math.max(Number.MIN_VALUE, streams.probability.uniform(lo, 1)),
  );
  const draws = continueProbabilities.map(() => streams.outcome.next());
  let stagesRun = stages;
  for (let j = 0; j < continueProbabilities.length; j++)
    if ((draws[j] as number) >= (continueProbabilities[j] as number)) {
      stagesRun = j + 1;
      break;
    }
  return { spec: { kind: 'stages', stageSeconds, continueProbabilities }, stagesRun };
}

/** A seeded trace of the success paper's workload on Eva-style jobs (see the module comment). */
export function generateSuccessTrace(options: SuccessTraceOptions): Trace {
  const gen = resolveGenerationOptions({
    seed: options.seed,
    jobs: options.jobs,
    arrivalRateScale: options.arrivalRateScale,
    multiTaskShare: options.multiTaskShare,
  });
  const own = parseWith(
    successOptionsSchema,
    { meanSuccessProbability: options.meanSuccessProbability, traceName: options.traceName },
    'success trace options',
  );
  const lo = continueProbabilityLowerBound(own.meanSuccessProbability);
  const pool = singleTaskWorkloads(options.workloadCatalog);
  if (pool.length === 0) throw new Error('the workload catalog has no single-task workload to draw from');

  const count = gen.jobs ?? DEFAULT_SUCCESS_JOBS;
  const root = new Rng(gen.seed);
  const base = generationStreams(root);
  const streams = { ...base, stages: root.fork(), probability: root.fork(), outcome: root.fork() };
  const arrivals = poissonArrivalSeconds(
    streams.arrival,
    count,
    DEFAULT_SUCCESS_MEAN_INTERARRIVAL_SECONDS / gen.arrivalRateScale,
  );
  const jobs: TraceJob[] = [];
  for (let i = 0; i < count; i++) {
    const workload = streams.workload.pick(pool);
    const taskCount = drawTaskCount(streams.taskCount, gen.multiTaskShare);
    const { spec, stagesRun } = drawStages(streams, lo);
    const ranSeconds = spec.stageSeconds.slice(0, stagesRun).reduce((s, d) => s + d, 0);
    jobs.push({
      ...buildJob({
        id: String(i),
        name: workload.name,
        workload,
        arrivalSeconds: arrivals[i] ?? 0,
        durationSeconds: ranSeconds,
        demand: workload.demand,
        taskCount,
      }),
      success: spec,
      successful: stagesRun === spec.stageSeconds.length,
    });
  }
  return { name: own.traceName ?? `success (seed ${gen.seed}, ${count} jobs)`, jobs };
}
