import { isObjectStoreError } from './object-store-error.js';

/**
 * Retrying a step that needs the object store until the store answers: a checkpoint upload, a log upload, a restore
 * download. A store call already gives up after its own bounded attempts (s3-store.ts); a step of a move must not give
 * up with it, or the move stops half-way (a task stopped whose checkpoint never arrived, a job left migrating). So the
 * step is tried again, with exponential backoff, for as long as its failures are the store's (ObjectStoreError);
 * any other failure (an archive that is not safe to extract, a task that cannot be packed) is the step's own and is
 * thrown at once, since trying again would fail the same way.
 */

export interface Backoff {
  /** The first wait's ceiling. */
  readonly initialMs: number;
  /** No wait is longer. */
  readonly maxMs: number;
}

/** From half a second to half a minute: an outage of a minute costs a few attempts, not hundreds. */
export const STORE_RETRY_BACKOFF: Backoff = { initialMs: 500, maxMs: 30_000 };

/**
 * The wait before attempt `failures + 1`: "equal jitter" (AWS Architecture Blog, "Exponential Backoff and Jitter"),
 * half of the exponential ceiling plus a random part of the other half, so workers that failed together do not retry
 * together, and no wait is near zero. `random` is in [0, 1).
 */
export function backoffDelayMs(failures: number, backoff: Backoff, random: () => number): number {
  const ceiling = Math.min(backoff.maxMs, backoff.initialMs * 2 ** Math.max(0, failures - 1));
  return ceiling / 2 + random() * (ceiling / 2);
}

export interface StoreRetryOptions {
  /** Stop retrying when this aborts (the agent is leaving): the last failure is thrown. */
  readonly signal?: AbortSignal | undefined;
  readonly backoff?: Backoff;
  readonly random?: () => number;
  /** Told of each failure that will be retried, with the wait before the next attempt. */
  readonly onRetry?: (error: Error, failures: number, delayMs: number) => void;
}

/** Run `step` until it succeeds, retrying while it fails because of the object store (see above). */
export async function retryWhileStoreFails<T>(
  step: () => Promise<T>,
  options: StoreRetryOptions = {},
): Promise<T> {
  const backoff = options.backoff ?? STORE_RETRY_BACKOFF;
  const random = options.random ?? Math.random;
  const leaving = (): boolean => options.signal?.aborted === true;
  for (let failures = 1; ; failures++) {
    try {
      return await step();
    } catch (e) {
      if (!isObjectStoreError(e) || leaving()) throw e;
      const delayMs = backoffDelayMs(failures, backoff, random);
      options.onRetry?.(e, failures, delayMs);
      await sleepUnlessAborted(delayMs, options.signal);
      if (leaving()) throw e;
    }
  }
}

/** Sleep `ms`, waking early (and without an error) when `signal` aborts: for loops that end on an abort. */
export function sleepUnlessAborted(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted === true) return resolve();
    const done = (): void => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}
