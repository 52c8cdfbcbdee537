import { z } from 'zod';
import { durationSecondsSchema } from '../../core/duration.js';
import { MAX_VALUE_OF_TIME_PER_JOB_HOUR } from '../../core/model.js';
import { ANY_FAMILY, type FamilyDemand, type Resources } from '../../core/resources.js';
import { successSpecSchema } from '../../queue/success.js';
import { networkDeclarationSchema } from '../../core/network-schema.js';
import { MAX_SPOT_MAX_DELAY_MINUTES, SPOT_PREFERENCES } from '../../core/spot.js';
import { plainEntryName, unsafeEntryNameReason } from '../../protocol/archive-entry-names.js';
import {
  CHECKPOINT_SIGNALS,
  DEFAULT_CHECKPOINT_TIMEOUT_SECONDS,
  JOB_SPEC_LIMITS,
  RESERVED_ENV_PREFIX,
  type BuildSpec,
} from './spec.js';
import { arrayPropertiesSchema, checkDependencies, dependencySchema } from './dependency-schema.js';
import { exitRuleSchema, retryStrategySchema } from './retry-schema.js';

export { arrayDependencySchema, arrayPropertiesSchema } from './dependency-schema.js';
export { exitRuleSchema, retryStrategySchema } from './retry-schema.js';

/**
 * The zod schemas a job spec is validated with. They check each field on its own; rules that span fields (image or
 * build, unique task names, the catalog) are in parse.ts. They are also the API's description of a job spec: the
 * OpenAPI document is generated from them (api/openapi-zod-components.ts), so descriptions written here are what
 * API clients read, and a new field is documented by adding it here.
 */

const NAME_PATTERN = /^[a-z0-9]([a-z0-9._-]*[a-z0-9])?$/;
const NAME_RULE = `lowercase letters, digits, '.', '_' or '-', starting and ending with a letter or digit, at most ${JOB_SPEC_LIMITS.maxNameLength} characters`;
const ENV_NAME_PATTERN = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * An image reference as Docker reads one (the grammar of github.com/distribution/reference, regexp.go):
 *   reference := name [":" tag] ["@" digest]
 *   name      := [domain "/"] path-component ["/" path-component]*
 *   domain    := host [":" port], host a domain name (components [a-zA-Z0-9] or [a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9],
 *                joined by ".") or "[" IPv6 "]"
 *   path-component := [a-z0-9]+ (separator [a-z0-9]+)*, separator := [_.] | __ | -+
 *   tag       := [\w][\w.-]{0,127}
 *   digest    := algorithm ":" hex, algorithm [A-Za-z][A-Za-z0-9]* joined by [-_+.], at least 32 lowercase hex
 *                digits (sha256:<64 hex> as registries give one; OCI allows sha384 and sha512 too)
 * A new submission naming anything else (`../../etc;rm`, `Ubuntu`, `a:`) is refused (parse.ts) rather than failing the worker's docker pull after an instance was bought.
 */
export const IMAGE_REFERENCE_PATTERN = (() => {
  const pathComponent = '[a-z0-9]+(?:(?:[_.]|__|-+)[a-z0-9]+)*';
  const domainComponent = '(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])';
  const domain = `(?:${domainComponent}(?:\\.${domainComponent})*|\\[[a-fA-F0-9:]+\\])(?::[0-9]+)?`;
  const name = `(?:${domain}/)?${pathComponent}(?:/${pathComponent})*`;
  const digest = '[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-f]{32,}';
  return new RegExp(`^${name}(?::[\\w][\\w.-]{0,127})?(?:@${digest})?$`);
})();
export const IMAGE_REFERENCE_RULE =
  'not an image reference: [registry[:port]/]name[:tag][@algorithm:digest], the name in lowercase letters, digits ' +
  "and '.', '_', '-', '/' separators, e.g. pytorch/pytorch:2.3.1-cuda12.1-cudnn8-runtime";
const FAMILY_PATTERN = /^[a-z][a-z0-9-]*$/;
const VECTOR_RULE = 'expected [gpus, vcpus, memoryGiB] with 3 non-negative numbers';
const POSITIVE = 'must be more than 0 seconds';
const NON_NEGATIVE = 'must be 0 seconds or more';
const AT_MOST_DURATION = `at most ${JOB_SPEC_LIMITS.maxDurationSeconds} s (365 days)`;
const AT_MOST_DELAY = `at most ${JOB_SPEC_LIMITS.maxDelaySeconds} s (a day)`;
/** Seconds of a job's run, window or period: more than 0 (or 0 or more), at most a year. */
const positiveDuration = () =>
  z.number().finite().positive(POSITIVE).max(JOB_SPEC_LIMITS.maxDurationSeconds, AT_MOST_DURATION);
const nonNegativeDuration = () =>
  z.number().finite().nonnegative(NON_NEGATIVE).max(JOB_SPEC_LIMITS.maxDurationSeconds, AT_MOST_DURATION);
const delay = () =>
  z.number().finite().nonnegative(NON_NEGATIVE).max(JOB_SPEC_LIMITS.maxDelaySeconds, AT_MOST_DELAY);

/** Job, team and task names: safe in EC2 tags, container names and URLs. */
export function isValidName(name: string): boolean {
  return name.length <= JOB_SPEC_LIMITS.maxNameLength && NAME_PATTERN.test(name);
}

const nameSchema = z
  .string()
  .max(JOB_SPEC_LIMITS.maxNameLength, `at most ${JOB_SPEC_LIMITS.maxNameLength} characters`)
  .regex(NAME_PATTERN, NAME_RULE);

export const utf8Bytes = (s: string): number => Buffer.byteLength(s, 'utf8');

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
  const over =
    gpus > JOB_SPEC_LIMITS.maxGpus
      ? `gpus must be at most ${JOB_SPEC_LIMITS.maxGpus}`
      : vcpus > JOB_SPEC_LIMITS.maxVcpus
        ? `vcpus must be at most ${JOB_SPEC_LIMITS.maxVcpus}`
        : memoryGiB > JOB_SPEC_LIMITS.maxMemoryGiB
          ? `memoryGiB must be at most ${JOB_SPEC_LIMITS.maxMemoryGiB}`
          : undefined;
  if (over !== undefined) {
    ctx.addIssue({
      code: 'custom',
      message: `${over}, got [${gpus}, ${vcpus}, ${memoryGiB}]`,
      path: [...path],
    });
    return undefined;
  }
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

/** How a resource vector is written, for the generated JSON Schema (parseVector checks it). */
const VECTOR_JSON_SCHEMA = {
  type: 'array',
  items: { type: 'number', minimum: 0 },
  minItems: 3,
  maxItems: 3,
  description: '[gpus, vcpus, memoryGiB]',
} as const;

/**
 * `demand: [1, 4, 24]` is shorthand for `demand: { any: [1, 4, 24] }`. Parsed by hand for its error messages, so
 * its JSON Schema (which zod cannot derive from a transform of unknown) is given as metadata.
 */
const demandSchema = z
  .unknown()
  .transform((value, ctx): FamilyDemand => {
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
  })
  .meta({
    description: 'What one task needs, per instance family (p3, c7i, …) or any family',
    oneOf: [
      VECTOR_JSON_SCHEMA,
      { type: 'object', additionalProperties: VECTOR_JSON_SCHEMA, description: 'family (or any) → vector' },
    ],
  });

/**
 * The Dockerfile travels in the uploaded context archive, so it must be a path inside it, by the rule archive entries
 * follow (protocol/archive-entry-names.ts): anything else would pass here and fail only in the build on a worker.
 */
const DOCKERFILE_RULE =
  'a path inside the build context, relative to it (e.g. Dockerfile.gpu or docker/Dockerfile)';

const buildContextSchema = z.string().min(1, 'a build context directory');

const buildObjectSchema = z.strictObject({
  context: buildContextSchema,
  dockerfile: z
    .string()
    .min(1)
    .superRefine((path, ctx) => {
      const unsafe = unsafeEntryNameReason(path);
      if (unsafe !== undefined) ctx.addIssue({ code: 'custom', message: `${unsafe}: ${DOCKERFILE_RULE}` });
      else if (plainEntryName(path) === '')
        ctx.addIssue({
          code: 'custom',
          message: `names the context directory itself: ${DOCKERFILE_RULE}`,
        });
    })
    .describe(`The Dockerfile: ${DOCKERFILE_RULE} (default Dockerfile)`)
    .optional(),
});

/** How `build` is written, for the generated JSON Schema (buildSchema checks it by hand). */
const { $schema: _dialect, ...BUILD_JSON_SCHEMA } = z.toJSONSchema(
  z.union([buildContextSchema, buildObjectSchema]),
  { target: 'openapi-3.0', io: 'input' },
);

/**
 * A directory, or `{context, dockerfile}`: the form is told by the value's type, so a mistake in the object names its
 * field (`build.context: required`), where a union of the two forms says only that neither matched.
 */
const buildSchema = z
  .unknown()
  .transform((value, ctx): BuildSpec => {
    const parsed =
      typeof value === 'string'
        ? buildContextSchema.safeParse(value)
        : typeof value === 'object' && value !== null && !Array.isArray(value)
          ? buildObjectSchema.safeParse(value)
          : undefined;
    if (parsed === undefined) {
      ctx.addIssue({
        code: 'custom',
        message:
          'expected a build context directory, or {context, dockerfile} (e.g. {context: ., dockerfile: Dockerfile.gpu})',
      });
      return z.NEVER;
    }
    if (!parsed.success) {
      for (const issue of parsed.error.issues) ctx.addIssue({ ...issue });
      return z.NEVER;
    }
    return typeof parsed.data === 'string' ? { context: parsed.data } : parsed.data;
  })
  .meta({
    ...BUILD_JSON_SCHEMA,
    description:
      'A Docker build context directory (relative to the spec file unless absolute, or an uploaded context), ' +
      'or {context, dockerfile}',
  });

/**
 * No NUL byte: a process argument or environment value is a C string, so one would fail at start (or be cut short),
 * long after the submission was accepted.
 */
const NUL_FREE = [(v: string) => !v.includes('\0'), 'must not contain a NUL byte'] as const;

const commandSchema = z
  .array(z.string().refine(...NUL_FREE), {
    error: 'expected a list of strings, e.g. [python, train.py, --epochs, "10"]',
  })
  .min(1, 'needs at least the program to run')
  .max(JOB_SPEC_LIMITS.maxCommandArgs, `at most ${JOB_SPEC_LIMITS.maxCommandArgs} arguments`)
  .refine((args) => args.reduce((n, a) => n + utf8Bytes(a), 0) <= JOB_SPEC_LIMITS.maxCommandBytes, {
    message: `longer than ${JOB_SPEC_LIMITS.maxCommandBytes} bytes in total`,
  })
  .describe("The program and its arguments (the image's default command when absent)");

const envSchema = z
  .record(
    z
      .string()
      .regex(ENV_NAME_PATTERN, 'environment names are letters, digits and _, not starting with a digit')
      .refine(
        (k) => !k.startsWith(RESERVED_ENV_PREFIX),
        `names starting with ${RESERVED_ENV_PREFIX} are set by the worker`,
      ),
    // YAML turns `EPOCHS: 10` into a number: spec text, and a JSON body's numbers, keep the text written
    // (env-text.ts); a value already parsed (an archived spec, a spec built in code) is passed as JavaScript prints it.
    z
      .union([z.string(), z.number(), z.boolean()], { error: 'expected a string, number or boolean' })
      .transform(String)
      .refine(...NUL_FREE),
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
  })
  .describe(`Environment variables; names starting with ${RESERVED_ENV_PREFIX} are reserved for the worker`);

const workloadSchema = z
  .string()
  .min(1)
  .max(128, 'at most 128 characters')
  .regex(/^[A-Za-z0-9][A-Za-z0-9._:/[\]-]*$/, 'letters, digits and . _ : / [ ] -')
  .describe('Co-location identity: tasks with the same workload share learned co-location throughputs');

/** A task's shared memory when its spec gives none and its memory demand is at least this (GiB). */
export const DEFAULT_SHM_SIZE_GIB = 1;

export const taskSchema = z.strictObject({
  name: nameSchema.describe('Unique within the job (task-<index> when absent)').optional(),
  image: z
    .string()
    .min(1)
    .max(255, 'at most 255 characters')
    .regex(/^[^\s]+$/, 'an image reference has no spaces, e.g. pytorch/pytorch:2.3.1-cuda12.1-cudnn8-runtime')
    .describe('A registry image (give either image or build)')
    .optional(),
  build: buildSchema.optional(),
  command: commandSchema.optional(),
  env: envSchema,
  demand: demandSchema,
  replicas: z
    .number()
    .int('a whole number')
    .min(1)
    .max(JOB_SPEC_LIMITS.maxTasks)
    .describe('Identical tasks run from this template, gang-scheduled with the rest of the job')
    .default(1),
  // Unwritten, it is DEFAULT_SHM_SIZE_GIB or the task's memory demand if less (parse.ts): a default that refused a
  // small task over a field its author never wrote would be no default.
  shmSizeGiB: z
    .number()
    .finite()
    .nonnegative()
    .max(JOB_SPEC_LIMITS.maxMemoryGiB, `at most ${JOB_SPEC_LIMITS.maxMemoryGiB} GiB`)
    .describe(
      `Shared memory (/dev/shm), counted against the task's memory demand; default ${DEFAULT_SHM_SIZE_GIB} GiB, or the memory demand if less`,
    )
    .optional(),
  workload: workloadSchema.optional(),
});

export const checkpointSchema = z.strictObject({
  signal: z
    .enum(CHECKPOINT_SIGNALS)
    .describe('Sent to ask the task to checkpoint and exit')
    .default('SIGTERM'),
  timeoutSeconds: durationSecondsSchema(
    z
      .number()
      .positive(POSITIVE)
      .max(
        JOB_SPEC_LIMITS.maxCheckpointTimeoutSeconds,
        `at most ${JOB_SPEC_LIMITS.maxCheckpointTimeoutSeconds} s`,
      ),
  )
    .describe('Seconds the task has to checkpoint and exit after the signal before it is killed')
    .default(DEFAULT_CHECKPOINT_TIMEOUT_SECONDS),
  everySeconds: durationSecondsSchema(nonNegativeDuration())
    .describe(
      'How often the job checkpoints on its own, 0 for never (what a spot interruption puts at risk: with 0, all its work)',
    )
    .optional(),
  restoreDelaySeconds: durationSecondsSchema(delay())
    .describe('Estimated seconds to fetch and restore a checkpoint on a new instance, until measured')
    .optional(),
  initDelaySeconds: durationSecondsSchema(delay())
    .describe('Estimated seconds from start until the job makes progress, until measured')
    .optional(),
});

const queueSchema = z
  .looseObject({
    class: z.string().min(1).optional(),
    priority: z
      .number()
      .finite()
      .min(-JOB_SPEC_LIMITS.maxPriority, `at least -${JOB_SPEC_LIMITS.maxPriority}`)
      .max(JOB_SPEC_LIMITS.maxPriority, `at most ${JOB_SPEC_LIMITS.maxPriority}`)
      .optional(),
    stages: z
      .array(z.unknown())
      .max(JOB_SPEC_LIMITS.maxQueueStages, `at most ${JOB_SPEC_LIMITS.maxQueueStages} stages`)
      .optional(),
  })
  .describe(
    'Accepted and kept, but not used: jobs are classed by size or team from the controller config (queue.classifyBy) ' +
      "and ordered by their class's ordering, so class, priority and stages here change nothing (a submission is " +
      'warned when it sets them); other keys are kept too',
  );

export const jobSpecSchema = z.strictObject({
  name: nameSchema,
  team: nameSchema,
  description: z.string().max(JOB_SPEC_LIMITS.maxDescriptionLength).optional(),
  tasks: z
    .array(taskSchema)
    .min(1, 'a job needs at least one task')
    .max(JOB_SPEC_LIMITS.maxTasks, `at most ${JOB_SPEC_LIMITS.maxTasks} tasks`),
  checkpoint: checkpointSchema.describe('How the worker asks a task to checkpoint before a move').default({
    signal: 'SIGTERM',
    timeoutSeconds: DEFAULT_CHECKPOINT_TIMEOUT_SECONDS,
  }),
  totalIterations: z
    .number()
    .int('a whole number')
    .positive()
    .max(JOB_SPEC_LIMITS.maxIterations, `at most ${JOB_SPEC_LIMITS.maxIterations}`)
    .describe('Iterations the job runs in all (progress is reported against it)')
    .optional(),
  expectedDurationSeconds: durationSecondsSchema(positiveDuration())
    .describe(
      'How long the job is expected to run at full throughput, in seconds or as 30m, 2h, …; with a success model, ' +
        'its stages must sum to it (an expected size be at most it), within 1%, and left out it is taken from them',
    )
    .optional(),
  noMoveSeconds: durationSecondsSchema(nonNegativeDuration())
    .describe(
      'Do not move the job while it initializes nor for this many seconds after it starts making progress',
    )
    .optional(),
  dependsOn: z
    .array(dependencySchema)
    .max(JOB_SPEC_LIMITS.maxDependencies, `at most ${JOB_SPEC_LIMITS.maxDependencies} jobs`)
    .superRefine(checkDependencies)
    .describe(
      'Jobs (of the same team) that must succeed before this one starts; if one ends otherwise, this one fails. ' +
        "An array's jobs may also wait each for the job of the same index of another array ({ jobId, type: N_TO_N }) " +
        'or for the one before them in their own array ({ type: SEQUENTIAL }), as in AWS Batch',
    )
    .optional(),
  maxRunSeconds: durationSecondsSchema(positiveDuration())
    .describe(
      'The most this job may run, in seconds or as 30m, 2h, …, counted while it runs (over all its moves and ' +
        'attempts; queueing and moves do not count): past it the job is stopped and ends failed, not retried',
    )
    .optional(),
  valueOfTimePerJobHour: z
    .number()
    .finite()
    .min(0, 'must be ≥ 0 ($ per hour of completion time)')
    .max(MAX_VALUE_OF_TIME_PER_JOB_HOUR, `must be ≤ ${MAX_VALUE_OF_TIME_PER_JOB_HOUR} ($ per hour)`)
    .describe(
      "What an hour of this job's completion time is worth, in $ (default: the controller's scheduler.valueOfTimePerJobHour)",
    )
    .optional(),
  workload: workloadSchema.optional(),
  queue: queueSchema.default({}),
  success: successSpecSchema
    .describe(
      'Success model for success-ranked ordering (Yao, Paolieri & Golubchik): stages with the probability of ' +
        'continuing after each (but the last), or a success probability and an expected size; seconds at full throughput',
    )
    .optional(),
  unsuccessfulExitCodes: z
    .array(
      z.number().int('a whole number').min(1, 'exit code 0 means success').max(255, 'exit codes are 1–255'),
    )
    .max(32, 'at most 32 exit codes')
    .describe(
      'A task exiting with one of these ends the job as `unsuccessful` (stopped at a stage), not `failed`',
    )
    .optional(),
  retryStrategy: retryStrategySchema.optional(),
  network: networkDeclarationSchema.optional(),
  spot: z
    .enum(SPOT_PREFERENCES, { message: `must be one of ${SPOT_PREFERENCES.join(', ')}` })
    .describe(
      'Spot capacity: never; allowed (default) when cheaper at its expected cost, interruption risk included; ' +
        'preferred whenever offered',
    )
    .optional(),
  spotMaxDelayMinutes: z
    .number({ message: 'must be a number of minutes' })
    .positive('must be > 0 minutes')
    .max(MAX_SPOT_MAX_DELAY_MINUTES, `at most a week (${MAX_SPOT_MAX_DELAY_MINUTES} minutes)`)
    .describe(
      'The most one spot interruption may delay this job: when it would lose more (work since its last ' +
        'checkpoint, restore and relaunch), its next instance is bought on demand',
    )
    .optional(),
  arrayProperties: arrayPropertiesSchema.optional(),
});

export type RawJobSpec = z.output<typeof jobSpecSchema>;

/** Field names per object, for "unknown field; did you mean …" hints. */
export const KNOWN_KEYS = {
  job: Object.keys(jobSpecSchema.shape),
  task: Object.keys(taskSchema.shape),
  checkpoint: Object.keys(checkpointSchema.shape),
  build: ['context', 'dockerfile'],
  retryStrategy: Object.keys(retryStrategySchema.shape),
  exitRule: Object.keys(exitRuleSchema.shape),
  network: Object.keys(networkDeclarationSchema.shape),
  arrayProperties: Object.keys(arrayPropertiesSchema.shape),
} as const;
