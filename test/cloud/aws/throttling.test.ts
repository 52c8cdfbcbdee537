import { EC2ServiceException } from '@aws-sdk/client-ec2';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Rng } from '../../../src/core/random.js';
import { ThrottlingError } from '../../../src/cloud/provider.js';
import {
  backoffDelayMs,
  backoffPolicySchema,
  DEFAULT_BACKOFF,
  isThrottling,
  retryOnThrottling,
} from '../../../src/cloud/aws/throttling.js';

function awsError(name: string, httpStatusCode: number): EC2ServiceException {
  return new EC2ServiceException({ name, $fault: 'client', $metadata: { httpStatusCode }, message: name });
}

describe('isThrottling', () => {
  it.each([
    ['RequestLimitExceeded', 503, true],
    ['Throttling', 400, true],
    ['ThrottlingException', 400, true],
    ['SlowDown', 503, true],
    ['SomethingElse', 429, true],
    ['InsufficientInstanceCapacity', 500, false],
    ['InvalidParameterValue', 400, false],
  ])('%s (HTTP %i) → %s', (code, status, expected) => {
    expect(isThrottling(awsError(code, status))).toBe(expected);
  });

  it('is false for plain errors and non-errors', () => {
    expect(isThrottling(new Error('socket hang up'))).toBe(false);
    expect(isThrottling('RequestLimitExceeded')).toBe(false);
  });
});

describe('backoffDelayMs', () => {
  it('defaults to 5 attempts from 500 ms, capped at 20 s', () => {
    expect(DEFAULT_BACKOFF).toEqual({ maxAttempts: 5, baseDelayMs: 500, maxDelayMs: 20_000 });
  });

  it('stays within [cap/2, cap] with cap = min(max, base·2^(retry-1)) (property)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 30 }),
        fc.integer({ min: 0, max: 5000 }),
        fc.integer({ min: 0, max: 100_000 }),
        fc.integer(),
        (retry, baseDelayMs, maxDelayMs, seed) => {
          const policy = backoffPolicySchema.parse({ baseDelayMs, maxDelayMs });
          const cap = Math.min(maxDelayMs, baseDelayMs * 2 ** (retry - 1));
          const delay = backoffDelayMs(retry, policy, new Rng(seed));
          expect(delay).toBeGreaterThanOrEqual(cap / 2);
          expect(delay).toBeLessThanOrEqual(cap);
        },
      ),
    );
  });

  it('is reproducible for a seed', () => {
    const a = [1, 2, 3].map((r) => backoffDelayMs(r, DEFAULT_BACKOFF, new Rng(9)));
    const b = [1, 2, 3].map((r) => backoffDelayMs(r, DEFAULT_BACKOFF, new Rng(9)));
    expect(a).toEqual(b);
  });
});

describe('retryOnThrottling', () => {
  it('makes exactly maxAttempts attempts, sleeping between them, then throws ThrottlingError', async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 8 }), async (maxAttempts) => {
        let calls = 0;
        const sleeps: number[] = [];
        const error = await retryOnThrottling(
          'DescribeInstances',
          async () => {
            calls++;
            throw awsError('RequestLimitExceeded', 503);
          },
          {
            policy: { maxAttempts, baseDelayMs: 10, maxDelayMs: 1000 },
            sleep: async (ms) => void sleeps.push(ms),
            rng: new Rng(1),
          },
        ).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(ThrottlingError);
        expect((error as ThrottlingError).message).toBe(
          `DescribeInstances still throttled after ${maxAttempts} attempts (RequestLimitExceeded)`,
        );
        expect(calls).toBe(maxAttempts);
        expect(sleeps).toHaveLength(maxAttempts - 1);
      }),
    );
  });

  it('passes other errors through at once', async () => {
    let calls = 0;
    const boom = awsError('InvalidAMIID.NotFound', 400);
    await expect(
      retryOnThrottling(
        'RunInstances',
        async () => {
          calls++;
          throw boom;
        },
        { policy: DEFAULT_BACKOFF, sleep: async () => {}, rng: new Rng(1) },
      ),
    ).rejects.toBe(boom);
    expect(calls).toBe(1);
  });
});
