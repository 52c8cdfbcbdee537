import { isNode, LineCounter, parseDocument, type Document } from 'yaml';
import { z } from 'zod';
import type { Catalog } from '../core/catalog.js';
import { ANY_FAMILY, formatResources, type FamilyDemand, type Resources } from '../core/resources.js';
import { ValidationError } from '../core/validation.js';
import { PriceBook } from '../scheduler/reservation-price.js';
import { successSpecSchema, type SuccessSpec } from '../queue/success.js';

/**
 * The job spec users submit (YAML or JSON). A job is one or more task templates, each run as `replicas` identical
 * tasks that are gang-scheduled (all start together; Eva §4.4 multi-task jobs). Demands are per instance family or
 * `any` (Eva §5: a CPU task may need more vCPUs on a P3 than on a C7i). Checkpoint settings tell the worker how to
 * ask a task to checkpoint before a move; the delay estimates seed the migration cost until measured (digest §2).
 */

/** Limits that keep one request from exhausting the controller or a worker; exceeding one is a clear error. */
export const JOB_SPEC_LIMITS = {
  maxSpecBytes: 1024 * 1024,
  maxNameLength: 63,
  /** Tasks after expanding replicas (a gang larger than this is not a batch job we can place atomically). */
  maxTasks: 64,
  maxEnvVars: 256,
  maxEnvBytes: 64 * 1024,
  maxCommandArgs: 1024,
  maxCommandBytes: 64 * 1024,
  maxDescriptionLength: 1024,
  maxCheckpointTimeoutSeconds: 3600,
} as const;

/** Signals a worker may send to ask a task to checkpoint and exit (`docker kill --signal`). */
export const CHECKPOINT_SIGNALS = ['SIGTERM', 'SIGINT', 'SIGHUP', 'SIGQUIT', 'SIGUSR1', 'SIGUSR2'] as const;
export type CheckpointSignal = (typeof CHECKPOINT_SIGNALS)[number];

/**
 * Default grace period after the checkpoint signal. Under EC2's two-minute spot notice with room to upload, and far
 * above Eva's measured checkpoint delays (2–30 s, digest §3 "Job checkpointing").
 */
export const DEFAULT_CHECKPOINT_TIMEOUT_SECONDS = 60;

/** Env names the worker sets itself (checkpoint directory, task index, attempt); users may not override them. */
export const RESERVED_ENV_PREFIX = 'FLEETWISE_';

export interface BuildSpec {
  /** Docker build context directory, relative to the spec file unless absolute. */
  readonly context: string;
  /** Dockerfile path relative to the context (Docker's default `Dockerfile` when absent). */
  readonly dockerfile?: string | undefined;
}

export interface TaskTemplateSpec {
  readonly name: string;
  readonly image?: string | undefined;
  readonly build?: BuildSpec | undefined;
  readonly command?: readonly string[] | undefined;
  readonly env: Readonly<Record<string, string>>;
  readonly demand: FamilyDemand;
  readonly replicas: number;
  readonly shmSizeGiB: number;
  /** Co-location identity of this template's tasks (resolved: explicit, from the job's `workload`, or derived). */
  readonly workload: string;
}

export interface CheckpointSpec {
  readonly signal: CheckpointSignal;
  /** Seconds the task has to checkpoint and exit after the signal before it is killed (and its work since the last checkpoint lost). */
  readonly timeoutSeconds: number;
  /** How often the job checkpoints on its own, a hint for the lost-work estimate of a move. */
  readonly everySeconds?: number | undefined;
  /** Estimated seconds to fetch and restore a checkpoint on a new instance (Eva fetch delay), until measured. */
  readonly restoreDelaySeconds?: number | undefined;
  /** Estimated seconds from start until the job makes progress (Eva `init_delay`, the paper's "Launch"). */
  readonly initDelaySeconds?: number | undefined;
}

/** Reserved for the queue layer (WFQ class, priority, stages); only loosely checked here. */
export interface QueueSection {
  readonly class?: string | undefined;
  readonly priority?: number | undefined;
  readonly stages?: readonly unknown[] | undefined;
  readonly [key: string]: unknown;
}

export interface JobSpec {
  readonly name: string;
  readonly team: string;
  readonly description?: string | undefined;
  readonly tasks: readonly TaskTemplateSpec[];
  readonly checkpoint: CheckpointSpec;
  readonly totalIterations?: number | undefined;
  readonly expectedDurationSeconds?: number | undefined;
  /** Do not move the job during this many seconds after it starts running (Karpenter's `do-not-disrupt: 30m`). */
  readonly noMoveSeconds?: number | undefined;
  /** The job-level co-location identity as written, if any (each template holds its resolved key). */
  readonly workload?: string | undefined;
  readonly queue: QueueSection;
  /**
   * Success model for success-ranked ordering (Yao, Paolieri & Golubchik; issue 6): stages with continuation
   * probabilities, or a success probability and an expected size, in seconds at full throughput.
   */
  readonly success?: SuccessSpec | undefined;
  /**
   * Exit codes with which a task says "stopped as unsuccessful at a stage" (e.g. a hyperparameter trial that
   * diverged): the job ends `unsuccessful` rather than `failed`, and its capacity is freed.
   */
  readonly unsuccessfulExitCodes?: readonly number[] | undefined;
}

/** One task of a job after expanding replicas: what the store keeps a row for and the scheduler places. */
export interface ExpandedTask {
  readonly index: number;
  readonly templateIndex: number;
  readonly replica: number;
  /** `<template>` for a single replica, `<template>-<replica>` otherwise. */
  readonly name: string;
  /** Co-location key (the throughput table is keyed by it). */
  readonly workloadKey: string;
  readonly template: TaskTemplateSpec;
}

// ---------------------------------------------------------------------------------------------------------------
// Schema

const NAME_PATTERN = /^[a-z0-9]([a-z0-9._-]*[a-z0-9])?$/;
const NAME_RULE = `lowercase letters, digits, '.', '_' or '-', starting and ending with a letter or digit, at most ${JOB_SPEC_LIMITS.maxNameLength} characters`;
const ENV_NAME_PATTERN = /^[A-Za-z_][A-Za-z0-9_]*$/;
const FAMILY_PATTERN = /^[a-z][a-z0-9-]*$/;
const VECTOR_RULE = 'expected [gpus, vcpus, memoryGiB] with 3 non-negative numbers';

/** Job, team and task names: safe in EC2 tags, container names and URLs. */
export function isValidName(name: string): boolean {
  return name.length <= JOB_SPEC_LIMITS.maxNameLength && NAME_PATTERN.test(name);
}

const nameSchema = z
  .string()
  .max(JOB_SPEC_LIMITS.maxNameLength, `at most ${JOB_SPEC_LIMITS.maxNameLength} characters`)
  .regex(NAME_PATTERN, NAME_RULE);

const utf8Bytes = (s: string): number => Buffer.byteLength(s, 'utf8');

function parseVector(
  value: unknown,
  ctx: z.RefinementCtx,
  path: readonly (string | number)[],
): Resources | undefined {
  const ok =
    Array.isArray(value) &&
    value.length === 3 &&
    value.every((x) => typeof x === 'number' && Number.isFinite(x) && x >= 0);
  if (!ok) {
    ctx.addIssue({ code: 'custom', message: VECTOR_RULE, path: [...path] });
    return undefined;
  }
  const [gpus, vcpus, memoryGiB] = value as [number, number, number];
  if (!Number.isInteger(gpus)) {
    ctx.addIssue({ code: 'custom', message: `gpus must be a whole number, got ${gpus}`, path: [...path] });
    return undefined;
  }
  if (vcpus <= 0) {
    ctx.addIssue({
      code: 'custom',
      message: 'vcpus must be > 0 (every task needs some CPU)',
      path: [...path],
    });
    return undefined;
  }
  return [gpus, vcpus, memoryGiB];
}

/** `demand: [1, 4, 24]` is shorthand for `demand: { any: [1, 4, 24] }`. */
const demandSchema = z.unknown().transform((value, ctx): FamilyDemand => {
  if (Array.isArray(value)) {
    const v = parseVector(value, ctx, []);
    return v === undefined ? z.NEVER : { [ANY_FAMILY]: v };
  }
  if (typeof value !== 'object' || value === null) {
    ctx.addIssue({
      code: 'custom',
      message: `expected a map of family (p3, c7i, r7i, … or any) to [gpus, vcpus, memoryGiB], or one vector for any family`,
    });
    return z.NEVER;
  }
  const entries = Object.entries(value);
  if (entries.length === 0) {
    ctx.addIssue({ code: 'custom', message: 'needs at least one family (or any)' });
    return z.NEVER;
  }
  const out: Record<string, Resources> = {};
  let failed = false;
  for (const [family, vector] of entries) {
    if (!FAMILY_PATTERN.test(family)) {
      ctx.addIssue({
        code: 'custom',
        message: `not a family name (e.g. p3, c7i, r7i or any)`,
        path: [family],
      });
      failed = true;
      continue;
    }
    const v = parseVector(vector, ctx, [family]);
    if (v === undefined) failed = true;
    else out[family] = v;
  }
  return failed ? z.NEVER : out;
});

const buildSchema = z
  .union([
    z.string().min(1, 'a build context directory'),
    z.strictObject({
      context: z.string().min(1, 'a build context directory'),
      dockerfile: z.string().min(1).optional(),
    }),
  ])
  .transform((b): BuildSpec => (typeof b === 'string' ? { context: b } : b));

const commandSchema = z
  .array(z.string(), { error: 'expected a list of strings, e.g. [python, train.py, --epochs, "10"]' })
  .min(1, 'needs at least the program to run')
  .max(JOB_SPEC_LIMITS.maxCommandArgs, `at most ${JOB_SPEC_LIMITS.maxCommandArgs} arguments`)
  .refine((args) => args.reduce((n, a) => n + utf8Bytes(a), 0) <= JOB_SPEC_LIMITS.maxCommandBytes, {
    message: `longer than ${JOB_SPEC_LIMITS.maxCommandBytes} bytes in total`,
  });

const envSchema = z
  .record(
    z
      .string()
      .regex(ENV_NAME_PATTERN, 'environment names are letters, digits and _, not starting with a digit')
      .refine(
        (k) => !k.startsWith(RESERVED_ENV_PREFIX),
        `names starting with ${RESERVED_ENV_PREFIX} are set by the worker`,
      ),
    // YAML turns `EPOCHS: 10` into a number; accept scalars and pass them as the text the user wrote.
    z
      .union([z.string(), z.number(), z.boolean()], { error: 'expected a string, number or boolean' })
      .transform(String),
  )
  .default({})
  .superRefine((env, ctx) => {
    const keys = Object.keys(env);
    if (keys.length > JOB_SPEC_LIMITS.maxEnvVars)
      ctx.addIssue({
        code: 'custom',
        message: `${keys.length} variables, at most ${JOB_SPEC_LIMITS.maxEnvVars}`,
      });
    const bytes = keys.reduce((n, k) => n + utf8Bytes(k) + utf8Bytes(env[k] as string) + 2, 0);
    if (bytes > JOB_SPEC_LIMITS.maxEnvBytes)
      ctx.addIssue({
        code: 'custom',
        message: `${bytes} bytes in total, at most ${JOB_SPEC_LIMITS.maxEnvBytes}`,
      });
  });

const workloadSchema = z
  .string()
  .min(1)
  .max(128, 'at most 128 characters')
  .regex(/^[A-Za-z0-9][A-Za-z0-9._:/[\]-]*$/, 'letters, digits and . _ : / [ ] -');

const taskSchema = z.strictObject({
  name: nameSchema.optional(),
  image: z
    .string()
    .min(1)
    .max(255, 'at most 255 characters')
    .regex(/^[^\s]+$/, 'an image reference has no spaces, e.g. pytorch/pytorch:2.3.1-cuda12.1-cudnn8-runtime')
    .optional(),
  build: buildSchema.optional(),
  command: commandSchema.optional(),
  env: envSchema,
  demand: demandSchema,
  replicas: z.number().int('a whole number').min(1).max(JOB_SPEC_LIMITS.maxTasks).default(1),
  shmSizeGiB: z.number().finite().nonnegative().default(1),
  workload: workloadSchema.optional(),
});

const checkpointSchema = z.strictObject({
  signal: z.enum(CHECKPOINT_SIGNALS).default('SIGTERM'),
  timeoutSeconds: z
    .number()
    .positive()
    .max(
      JOB_SPEC_LIMITS.maxCheckpointTimeoutSeconds,
      `at most ${JOB_SPEC_LIMITS.maxCheckpointTimeoutSeconds} s`,
    )
    .default(DEFAULT_CHECKPOINT_TIMEOUT_SECONDS),
  everySeconds: z.number().positive().optional(),
  restoreDelaySeconds: z.number().finite().nonnegative().optional(),
  initDelaySeconds: z.number().finite().nonnegative().optional(),
});

const queueSchema = z.looseObject({
  class: z.string().min(1).optional(),
  priority: z.number().finite().optional(),
  stages: z.array(z.unknown()).optional(),
});

const jobSpecSchema = z.strictObject({
  name: nameSchema,
  team: nameSchema,
  description: z.string().max(JOB_SPEC_LIMITS.maxDescriptionLength).optional(),
  tasks: z
    .array(taskSchema)
    .min(1, 'a job needs at least one task')
    .max(JOB_SPEC_LIMITS.maxTasks, `at most ${JOB_SPEC_LIMITS.maxTasks} tasks`),
  checkpoint: checkpointSchema.default({
    signal: 'SIGTERM',
    timeoutSeconds: DEFAULT_CHECKPOINT_TIMEOUT_SECONDS,
  }),
  totalIterations: z.number().int('a whole number').positive().optional(),
  expectedDurationSeconds: z.number().finite().positive().optional(),
  noMoveSeconds: z.number().finite().nonnegative().optional(),
  workload: workloadSchema.optional(),
  queue: queueSchema.default({}),
  success: successSpecSchema.optional(),
  unsuccessfulExitCodes: z
    .array(
      z.number().int('a whole number').min(1, 'exit code 0 means success').max(255, 'exit codes are 1–255'),
    )
    .max(32, 'at most 32 exit codes')
    .optional(),
});

type RawJobSpec = z.output<typeof jobSpecSchema>;

/** Field names per object, for "unknown field; did you mean …" hints. */
const KNOWN_KEYS = {
  job: Object.keys(jobSpecSchema.shape),
  task: Object.keys(taskSchema.shape),
  checkpoint: Object.keys(checkpointSchema.shape),
  build: ['context', 'dockerfile'],
} as const;

// ---------------------------------------------------------------------------------------------------------------
// Parsing

export type Path = readonly (string | number)[];
interface Problem {
  readonly path: Path;
  readonly message: string;
}

/**
 * Parse and validate a job spec (YAML or JSON text; JSON is YAML). `source` names the file in errors; every problem
 * names the field path, the reason and the line. Demands are checked against `catalog`: a family it lacks, or a
 * demand no instance type can host, is an error here rather than a job that waits forever.
 */
export function parseJobSpec(text: string, source: string, catalog: Catalog | PriceBook): JobSpec {
  if (utf8Bytes(text) > JOB_SPEC_LIMITS.maxSpecBytes)
    throw new ValidationError(source, [`(root): larger than ${JOB_SPEC_LIMITS.maxSpecBytes} bytes`]);
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, uniqueKeys: true, prettyErrors: true });
  if (doc.errors.length > 0)
    throw new ValidationError(
      source,
      doc.errors.map((e) => `not valid YAML/JSON: ${firstLine(e.message)}`),
    );
  let value: unknown;
  try {
    value = doc.toJS({ maxAliasCount: 100 });
  } catch (e) {
    throw new ValidationError(source, [`not valid YAML/JSON: ${firstLine((e as Error).message)}`]);
  }
  return validate(value, source, catalog, (path) => lineOf(doc, lineCounter, path));
}

/** Validate an already-parsed spec (an API request body); problems name field paths but no lines. */
export function validateJobSpec(value: unknown, source: string, catalog: Catalog | PriceBook): JobSpec {
  return validate(value, source, catalog, () => undefined);
}

function validate(
  value: unknown,
  source: string,
  catalog: Catalog | PriceBook,
  lineAt: (path: Path) => number | undefined,
): JobSpec {
  const fail = (problems: readonly Problem[]): never => {
    throw new ValidationError(
      source,
      problems.map((p) => {
        const line = lineAt(p.path);
        return `${formatPath(p.path)}: ${p.message}${line === undefined ? '' : ` (line ${line})`}`;
      }),
    );
  };
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    return fail([{ path: [], message: 'expected a job spec (a map with name, team and tasks)' }]);
  const result = jobSpecSchema.safeParse(value);
  if (!result.success) return fail(result.error.issues.flatMap(explainIssue));
  const raw = result.data;
  const problems = [...checkStructure(raw), ...checkAgainstCatalog(raw, catalog)];
  if (problems.length > 0) return fail(problems);
  return resolve(raw);
}

function checkStructure(raw: RawJobSpec): Problem[] {
  const problems: Problem[] = [];
  const names = new Map<string, number>();
  let total = 0;
  raw.tasks.forEach((t, i) => {
    const path = ['tasks', i];
    if (t.image === undefined && t.build === undefined)
      problems.push({
        path,
        message: 'needs either image (a registry image) or build (a Docker build context)',
      });
    if (t.image !== undefined && t.build !== undefined)
      problems.push({ path, message: 'give either image or build, not both' });
    const name = templateName(t, i);
    const earlier = names.get(name);
    if (earlier !== undefined)
      problems.push({
        path: [...path, 'name'],
        message: `duplicate task name ${name} (also tasks.${earlier})`,
      });
    names.set(name, i);
    total += t.replicas;
    for (const [family, v] of Object.entries(t.demand))
      if (t.shmSizeGiB > v[2])
        problems.push({
          path: [...path, 'shmSizeGiB'],
          message: `${t.shmSizeGiB} GiB of shared memory exceeds the task's ${v[2]} GiB memory demand on ${family} (shm counts against it)`,
        });
  });
  if (total > JOB_SPEC_LIMITS.maxTasks)
    problems.push({
      path: ['tasks'],
      message: `${total} tasks after replicas, at most ${JOB_SPEC_LIMITS.maxTasks} per job`,
    });
  return problems;
}

function checkAgainstCatalog(raw: RawJobSpec, catalog: Catalog | PriceBook): Problem[] {
  const book = catalog instanceof PriceBook ? catalog : new PriceBook(catalog);
  const families = [...new Set(book.catalog.types.map((t) => t.family))];
  const problems: Problem[] = [];
  raw.tasks.forEach((t, i) => {
    let familiesOk = true;
    for (const family of Object.keys(t.demand))
      if (family !== ANY_FAMILY && !families.includes(family)) {
        familiesOk = false;
        problems.push({
          path: ['tasks', i, 'demand', family],
          message: `family ${family} is not in the ${book.catalog.region} catalog (it has ${families.join(', ')}; use any for every family)`,
        });
      }
    if (familiesOk && book.minType(t.demand) === undefined)
      problems.push({ path: ['tasks', i, 'demand'], message: unhostableMessage(t.demand, book, families) });
  });
  return problems;
}

function unhostableMessage(demand: FamilyDemand, book: PriceBook, families: readonly string[]): string {
  const largest = families.flatMap((family) => {
    const d = demand[family] ?? demand[ANY_FAMILY];
    if (d === undefined) return [];
    const types = book.byCostDescending.filter((t) => t.family === family);
    const top = types[0];
    return top === undefined
      ? []
      : [`${family} needs ${formatResources(d)}, largest ${top.name} has ${formatResources(top.capacity)}`];
  });
  return `no instance type in the ${book.catalog.region} catalog can host this task (${largest.join('; ')})`;
}

function resolve(raw: RawJobSpec): JobSpec {
  const tasks = raw.tasks.map((t, i): TaskTemplateSpec => {
    const name = templateName(t, i);
    const workload =
      t.workload ??
      (raw.workload === undefined
        ? derivedWorkload(t)
        : raw.tasks.length === 1
          ? raw.workload
          : `${raw.workload}_${name}`);
    return {
      name,
      ...(t.image === undefined ? {} : { image: t.image }),
      ...(t.build === undefined ? {} : { build: t.build }),
      ...(t.command === undefined ? {} : { command: t.command }),
      env: t.env,
      demand: t.demand,
      replicas: t.replicas,
      shmSizeGiB: t.shmSizeGiB,
      workload,
    };
  });
  return {
    name: raw.name,
    team: raw.team,
    ...(raw.description === undefined ? {} : { description: raw.description }),
    tasks,
    checkpoint: raw.checkpoint,
    ...(raw.totalIterations === undefined ? {} : { totalIterations: raw.totalIterations }),
    ...(raw.expectedDurationSeconds === undefined
      ? {}
      : { expectedDurationSeconds: raw.expectedDurationSeconds }),
    ...(raw.noMoveSeconds === undefined ? {} : { noMoveSeconds: raw.noMoveSeconds }),
    ...(raw.workload === undefined ? {} : { workload: raw.workload }),
    queue: raw.queue,
    ...(raw.success === undefined ? {} : { success: raw.success }),
    ...(raw.unsuccessfulExitCodes === undefined
      ? {}
      : { unsuccessfulExitCodes: [...new Set(raw.unsuccessfulExitCodes)].sort((a, b) => a - b) }),
  };
}

function templateName(t: { readonly name?: string | undefined }, index: number): string {
  return t.name ?? `task-${index}`;
}

/**
 * Default co-location identity: the image (or build context) and command, which decide how a task uses the machine.
 * Env is left out on purpose: it often carries run ids or secrets that differ per run of the same workload.
 * Readable prefix + FNV-1a hash, e.g. `pytorch-3fa2c1d9`.
 */
export function derivedWorkload(t: {
  readonly image?: string | undefined;
  readonly build?: BuildSpec | undefined;
  readonly command?: readonly string[] | undefined;
}): string {
  const origin = t.image ?? `build:${t.build?.context ?? ''}:${t.build?.dockerfile ?? ''}`;
  const identity = JSON.stringify([origin, t.command ?? []]);
  const base =
    t.image !== undefined
      ? (t.image.split('@')[0] ?? '').split('/').pop()?.split(':')[0]
      : (t.build?.context ?? '').replace(/\/+$/, '').split('/').pop();
  const prefix = (base ?? '').toLowerCase().replace(/[^a-z0-9._-]/g, '') || 'task';
  return `${prefix.slice(0, 40)}-${fnv1a32(identity)}`;
}

function fnv1a32(text: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h.toString(16).padStart(8, '0');
}

/** The job's tasks after expanding replicas, indexed 0…n−1 in template order. */
export function expandTasks(spec: JobSpec): ExpandedTask[] {
  const out: ExpandedTask[] = [];
  spec.tasks.forEach((template, templateIndex) => {
    for (let replica = 0; replica < template.replicas; replica++)
      out.push({
        index: out.length,
        templateIndex,
        replica,
        name: template.replicas === 1 ? template.name : `${template.name}-${replica}`,
        workloadKey: template.workload,
        template,
      });
  });
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// Error messages

function formatPath(path: Path): string {
  return path.length === 0 ? '(root)' : path.map(String).join('.');
}

function explainIssue(issue: z.core.$ZodIssue): Problem[] {
  const path = issue.path.filter((p): p is string | number => typeof p !== 'symbol');
  if (issue.code === 'unrecognized_keys') {
    const known = knownKeysAt(path);
    return issue.keys.map((key) => {
      const hint = closest(key, known);
      return {
        path: [...path, key],
        message: `unknown field${hint === undefined ? '' : `, did you mean ${hint}?`}${known.length > 0 ? ` (known: ${known.join(', ')})` : ''}`,
      };
    });
  }
  if (issue.code === 'invalid_key') return [{ path, message: issue.issues.map((i) => i.message).join('; ') }];
  if (issue.code === 'invalid_type' && /received undefined$/.test(issue.message))
    return [{ path, message: `required (${issue.expected})` }];
  return [{ path, message: issue.message }];
}

function knownKeysAt(path: Path): readonly string[] {
  if (path.length === 0) return KNOWN_KEYS.job;
  if (path.length === 1 && path[0] === 'checkpoint') return KNOWN_KEYS.checkpoint;
  if (path.length === 2 && path[0] === 'tasks') return KNOWN_KEYS.task;
  if (path.length === 3 && path[0] === 'tasks' && path[2] === 'build') return KNOWN_KEYS.build;
  return [];
}

/** The known name within edit distance 2 (or sharing a case-insensitive prefix of 4+), if any. */
function closest(word: string, candidates: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const c of candidates) {
    const d = editDistance(word.toLowerCase(), c.toLowerCase());
    if (d < bestDistance) {
      bestDistance = d;
      best = c;
    }
  }
  if (best !== undefined && bestDistance <= 2) return best;
  const lower = word.toLowerCase();
  return candidates.find((c) => lower.length >= 4 && c.toLowerCase().startsWith(lower.slice(0, 4)));
}

function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      cur.push(Math.min((prev[j] as number) + 1, (cur[j - 1] as number) + 1, (prev[j - 1] as number) + cost));
    }
    prev = cur;
  }
  return prev[b.length] as number;
}

function firstLine(message: string): string {
  return message.split('\n')[0] ?? message;
}

/** 1-based line of the node at `path`, or of its deepest existing ancestor (for a missing field). */
function lineOf(doc: Document, counter: LineCounter, path: Path): number | undefined {
  for (let n = path.length; n >= 0; n--) {
    const node = n === 0 ? doc.contents : doc.getIn(path.slice(0, n), true);
    if (isNode(node) && node.range !== undefined && node.range !== null)
      return counter.linePos(node.range[0]).line;
  }
  return undefined;
}
