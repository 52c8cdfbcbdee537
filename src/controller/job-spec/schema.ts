import { z } from 'zod';
import { ANY_FAMILY, type FamilyDemand, type Resources } from '../../core/resources.js';
import { successSpecSchema } from '../../queue/success.js';
import {
  CHECKPOINT_SIGNALS,
  DEFAULT_CHECKPOINT_TIMEOUT_SECONDS,
  JOB_SPEC_LIMITS,
  RESERVED_ENV_PREFIX,
  type BuildSpec,
} from './spec.js';

/**
 * The zod schemas a job spec is validated with. They check each field on its own; rules that span fields (image or
 * build, unique task names, the catalog) are in parse.ts.
 */

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

export const taskSchema = z.strictObject({
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

export const checkpointSchema = z.strictObject({
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

export const jobSpecSchema = z.strictObject({
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

export type RawJobSpec = z.output<typeof jobSpecSchema>;

/** Field names per object, for "unknown field; did you mean …" hints. */
export const KNOWN_KEYS = {
  job: Object.keys(jobSpecSchema.shape),
  task: Object.keys(taskSchema.shape),
  checkpoint: Object.keys(checkpointSchema.shape),
  build: ['context', 'dockerfile'],
} as const;
