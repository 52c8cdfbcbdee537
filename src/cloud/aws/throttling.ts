import { z } from 'zod';
import { Rng } from '../../core/random.js';
import { ThrottlingError } from '../provider.js';
import { awsErrorCode, awsHttpStatus } from './client-config.js';

/** Error codes AWS APIs use for rate limiting (EC2: RequestLimitExceeded; most others: Throttling*). */
export const THROTTLING_CODES: ReadonlySet<string> = new Set([
  'RequestLimitExceeded',
  'Throttling',
  'ThrottlingException',
  'ThrottledException',
  'RequestThrottled',
  'RequestThrottledException',
  'TooManyRequestsException',
  'SlowDown',
]);

export function isThrottling(error: unknown): boolean {
  const code = awsErrorCode(error);
  return (code !== undefined && THROTTLING_CODES.has(code)) || awsHttpStatus(error) === 429;
}

export const backoffPolicySchema = z.object({
  /** Attempts in all, the first included. */
  maxAttempts: z.number().int().min(1).max(20).default(5),
  baseDelayMs: z.number().nonnegative().default(500),
  maxDelayMs: z.number().nonnegative().default(20_000),
});
export type BackoffPolicy = z.output<typeof backoffPolicySchema>;
export const DEFAULT_BACKOFF: BackoffPolicy = backoffPolicySchema.parse({});

/**
 * Delay before retry number `retry` (1 = after the first failure): capped exponential backoff with "equal jitter"
 * (half fixed, half random), as the AWS Architecture Blog's "Exponential Backoff and Jitter" recommends so that
 * callers throttled together do not retry together. EC2 throttles per account and API action, and
 * RequestLimitExceeded is the documented signal to back off.
 */
export function backoffDelayMs(retry: number, policy: BackoffPolicy, rng: Rng): number {
  const capped = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** (retry - 1));
  return capped / 2 + rng.uniform(0, capped / 2);
}

export interface RetryDeps {
  readonly policy: BackoffPolicy;
  readonly sleep: (ms: number) => Promise<void>;
  readonly rng: Rng;
}

export const realSleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Run `call`, retrying throttled attempts with backoff; after `maxAttempts` throttled attempts, a ThrottlingError. */
export async function retryOnThrottling<T>(
  operation: string,
  call: () => Promise<T>,
  deps: RetryDeps,
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await call();
    } catch (e) {
      if (!isThrottling(e)) throw e;
      if (attempt >= deps.policy.maxAttempts)
        throw new ThrottlingError(operation, attempt, awsErrorCode(e), { cause: e });
      await deps.sleep(backoffDelayMs(attempt, deps.policy, deps.rng));
    }
  }
}
