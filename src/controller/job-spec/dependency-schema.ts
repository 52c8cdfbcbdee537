import { z } from 'zod';
import { ARRAY_DEPENDENCY_TYPES, JOB_ID_PATTERN, JOB_SPEC_LIMITS } from './spec.js';

/** A job spec's dependsOn (job ids, and AWS Batch's array dependencies) and arrayProperties. */

const JOB_ID_RULE = 'a job id (job-<n>)';
const ARRAY_DEPENDENCY_RULE = 'an array dependency: { jobId: job-<n>, type: N_TO_N } or { type: SEQUENTIAL }';

/**
 * AWS Batch's array dependencies, for the jobs of an array: N_TO_N, each waits for the job of the same index in the
 * array `jobId` belongs to; SEQUENTIAL, each waits for the one before it in its own array.
 */
export const arrayDependencySchema = z.strictObject({
  jobId: z.string().regex(JOB_ID_PATTERN, JOB_ID_RULE).optional(),
  type: z.enum(ARRAY_DEPENDENCY_TYPES, { error: 'expected N_TO_N or SEQUENTIAL' }),
});

/** A job id, or (for an array) an array dependency. One message per kind of input, not a union's alternatives. */
export const dependencySchema = z.union(
  [z.string().regex(JOB_ID_PATTERN, JOB_ID_RULE), arrayDependencySchema],
  {
    error: (issue) =>
      typeof issue.input === 'string'
        ? JOB_ID_RULE
        : typeof issue.input === 'object' && issue.input !== null && !Array.isArray(issue.input)
          ? `expected ${ARRAY_DEPENDENCY_RULE}`
          : `expected ${JOB_ID_RULE} or ${ARRAY_DEPENDENCY_RULE}`,
  },
);

export function checkDependencies(
  items: readonly z.output<typeof dependencySchema>[],
  ctx: z.RefinementCtx,
): void {
  const named = items.map((d) => (typeof d === 'string' ? d : d.type === 'N_TO_N' ? d.jobId : undefined));
  if (new Set(named.filter((id) => id !== undefined)).size !== named.filter((id) => id !== undefined).length)
    ctx.addIssue({ code: 'custom', message: 'names a job twice' });
  items.forEach((d, i) => {
    if (typeof d === 'string') return;
    if (d.type === 'N_TO_N' && d.jobId === undefined)
      ctx.addIssue({
        code: 'custom',
        path: [i, 'jobId'],
        message: 'required: a job of the array to pair with',
      });
    if (d.type === 'SEQUENTIAL' && d.jobId !== undefined)
      ctx.addIssue({
        code: 'custom',
        path: [i, 'jobId'],
        message: 'SEQUENTIAL names no job: each job of the array waits for the one before it',
      });
  });
  if (items.filter((d) => typeof d !== 'string' && d.type === 'SEQUENTIAL').length > 1)
    ctx.addIssue({ code: 'custom', message: 'SEQUENTIAL twice' });
}

export const arrayPropertiesSchema = z
  .strictObject(
    {
      size: z
        .number({
          error: (issue) =>
            issue.input === undefined
              ? 'required: how many jobs the array holds'
              : 'expected a whole number of jobs',
        })
        .int('a whole number')
        .min(2, 'an array holds at least 2 jobs (submit one job without arrayProperties)')
        .max(JOB_SPEC_LIMITS.maxArraySize, `at most ${JOB_SPEC_LIMITS.maxArraySize} jobs`)
        .describe('How many jobs the array holds'),
      index: z
        .number({ error: 'expected a whole number' })
        .int('a whole number')
        .nonnegative('from 0')
        .describe(
          "This job's place in the array (0 to size − 1): set by the controller on each job of an array; give it to " +
            'submit one of them alone (to run it again)',
        )
        .optional(),
    },
    { error: 'expected { size: N }, N the number of jobs' },
  )
  .superRefine((a, ctx) => {
    if (a.index !== undefined && a.index >= a.size)
      ctx.addIssue({ code: 'custom', path: ['index'], message: `must be below size (${a.size})` });
  })
  .describe(
    "An array job (AWS Batch's arrayProperties): the spec submitted as `size` jobs, alike but for the index their " +
      'tasks read from FLEETWISE_ARRAY_INDEX (and AWS_BATCH_JOB_ARRAY_INDEX); FLEETWISE_ARRAY_SIZE holds the size',
  );
