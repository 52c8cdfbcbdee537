import { z } from 'zod';
import { JOB_SPEC_LIMITS, RETRY_ACTIONS, type JobSpec, type RetryAction } from './spec.js';

/** A job spec's retryStrategy (AWS Batch's): how many attempts, and the exit-code rules that decide a retry. */

const EXIT_GLOB_EXAMPLE = 'e.g. "137" or "1*"';
const EXIT_GLOB_RULE = `expected an exit code or a glob of digits and *, ${EXIT_GLOB_EXAMPLE}`;

/** Batch writes exit codes as strings; YAML reads `onExitCode: 137` as a number, which means the same. */
const exitCodeGlobSchema = z
  .union(
    [
      z
        .string()
        .max(512, 'at most 512 characters')
        .regex(/^[0-9*]+$/, `only digits and * (any run of digits), ${EXIT_GLOB_EXAMPLE}`)
        // A code without a * names one exit code, which is 0–255 however it is written ("300" would never match);
        // a glob the pattern refuses has its problem said already.
        .refine((glob) => !/^[0-9]+$/.test(glob) || Number(glob) <= 255, 'exit codes are 0–255')
        // Globs match the code's decimal text, which has no leading zero: "0137" or "01*" would never match.
        // Refused rather than read as 137, as "1*" is not read as a number either.
        .superRefine((glob, ctx) => {
          if (!/^0[0-9*]*[0-9]/.test(glob)) return;
          const fixed = glob.replace(/^0+(?=[0-9])/, '');
          ctx.addIssue({
            code: 'custom',
            message: /^[0-9]+$/.test(glob)
              ? `${JSON.stringify(glob)}: exit codes are written without leading zeros, write ${fixed}`
              : `${JSON.stringify(glob)} never matches: exit codes are written without leading zeros (a glob ` +
                'starting with 0 matches only 0)',
          });
        }),
      z.number().int('a whole number').nonnegative(EXIT_GLOB_RULE).max(255, 'exit codes are 0–255'),
    ],
    { error: EXIT_GLOB_RULE },
  )
  .transform(String)
  .describe('Exit codes this rule matches: digits and * (any run of digits), e.g. "137", "1*" or "*"');

/** Batch spells actions RETRY and EXIT; both spellings are taken. */
const retryActionSchema = z
  .enum([...RETRY_ACTIONS, 'RETRY', 'EXIT'], {
    error: (issue) => (issue.input === undefined ? 'required: retry or exit' : 'expected retry or exit'),
  })
  .transform((a): RetryAction => (a === 'RETRY' ? 'retry' : a === 'EXIT' ? 'exit' : a))
  .describe('retry: run the job again (from its checkpoints) if attempts are left; exit: fail it now');

export const exitRuleSchema = z.strictObject({
  onExitCode: exitCodeGlobSchema,
  action: retryActionSchema,
});

export const retryStrategySchema = z
  .strictObject({
    attempts: z
      .number()
      .int('a whole number')
      .min(1, 'at least 1 (the first run counts)')
      .max(JOB_SPEC_LIMITS.maxAttempts, `at most ${JOB_SPEC_LIMITS.maxAttempts}`)
      .describe('Attempts in all, the first included (1–10, as in AWS Batch)')
      .default(1),
    evaluateOnExit: z
      .array(exitRuleSchema)
      .min(1, 'give at least one rule, or leave evaluateOnExit out')
      .max(JOB_SPEC_LIMITS.maxExitRules, `at most ${JOB_SPEC_LIMITS.maxExitRules} rules`)
      .describe(
        "Rules tried in order on a failed task's exit code; the first match decides, and when none matches the " +
          'job is retried',
      )
      .optional(),
  })
  .describe(
    'Run the job again when a task fails (AWS Batch retryStrategy); a retried attempt resumes from its ' +
      "tasks' last checkpoints",
  );

/**
 * What a submission is told of a `retry` rule that can never act: `attempts` counts the first run and is 1 when left
 * out, so a rule asking for a retry with no attempt left is a spec that meant more attempts. Accepted all the same.
 */
export function retryStrategyWarnings(spec: Pick<JobSpec, 'retryStrategy'>): string[] {
  const strategy = spec.retryStrategy;
  if (strategy === undefined || strategy.attempts > 1) return [];
  const index = (strategy.evaluateOnExit ?? []).findIndex((rule) => rule.action === 'retry');
  const rule = strategy.evaluateOnExit?.[index];
  if (rule === undefined) return [];
  return [
    `retryStrategy.evaluateOnExit[${index}] (${rule.onExitCode}: retry) asks for a retry, but ` +
      `retryStrategy.attempts is ${strategy.attempts} (the default when left out; the first run counts): the job ` +
      `never runs again; set retryStrategy.attempts (2–${JOB_SPEC_LIMITS.maxAttempts}) to allow retries`,
  ];
}
