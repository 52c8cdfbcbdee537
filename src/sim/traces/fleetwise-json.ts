import { z } from 'zod';
import type { FamilyDemand, Resources } from '../../core/resources.js';
import { describeIssues, ValidationError } from '../../core/validation.js';
import type { Trace, TraceJob, TraceTask } from '../../world/trace.js';
import { dependencyFault, type DependencyFault } from '../../world/job-dependencies.js';
import { baseWorkloadOf, familyDemandSchema } from './workloads.js';
import { networkDeclarationSchema, toNetworkDeclaration } from '../../core/network-schema.js';
import { traceArrivalSeconds, traceDelaySeconds, traceDurationSeconds, traceShmGiB } from './trace-bounds.js';
import { duplicateJsonKeys, duplicateKeyProblem } from './json-duplicate-keys.js';
import { MAX_SPOT_MAX_DELAY_MINUTES, SPOT_PREFERENCES } from '../../core/spot.js';
import { successSpecSchema } from '../../queue/success.js';
import { withoutBom } from './text.js';
import { MAX_DURATION_RULE, MAX_DURATION_SECONDS } from '../../core/duration.js';
import { MAX_VALUE_OF_TIME_PER_JOB_HOUR } from '../../core/model.js';

/**
 * fleetwise's own JSON trace format: what `fleetwise export-trace` writes from a controller's state and what a
 * directory of job specs becomes. Unlike Eva's format it speaks the controller's terms (co-location workload keys,
 * demands per family, the checkpoint delay estimates of a job spec), so a trace of what ran on a cluster replays with
 * the keys the controller learned under. One entry per task (replicas expanded).
 */
export const FLEETWISE_TRACE_FORMAT = 'fleetwise-trace/v1';

const nonNegative = z.number().finite().nonnegative();

/** Seconds a job spec's `field` declares: 0 or more, at most what the spec allows, so a trace says no more than one. */
const specDuration = (field: string) =>
  nonNegative.max(MAX_DURATION_SECONDS, `${MAX_DURATION_RULE}, as a job spec's ${field}`);

const taskSchema = z.strictObject({
  name: z.string().min(1),
  /** Co-location key the scheduler learns under (the job spec's resolved `workload`). */
  workload: z.string().min(1),
  /** Tasks with the same image skip the build on an instance that already has it; default: the workload. */
  image: z.string().min(1).optional(),
  demand: familyDemandSchema,
  shmSizeGiB: traceShmGiB.default(0),
});

const jobSchema = z
  .strictObject({
    id: z.string().min(1),
    name: z.string().min(1),
    team: z.string().min(1).optional(),
    /** Interference identity (a contention-matrix workload); default: the first task's workload. */
    workload: z.string().min(1).optional(),
    /** Seconds after the trace's start. */
    arrivalSeconds: traceArrivalSeconds,
    /** Running time at full throughput, in seconds. */
    durationSeconds: traceDurationSeconds,
    /** Where the duration came from: the job's measured running time, or its spec's expectedDurationSeconds. */
    durationFrom: z.enum(['measured', 'declared']).optional(),
    totalIterations: z.number().int().positive().optional(),
    initDelaySeconds: traceDelaySeconds.default(0),
    /** Seconds to fetch (and, when the job moves, to upload) a checkpoint. */
    restoreDelaySeconds: traceDelaySeconds.default(0),
    /** False for a job that stopped as unsuccessful at a stage; its duration is what it ran. */
    successful: z.boolean().optional(),
    /** Latency sensitivity, pattern, root task (by name) and traffic, as a job spec's `network:`. */
    network: networkDeclarationSchema.optional(),
    /** Whether it may run on spot capacity (a job spec's `spot`; absent: allowed). */
    spot: z.enum(SPOT_PREFERENCES).optional(),
    /** The most one spot interruption may delay it, in seconds (a job spec's `spotMaxDelayMinutes` × 60). */
    spotMaxDelaySeconds: z
      .number()
      .finite()
      .positive()
      .max(
        MAX_SPOT_MAX_DELAY_MINUTES * 60,
        `at most a week (${MAX_SPOT_MAX_DELAY_MINUTES * 60} s), as a job spec's spotMaxDelayMinutes`,
      )
      .optional(),
    /** Seconds between its own checkpoints, 0 for never (a job spec's `checkpoint.everySeconds`; absent: 30 min). */
    checkpointIntervalSeconds: specDuration('checkpoint.everySeconds').optional(),
    /** Not moved through its init nor for this long after it starts making progress (a job spec's `noMoveSeconds`). */
    noMoveSeconds: specDuration('noMoveSeconds').optional(),
    /** What an hour of its completion time is worth, $ (a job spec's `valueOfTimePerJobHour`). */
    valueOfTimePerJobHour: nonNegative
      .max(
        MAX_VALUE_OF_TIME_PER_JOB_HOUR,
        `at most ${MAX_VALUE_OF_TIME_PER_JOB_HOUR} ($ per hour), as a job spec's valueOfTimePerJobHour`,
      )
      .optional(),
    /** Its declared success model (a job spec's `success`), for success-ranked ordering. */
    success: successSpecSchema.optional(),
    /**
     * Ids of jobs listed earlier that must finish first (a job spec's `dependsOn`): the job is held from its arrival
     * until the last of them has finished.
     */
    dependsOn: z
      .array(z.string().min(1))
      .min(1)
      .refine((ids) => new Set(ids).size === ids.length, 'names a job twice')
      .optional(),
    tasks: z
      .array(taskSchema)
      .min(1, 'a job needs at least one task')
      .superRefine((tasks, ctx) => {
        const seen = new Set<string>();
        tasks.forEach((t, i) => {
          if (seen.has(t.name))
            ctx.addIssue({ code: 'custom', path: [i, 'name'], message: `duplicate task name ${t.name}` });
          seen.add(t.name);
        });
      }),
  })
  // Checked here, not first when the run is built: a root naming no task is the file's fault (exit 2), like a job
  // spec's (controller/job-spec/parse.ts).
  .superRefine((job, ctx) => {
    const root = job.network?.root;
    if (root !== undefined && !job.tasks.some((t) => t.name === root))
      ctx.addIssue({
        code: 'custom',
        path: ['network', 'root'],
        message: `no task named ${root} (tasks: ${job.tasks.map((t) => t.name).join(', ')})`,
      });
  });

const documentSchema = z.strictObject({
  format: z.literal(FLEETWISE_TRACE_FORMAT, { error: `expected "${FLEETWISE_TRACE_FORMAT}"` }),
  name: z.string().min(1).optional(),
  /** Where the trace came from (a state directory, a directory of specs), for the reader. */
  source: z.string().optional(),
  jobs: z
    .array(jobSchema)
    .min(1, 'the trace has no jobs')
    .superRefine((jobs, ctx) => {
      const seen = new Map<string, (typeof jobs)[number]>();
      jobs.forEach((j, i) => {
        if (seen.has(j.id))
          ctx.addIssue({ code: 'custom', path: [i, 'id'], message: `duplicate job id ${j.id}` });
        (j.dependsOn ?? []).forEach((id, k) => {
          const fault = dependencyFault(j, id, seen.get(id));
          if (fault !== undefined)
            ctx.addIssue({ code: 'custom', path: [i, 'dependsOn', k], message: faultMessage(id, fault) });
        });
        seen.set(j.id, j);
      });
    }),
});

/** A dependency fault (world/job-dependencies.ts) as said under `jobs.N.dependsOn.K`. */
function faultMessage(id: string, fault: DependencyFault): string {
  switch (fault.kind) {
    case 'itself':
    case 'not-earlier':
      return `${id} is not a job listed before this one (a dependency is submitted before its dependents)`;
    case 'arrives-later':
      return `${id} arrives after this job (at ${fault.atSeconds} s)`;
    case 'other-team':
      return `${id} is a job of team ${fault.team}: a job waits only for its own team's`;
    case 'fails':
      return `${id} fails in the trace (successful: false), so this job could never start`;
  }
}

/** A job of the format as written (defaults may be left out). */
export type FleetwiseTraceJob = z.input<typeof jobSchema>;
export type FleetwiseTraceDocument = z.input<typeof documentSchema>;
type ParsedJob = z.output<typeof jobSchema>;

function toDemand(d: Record<string, readonly [number, number, number]>): FamilyDemand {
  const out: Record<string, Resources> = {};
  for (const [family, r] of Object.entries(d)) out[family] = [r[0], r[1], r[2]];
  return out;
}

/**
 * A job of the format as the simulator runs it, mapped as the controller's prediction world maps a job record
 * (controller/eta-world.ts), so a replayed job costs the simulator what the controller assumes: a start fetches
 * the checkpoint and a stop uploads it (the restore delay each), no build delay, `initDelaySeconds` before
 * progress. Without `totalIterations` a job runs one iteration per second of its duration.
 */
function toTraceJob(job: ParsedJob): TraceJob {
  const totalIterations = job.totalIterations ?? Math.max(1, Math.round(job.durationSeconds));
  const tasks = job.tasks.map((t): TraceTask => ({
    name: t.name,
    key: t.workload,
    demand: toDemand(t.demand),
    shmSizeGiB: t.shmSizeGiB,
    imageId: t.image ?? t.workload,
    fetchDelaySeconds: job.restoreDelaySeconds,
    buildImageDelaySeconds: 0,
    killDelaySeconds: 0,
    uploadDelaySeconds: job.restoreDelaySeconds,
  }));
  const first = job.tasks[0]?.workload ?? job.name;
  return {
    id: job.id,
    name: job.name,
    workload: baseWorkloadOf(job.workload ?? first),
    arrivalSeconds: job.arrivalSeconds,
    durationSeconds: job.durationSeconds,
    initDelaySeconds: job.initDelaySeconds,
    fullThroughput: totalIterations / job.durationSeconds,
    totalIterations,
    tasks,
    ...(job.team === undefined ? {} : { team: job.team }),
    ...(job.successful === undefined ? {} : { successful: job.successful }),
    ...(job.network === undefined ? {} : { network: toNetworkDeclaration(job.network) }),
    ...(job.dependsOn === undefined ? {} : { dependsOn: job.dependsOn }),
    ...(job.spot === undefined ? {} : { spot: job.spot }),
    ...(job.spotMaxDelaySeconds === undefined ? {} : { spotMaxDelaySeconds: job.spotMaxDelaySeconds }),
    ...(job.checkpointIntervalSeconds === undefined
      ? {}
      : { checkpointIntervalSeconds: job.checkpointIntervalSeconds }),
    ...(job.noMoveSeconds === undefined ? {} : { noMoveSeconds: job.noMoveSeconds }),
    ...(job.valueOfTimePerJobHour === undefined ? {} : { valueOfTimePerHour: job.valueOfTimePerJobHour }),
    ...(job.success === undefined ? {} : { success: job.success }),
  };
}

/** Fields of an Eva trace's job that a fleetwise trace's has not (under other names: `arrivalSeconds`, …). */
const EVA_JOB_FIELDS = ['arrival_time', 'duration', 'init_delay', 'full_throughput', 'total_iters'];

/**
 * Whether parsed JSON is shaped like an Eva trace: no `format` nor `jobs`, and job ids mapping to objects, one at
 * least with a field of Eva's jobs. Read as a fleetwise trace it would be told of its every job id as an unknown key.
 */
function looksLikeEvaTrace(value: unknown): boolean {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  if ('format' in value || 'jobs' in value) return false;
  const jobs = Object.values(value);
  const objects = jobs.filter((j): j is object => typeof j === 'object' && j !== null && !Array.isArray(j));
  return (
    jobs.length > 0 &&
    objects.length === jobs.length &&
    objects.some((j) => EVA_JOB_FIELDS.some((field) => field in j))
  );
}

/** Validate a fleetwise trace document (already parsed JSON) into a trace, jobs in arrival order. */
export function fleetwiseTrace(value: unknown, source: string, traceName = source): Trace {
  // The reverse mistake, an Eva reader given a fleetwise trace, is told so too (eva-json.ts).
  if (looksLikeEvaTrace(value))
    throw new ValidationError(source, ['(root): an Eva trace (job ids → jobs): give --format eva']);
  const parsed = documentSchema.safeParse(value);
  if (!parsed.success) throw new ValidationError(source, describeIssues(parsed.error));
  const jobs = parsed.data.jobs.map(toTraceJob);
  jobs.sort((a, b) => a.arrivalSeconds - b.arrivalSeconds); // stable: ties keep file order
  return { name: parsed.data.name ?? traceName, jobs };
}

/** Parse the text of a fleetwise JSON trace. Errors name the file and the field, e.g. `jobs.2.durationSeconds`. */
export function parseFleetwiseTrace(rawText: string, source = 'trace.json', traceName = source): Trace {
  const text = withoutBom(rawText);
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new ValidationError(source, [`not valid JSON: ${(e as Error).message}`]);
  }
  const duplicates = duplicateJsonKeys(text);
  if (duplicates.length > 0)
    throw new ValidationError(
      source,
      duplicates.map((d) => duplicateKeyProblem(d)),
    );
  return fleetwiseTrace(json, source, traceName);
}

/** Whether parsed JSON claims to be a fleetwise trace (its `format` field), to tell it from an Eva trace. */
export function isFleetwiseTraceJson(json: unknown): boolean {
  return (
    typeof json === 'object' &&
    json !== null &&
    !Array.isArray(json) &&
    typeof (json as { format?: unknown }).format === 'string' &&
    (json as { format: string }).format.startsWith('fleetwise-trace')
  );
}

/**
 * The problem of parsed JSON shaped like a fleetwise trace whose `format` does not say so (misspelled, or missing
 * beside a `jobs` array), which is therefore read as an Eva trace; undefined when it is not shaped so. An Eva trace
 * maps job ids to job objects, so a `jobs` array, or a `format` that is not an object, is a fleetwise trace's.
 */
export function fleetwiseLookalikeProblem(json: object): string | undefined {
  const root = json as { format?: unknown; jobs?: unknown };
  const hasJobsArray = Array.isArray(root.jobs);
  const hasFormat = 'format' in root && (typeof root.format !== 'object' || root.format === null);
  if (!hasJobsArray && !hasFormat) return undefined;
  const given = hasFormat ? `got ${JSON.stringify(root.format)}` : 'missing';
  const shape = hasJobsArray
    ? "the file has a fleetwise trace's jobs array, where an Eva trace maps job ids to jobs"
    : 'an Eva trace maps job ids to jobs, and a fleetwise trace says its format';
  return `format: expected "${FLEETWISE_TRACE_FORMAT}" (${given}): ${shape}`;
}

/** Whether the text of a JSON file is a fleetwise trace (its `format` field; a leading BOM is skipped). */
export function isFleetwiseTraceText(text: string): boolean {
  try {
    return isFleetwiseTraceJson(JSON.parse(withoutBom(text)));
  } catch {
    return false; // not JSON: the parser of the format asked for says why
  }
}
