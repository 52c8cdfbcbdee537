import { z } from 'zod';
import type { FamilyDemand, Resources } from '../../core/resources.js';
import { describeIssues, ValidationError } from '../../core/validation.js';
import type { Trace, TraceJob, TraceTask } from '../../world/trace.js';
import { baseWorkloadOf, familyDemandSchema } from './workloads.js';
import { MAX_DURATION_SECONDS } from '../../core/duration.js';
import { traceArrivalSeconds, traceDelaySeconds, traceDurationSeconds, traceShmGiB } from './trace-bounds.js';
import { duplicateJsonKeys, type DuplicateKey } from './json-duplicate-keys.js';
import { entriesInOrder, jsonKeyOrder, keyOrderPath } from './json-key-order.js';
import { fleetwiseLookalikeProblem, isFleetwiseTraceJson } from './fleetwise-json.js';
import { withoutBom } from './text.js';

/**
 * Eva's JSON trace format (research digest §5.2, e.g. pai_200.json):
 * `{ "<job id>": { name, arrival_time, duration, init_delay, full_throughput, total_iters,
 *   support_throughput_aware, tasks: { "<task id>": { name, demand: {family|any: [g, c, m]}, shm_size,
 *   image_id, fetch_delay, build_image_delay, kill_delay, upload_delay } } } }`.
 */

/**
 * How `duration` must agree with total_iters / full_throughput (`running`). Eva's generators write whole seconds and
 * round the iterations down (`total_iters = floor(duration × full_throughput)`), so running ≤ duration < running +
 * 1 / full_throughput; a second either way allows for the rounding of the numbers written. One iteration of slack is
 * one-sided: on the other side a job of one long iteration could claim any duration down to nothing. Within 1% either
 * way is accepted too (the bundled pai_200 is within 0.71%, and within Eva's bounds).
 */
const DURATION_TOLERANCE = 0.01;
const DURATION_ROUNDING_SECONDS = 1;

/** Whether a job's duration agrees with the running time of its iterations (`DURATION_TOLERANCE`). */
function durationAgrees(durationSeconds: number, running: number, fullThroughput: number): boolean {
  if (Math.abs(durationSeconds - running) <= DURATION_TOLERANCE * running) return true;
  return (
    durationSeconds >= running - DURATION_ROUNDING_SECONDS &&
    durationSeconds <= running + 1 / fullThroughput + DURATION_ROUNDING_SECONDS
  );
}

// Strict: a misspelled optional key (`support_throughput_awre`) would otherwise be dropped without a word.
const evaTaskSchema = z.strictObject({
  name: z.string().min(1),
  demand: familyDemandSchema,
  shm_size: traceShmGiB,
  image_id: z.union([z.number().int().nonnegative(), z.string().min(1)]),
  fetch_delay: traceDelaySeconds,
  build_image_delay: traceDelaySeconds,
  kill_delay: traceDelaySeconds,
  upload_delay: traceDelaySeconds,
});

/**
 * The engine runs a job for total_iters at full_throughput (slowed by interference); `duration` only sizes it (the
 * queue's size classes, fairness, the cost bounds). One inconsistent with the iterations would misclass the job, so
 * both must agree.
 */
const evaJobSchema = z
  .strictObject({
    name: z.string().min(1),
    arrival_time: traceArrivalSeconds,
    duration: traceDurationSeconds,
    init_delay: traceDelaySeconds,
    full_throughput: z.number().finite().positive(),
    total_iters: z.number().int().positive(),
    support_throughput_aware: z.boolean().optional(),
    tasks: z
      .record(z.string(), evaTaskSchema)
      .refine((t) => Object.keys(t).length > 0, 'a job needs at least one task'),
  })
  .superRefine((job, ctx) => {
    const running = job.total_iters / job.full_throughput;
    if (!(running <= MAX_DURATION_SECONDS)) {
      ctx.addIssue({
        code: 'custom',
        path: ['total_iters'],
        message: `total_iters / full_throughput is ${running} s at full throughput: at most ${MAX_DURATION_SECONDS} s (365 days), as duration`,
      });
      return;
    }
    if (!durationAgrees(job.duration, running, job.full_throughput))
      ctx.addIssue({
        code: 'custom',
        path: ['duration'],
        message:
          `${job.duration} s, but total_iters / full_throughput is ${Number(running.toPrecision(6))} s: the job runs ` +
          'for its iterations, and duration (its size for queue classes) must agree: within 1%, or as Eva writes ' +
          'them (total_iters = floor(duration × full_throughput)), to a second',
      });
  });

type EvaJob = z.output<typeof evaJobSchema>;

function toDemand(d: Record<string, readonly [number, number, number]>): FamilyDemand {
  const out: Record<string, Resources> = {};
  for (const [family, r] of Object.entries(d)) out[family] = [r[0], r[1], r[2]];
  return out;
}

/** `taskKeys`: the job's task ids in the file's order (an object's integer-like keys would come out sorted). */
function toTraceJob(id: string, job: EvaJob, taskKeys: readonly string[] | undefined): TraceJob {
  // Eva identifies a task by its key in `tasks`; its multi-task workloads (two_node_Resnet18, the 4-task generator)
  // name every task `node0`. Such a job's tasks are named by their keys; the co-location key stays Eva's
  // `<job name>_<task name>`, so identical tasks of a job still share what the scheduler learns.
  const entries = entriesInOrder(job.tasks, taskKeys);
  const namesUnique = new Set(entries.map(([, t]) => t.name)).size === entries.length;
  const tasks = entries.map(([key, t]): TraceTask => ({
    name: namesUnique ? t.name : key,
    ...(namesUnique ? {} : { key: `${job.name}_${t.name}` }),
    demand: toDemand(t.demand),
    shmSizeGiB: t.shm_size,
    imageId: String(t.image_id),
    fetchDelaySeconds: t.fetch_delay,
    buildImageDelaySeconds: t.build_image_delay,
    killDelaySeconds: t.kill_delay,
    uploadDelaySeconds: t.upload_delay,
  }));
  return {
    id,
    name: job.name,
    workload: baseWorkloadOf(job.name),
    arrivalSeconds: job.arrival_time,
    durationSeconds: job.duration,
    initDelaySeconds: job.init_delay,
    fullThroughput: job.full_throughput,
    totalIterations: job.total_iters,
    tasks,
  };
}

function duplicateProblem(d: DuplicateKey): string {
  const lost = '(JSON keeps only the last, so the others would be lost)';
  if (d.path.length === 0) return `(root): job id ${JSON.stringify(d.key)} is given more than once ${lost}`;
  const [job, ...inJob] = d.path;
  return `job ${job}: ${inJob.length === 0 ? '' : `${inJob.join('.')}: `}${JSON.stringify(d.key)} is given more than once ${lost}`;
}

/**
 * Parse the text of an Eva JSON trace. Errors name the file (`source`), the job key and the field, e.g.
 * `pai_200.json: job 17: tasks.17.demand.any.1: Too small: expected number to be >=0`. Jobs come out in
 * arrival order (ties keep file order); job ids are the file's keys.
 */
export function parseEvaTrace(rawText: string, source = 'trace.json', traceName = source): Trace {
  const text = withoutBom(rawText);
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new ValidationError(source, [`not valid JSON: ${(e as Error).message}`]);
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json))
    throw new ValidationError(source, ['(root): expected an object mapping job ids to jobs']);
  if (isFleetwiseTraceJson(json))
    throw new ValidationError(source, [
      `(root): a fleetwise trace (format ${JSON.stringify((json as { format: string }).format)}), not an Eva one: give --format fleetwise`,
    ]);
  // A fleetwise trace with its format misspelled or left out would otherwise be told it has jobs named format and jobs.
  const lookalike = fleetwiseLookalikeProblem(json);
  if (lookalike !== undefined) throw new ValidationError(source, [lookalike]);
  const duplicates = duplicateJsonKeys(text);
  if (duplicates.length > 0) throw new ValidationError(source, duplicates.map(duplicateProblem));
  // In the file's order, so that jobs arriving together keep it (JSON.parse puts ids like "10" and "2" first, sorted).
  const keyOrder = jsonKeyOrder(text);
  const problems: string[] = [];
  const jobs: TraceJob[] = [];
  for (const [key, value] of entriesInOrder(
    json as Record<string, unknown>,
    keyOrder.get(keyOrderPath([])),
  )) {
    const parsed = evaJobSchema.safeParse(value);
    if (parsed.success) jobs.push(toTraceJob(key, parsed.data, keyOrder.get(keyOrderPath([key, 'tasks']))));
    else for (const issue of describeIssues(parsed.error)) problems.push(`job ${key}: ${issue}`);
  }
  if (problems.length === 0 && jobs.length === 0) problems.push('(root): the trace has no jobs');
  if (problems.length > 0) throw new ValidationError(source, problems);
  jobs.sort((a, b) => a.arrivalSeconds - b.arrivalSeconds); // stable: ties keep file order
  return { name: traceName, jobs };
}
