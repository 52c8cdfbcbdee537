import { z } from 'zod';
import { durationSecondsSchema, MAX_DURATION_RULE, MAX_DURATION_SECONDS } from '../core/duration.js';

/**
 * The success model of Yao, Paolieri & Golubchik, "Scheduling to Optimize Sojourn Time of Successful Jobs"
 * (digest shared/research/success-ranked-ordering.md §1–§4). A job's size is a discrete random variable over
 * cumulative checkpoint sizes x_1 < … < x_M; it terminates (unsuccessfully) at x_j with probability p_j for j < M
 * and succeeds at x_M with probability p_M. Sizes are in seconds of service at full throughput.
 */
export interface StageDistribution {
  /** Cumulative checkpoint sizes, strictly increasing. */
  readonly checkpointsSeconds: readonly number[];
  /** Probability of ending at each checkpoint; sums to 1. */
  readonly endProbabilities: readonly number[];
  /**
   * P(success): the last end probability for declared stages; the declared value for a bare
   * success-probability spec (whose single checkpoint then carries all the size mass, see `toDistribution`).
   */
  readonly successProbability: number;
}

/** What a job may declare: stages with continuation probabilities, or just a success probability and a size. */
export type SuccessSpec =
  | {
      readonly kind: 'stages';
      /** Duration of each stage (not cumulative). */
      readonly stageSeconds: readonly number[];
      /** P(continue after stage j | reached the end of stage j), one per stage except the last. */
      readonly continueProbabilities: readonly number[];
    }
  | { readonly kind: 'success'; readonly successProbability: number; readonly expectedSizeSeconds: number };

/** Stages a success model may declare. */
export const MAX_SUCCESS_STAGES = 64;

const prob = z.number().finite().min(0).max(1);
const seconds = () =>
  durationSecondsSchema(z.number().finite().positive().max(MAX_DURATION_SECONDS, MAX_DURATION_RULE));
export const successSpecSchema = z
  .discriminatedUnion('kind', [
    z.object({
      kind: z.literal('stages'),
      stageSeconds: z.array(seconds()).min(1).max(MAX_SUCCESS_STAGES, `at most ${MAX_SUCCESS_STAGES} stages`),
      continueProbabilities: z.array(prob).max(MAX_SUCCESS_STAGES, `at most ${MAX_SUCCESS_STAGES} stages`),
    }),
    z.object({
      kind: z.literal('success'),
      successProbability: z.number().finite().gt(0).max(1),
      expectedSizeSeconds: seconds(),
    }),
  ])
  .superRefine((s, ctx) => {
    if (s.kind === 'stages' && s.continueProbabilities.length !== s.stageSeconds.length - 1)
      ctx.addIssue({
        code: 'custom',
        path: ['continueProbabilities'],
        message: `needs one probability per stage but the last (${s.stageSeconds.length - 1}), got ${s.continueProbabilities.length}`,
      });
    if (s.kind === 'stages' && s.continueProbabilities.some((c) => c === 0))
      ctx.addIssue({
        code: 'custom',
        path: ['continueProbabilities'],
        message: 'a stage that never continues makes success impossible (rank = ∞); use a probability > 0',
      });
  });

/**
 * The run at full throughput a model describes: its stages' sum (a run that passes every stage), or its expected
 * size. Summed in stage order, as `toDistribution` sums its last checkpoint, so the two are equal to the bit.
 */
export function successModelSeconds(spec: SuccessSpec): number {
  return spec.kind === 'success'
    ? spec.expectedSizeSeconds
    : spec.stageSeconds.reduce((sum, d) => sum + d, 0);
}

/**
 * Stage durations d and continuation probabilities c → (x, p): x_j = Σ_{k≤j} d_k, p_j = (Π_{k<j} c_k)(1 − c_j),
 * p_M = Π c_k (digest §1 "From per-stage durations"). A bare success probability p and expected size s become one
 * stage of size s with success probability p, so the rank is s/p (Eq. 23: E[size]/P(success)); where the job
 * would fail is unknown, so no failure point is modelled.
 */
export function toDistribution(spec: SuccessSpec): StageDistribution {
  if (spec.kind === 'success') {
    return {
      checkpointsSeconds: [spec.expectedSizeSeconds],
      endProbabilities: [1],
      successProbability: spec.successProbability,
    };
  }
  const x: number[] = [];
  const p: number[] = [];
  let sum = 0;
  let reach = 1;
  spec.stageSeconds.forEach((d, j) => {
    sum += d;
    x.push(sum);
    if (j < spec.stageSeconds.length - 1) {
      const c = spec.continueProbabilities[j] as number;
      p.push(reach * (1 - c));
      reach *= c;
    } else p.push(reach);
  });
  return { checkpointsSeconds: x, endProbabilities: p, successProbability: reach };
}

/** (x, p) given directly, as the paper writes its examples. */
export function distribution(
  checkpointsSeconds: readonly number[],
  endProbabilities: readonly number[],
): StageDistribution {
  return {
    checkpointsSeconds,
    endProbabilities,
    successProbability: endProbabilities[endProbabilities.length - 1] as number,
  };
}

/** Stages passed by a job with a declared success model, from its attained service (seconds at full throughput). */
export function stagesDone(dist: StageDistribution, attainedSeconds: number): number {
  let n = 0;
  // The last checkpoint is the end of the job: passing it means done, not "one more stage passed".
  while (
    n < dist.checkpointsSeconds.length - 1 &&
    (dist.checkpointsSeconds[n] as number) <= attainedSeconds + 1e-9
  )
    n += 1;
  return n;
}

/** Attained service after `stagesDone` checkpoints passed. */
export function attainedSeconds(dist: StageDistribution, stagesDone: number): number {
  return stagesDone <= 0 ? 0 : (dist.checkpointsSeconds[stagesDone - 1] as number);
}

/**
 * RANK (Eq. 23, used online on the remaining distribution, digest §4): E[remaining size | survived] /
 * P(success | survived) = Σ_{j>m} p_j (x_j − a) / p_M; the conditioning factor cancels. Lower runs first.
 * Re-evaluated at every checkpoint, so a job that survives a risky stage gets a better rank.
 */
export function successRank(dist: StageDistribution, stagesDone = 0): number {
  const a = attainedSeconds(dist, stagesDone);
  const pM = dist.successProbability;
  let s = 0;
  for (let j = stagesDone; j < dist.checkpointsSeconds.length; j++)
    s += (dist.endProbabilities[j] as number) * ((dist.checkpointsSeconds[j] as number) - a);
  return s / pM;
}

/** SERPT key: expected remaining size given survival so far (digest §2). */
export function expectedRemainingSeconds(dist: StageDistribution, stagesDone = 0): number {
  const a = attainedSeconds(dist, stagesDone);
  let s = 0;
  let mass = 0;
  for (let j = stagesDone; j < dist.checkpointsSeconds.length; j++) {
    const pj = dist.endProbabilities[j] as number;
    s += pj * ((dist.checkpointsSeconds[j] as number) - a);
    mass += pj;
  }
  return mass > 0 ? s / mass : 0;
}

/**
 * Sevcik's SR rank / Gittins index (Eq. 2) on the remaining distribution: min over j of expected service until
 * min(size, x_j) over P(done by x_j). A baseline only: it optimises all jobs' sojourn, not successful ones'.
 */
export function sevcikRank(dist: StageDistribution, stagesDone = 0): number {
  const a = attainedSeconds(dist, stagesDone);
  let best = Number.POSITIVE_INFINITY;
  let mass = 0;
  let spent = 0;
  let total = 0;
  for (let j = stagesDone; j < dist.checkpointsSeconds.length; j++)
    total += dist.endProbabilities[j] as number;
  for (let j = stagesDone; j < dist.checkpointsSeconds.length; j++) {
    const pj = (dist.endProbabilities[j] as number) / total;
    const xj = (dist.checkpointsSeconds[j] as number) - a;
    mass += pj;
    spent += pj * xj;
    best = Math.min(best, (spent + xj * (1 - mass)) / mass);
  }
  return best;
}
