import type { ExitRule, JobSpec } from './spec.js';

/** What `retryStrategy` says about a failed attempt: run the job again, or let it fail, and why. */
export interface RetryVerdict {
  readonly retry: boolean;
  /** Attempts the job may make in all. */
  readonly attempts: number;
  /** The rule that decided (its index in `evaluateOnExit`), when one matched. */
  readonly rule?: { readonly index: number; readonly rule: ExitRule } | undefined;
  /** Why, in words, e.g. `exit code 137 matches evaluateOnExit[0] (137: retry); retrying (attempt 2 of 3)`. */
  readonly why: string;
}

/** Whether a glob of digits and `*` (any run of digits, none included) matches the whole exit code. */
export function exitCodeMatches(glob: string, exitCode: number): boolean {
  const pattern = glob.replace(/\*+/g, '*').split('*').join('[0-9]*');
  return new RegExp(`^${pattern}$`).test(String(exitCode));
}

/**
 * Decide on the failure of attempt `attempt` (1-based). As in AWS Batch: the first rule matching the exit code
 * decides; with rules and none matching, or with no rules, the job is retried while attempts are left. An unknown
 * exit code (the task could not start, or vanished) matches no rule.
 */
export function retryVerdict(spec: JobSpec, attempt: number, exitCode: number | undefined): RetryVerdict {
  const attempts = spec.retryStrategy?.attempts ?? 1;
  const rules = spec.retryStrategy?.evaluateOnExit ?? [];
  const index =
    exitCode === undefined ? -1 : rules.findIndex((rule) => exitCodeMatches(rule.onExitCode, exitCode));
  const rule = rules[index];
  const code = exitCode === undefined ? 'an unknown exit code' : `exit code ${exitCode}`;
  const matched =
    rule === undefined
      ? rules.length === 0
        ? undefined
        : `${code} matches no evaluateOnExit rule`
      : `${code} matches evaluateOnExit[${index}] (${rule.onExitCode}: ${rule.action})`;
  if (rule?.action === 'exit')
    return { retry: false, attempts, rule: { index, rule }, why: matched as string };
  const left = attempt < attempts;
  const tail = left ? `retrying (attempt ${attempt + 1} of ${attempts})` : 'no attempts left';
  return {
    retry: left,
    attempts,
    ...(rule === undefined ? {} : { rule: { index, rule } }),
    why: `${matched ?? code}; ${tail}`,
  };
}
