import { z } from 'zod';
import type { FamilyDemand } from '../../core/resources.js';
import type { Rng } from '../../core/random.js';
import { parseWith } from '../../core/validation.js';
import type { TraceJob, TraceTask } from '../../world/trace.js';
import type { Workload } from './workloads.js';

/** Eva's job arrival rate: 3 jobs per hour, i.e. a mean inter-arrival of 1200 s (research digest §5.2). */
export const DEFAULT_MEAN_INTERARRIVAL_SECONDS = 1200;

/** Share of Gavel-style durations drawn from the short range (research digest §5.2). */
export const SHORT_JOB_PROBABILITY = 0.8;

/** Task counts of multi-task jobs (Eva §6.7 uses 2- and 4-task data-parallel jobs). */
export const MULTI_TASK_COUNTS = [2, 4] as const;

/** Options shared by the generated traces (Alibaba conversion and synthetic). */
export const generationOptionsSchema = z.object({
  seed: z.number().int().default(0),
  /** Keep only the first N jobs. */
  jobs: z.number().int().positive().optional(),
  /** Multiplies the arrival rate: 2 halves the mean inter-arrival time. */
  arrivalRateScale: z.number().finite().positive().default(1),
  /** Share of jobs turned into 2- or 4-task jobs (each task with the job's demand). */
  multiTaskShare: z.number().min(0).max(1).default(0),
});
export type GenerationOptions = z.input<typeof generationOptionsSchema>;
export type ResolvedGenerationOptions = z.output<typeof generationOptionsSchema>;

export function resolveGenerationOptions(options: GenerationOptions): ResolvedGenerationOptions {
  return parseWith(generationOptionsSchema, options, 'trace options');
}

/**
 * Independent random streams per quantity, so that changing one option (say the multi-task share) leaves
 * the other draws alone, and the first N jobs of a trace are the same whatever the job count.
 */
export interface GenerationStreams {
  readonly order: Rng;
  readonly workload: Rng;
  readonly arrival: Rng;
  readonly duration: Rng;
  readonly taskCount: Rng;
}

export function generationStreams(root: Rng): GenerationStreams {
  return {
    order: root.fork(),
    workload: root.fork(),
    arrival: root.fork(),
    duration: root.fork(),
    taskCount: root.fork(),
  };
}

/** Poisson arrivals: cumulative exponential gaps, truncated to whole seconds like Eva's `int(cumsum(...))`. */
export function poissonArrivalSeconds(rng: Rng, count: number, meanInterarrivalSeconds: number): number[] {
  const out: number[] = [];
  let t = 0;
  for (let i = 0; i < count; i++) {
    t += rng.exponential(meanInterarrivalSeconds);
    out.push(Math.floor(t));
  }
  return out;
}

/**
 * Gavel-style duration in whole seconds (research digest §5.2): `10^U(1.5, 3)` minutes (31.6 min–16.7 h)
 * with probability `shortProbability`, else `10^U(3, 4)` minutes (16.7 h–6.9 days).
 */
export function gavelDurationSeconds(rng: Rng, shortProbability = SHORT_JOB_PROBABILITY): number {
  const short = rng.next() <= shortProbability;
  const exponent = short ? rng.uniform(1.5, 3) : rng.uniform(3, 4);
  return Math.floor(10 ** exponent * 60);
}

/**
 * Task count of one job: multi-task with probability `share`. Always two draws, so a job that is multi-task
 * at some share stays multi-task (with the same count) at any larger share.
 */
export function drawTaskCount(rng: Rng, share: number): number {
  const u = rng.next();
  const multi = rng.pick(MULTI_TASK_COUNTS);
  return u < share ? multi : 1;
}

export interface JobSpec {
  readonly id: string;
  readonly name: string;
  readonly workload: Workload;
  readonly arrivalSeconds: number;
  readonly durationSeconds: number;
  readonly demand: FamilyDemand;
  readonly taskCount: number;
}

/**
 * A trace job of `workload` with the given demand per task. Replicated tasks are named `node0`, `node1`, … as
 * in Eva's multi-node workloads (two_node_resnet18), so every task of a job has its own name; `total_iters =
 * int(duration × full_throughput)` as in Eva's generators (at least 1, so that a custom catalog with a very
 * slow workload cannot yield a job without work).
 */
export function buildJob(spec: JobSpec): TraceJob {
  const w = spec.workload;
  const taskTemplate = w.tasks[0];
  const task: TraceTask = {
    name: taskTemplate?.name ?? 'node0',
    demand: spec.demand,
    shmSizeGiB: taskTemplate?.shmSizeGiB ?? 0,
    imageId: w.imageId,
    fetchDelaySeconds: w.fetchDelaySeconds,
    buildImageDelaySeconds: w.buildImageDelaySeconds,
    killDelaySeconds: w.killDelaySeconds,
    uploadDelaySeconds: w.uploadDelaySeconds,
  };
  return {
    id: spec.id,
    name: spec.name,
    workload: w.name,
    arrivalSeconds: spec.arrivalSeconds,
    durationSeconds: spec.durationSeconds,
    initDelaySeconds: w.initDelaySeconds,
    fullThroughput: w.fullThroughput,
    totalIterations: Math.max(1, Math.floor(spec.durationSeconds * w.fullThroughput)),
    tasks: Array.from({ length: spec.taskCount }, (_, i) => (i === 0 ? task : { ...task, name: `node${i}` })),
  };
}

/** Fisher–Yates shuffle into a new array. */
export function shuffled<T>(rng: Rng, items: readonly T[]): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = rng.int(i + 1);
    const tmp = out[i] as T;
    out[i] = out[j] as T;
    out[j] = tmp;
  }
  return out;
}
