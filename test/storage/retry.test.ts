import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ObjectStoreError } from '../../src/storage/object-store-error.js';
import { backoffDelayMs, retryWhileStoreFails, type Backoff } from '../../src/storage/retry.js';

const storeDown = (): ObjectStoreError =>
  new ObjectStoreError('put', 'logs/j/t.log', 's3://b/', 3, new Error('connect ECONNREFUSED'));
const FAST: Backoff = { initialMs: 1, maxMs: 4 };

describe('backoff between attempts of a step that needs the store', () => {
  it('waits between half and all of an exponential ceiling, never beyond the maximum (property)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 60 }),
        fc.integer({ min: 1, max: 10_000 }),
        fc.integer({ min: 1, max: 100 }),
        fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
        (failures, initialMs, factor, random) => {
          const backoff = { initialMs, maxMs: initialMs * factor };
          const ceiling = Math.min(backoff.maxMs, initialMs * 2 ** (failures - 1));
          const delay = backoffDelayMs(failures, backoff, () => random);
          expect(delay).toBeGreaterThanOrEqual(ceiling / 2);
          expect(delay).toBeLessThanOrEqual(ceiling);
          // The ceiling never shrinks from one failure to the next.
          expect(backoffDelayMs(failures + 1, backoff, () => 0)).toBeGreaterThanOrEqual(
            backoffDelayMs(failures, backoff, () => 0),
          );
        },
      ),
    );
  });
});

describe('retryWhileStoreFails', () => {
  it('tries again while the store fails, then answers what the step answers', async () => {
    let calls = 0;
    const retried: number[] = [];
    const answer = await retryWhileStoreFails(
      async () => {
        calls++;
        if (calls < 4) throw storeDown();
        return 'stored';
      },
      { backoff: FAST, onRetry: (_e, failures) => retried.push(failures) },
    );
    expect(answer).toBe('stored');
    expect(calls).toBe(4);
    expect(retried).toEqual([1, 2, 3]);
  });

  it("throws a step's own failure at once: trying again would fail the same way", async () => {
    let calls = 0;
    const unsafe = new Error('entry "../x" has a `..` path segment');
    await expect(
      retryWhileStoreFails(
        async () => {
          calls++;
          throw unsafe;
        },
        { backoff: FAST },
      ),
    ).rejects.toBe(unsafe);
    expect(calls).toBe(1);
  });

  it('stops retrying when told to (the agent is leaving), with the last store failure', async () => {
    const leaving = new AbortController();
    let calls = 0;
    const failing = retryWhileStoreFails(
      async () => {
        calls++;
        throw storeDown();
      },
      {
        backoff: { initialMs: 600_000, maxMs: 600_000 },
        signal: leaving.signal,
        // Leave during the first (five-minute-plus) wait: the wait is cut short and no attempt follows.
        onRetry: () => setImmediate(() => leaving.abort()),
      },
    );
    await expect(failing).rejects.toBeInstanceOf(ObjectStoreError);
    expect(calls).toBe(1);
  });
});
