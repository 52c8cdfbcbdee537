import { afterEach, describe, expect, it, vi } from 'vitest';
import { SystemClock } from '../../src/controller/clock.js';

/** Node's longest setTimeout delay: it fires a longer one after 1 ms. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** 'ended' once `sleep` has resolved, 'pending' while it has not after `withinMs` of real time. */
async function stateAfter(sleep: Promise<void>, withinMs: number): Promise<'ended' | 'pending'> {
  let timer: NodeJS.Timeout | undefined;
  const pending = new Promise<'pending'>((resolve) => {
    timer = setTimeout(() => resolve('pending'), withinMs);
  });
  try {
    return await Promise.race([sleep.then(() => 'ended' as const), pending]);
  } finally {
    clearTimeout(timer);
  }
}

describe('SystemClock.sleep', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('ends after a short sleep, and at once when aborted before it starts', async () => {
    const clock = new SystemClock();
    const started = performance.now();
    await clock.sleep(0.05);
    expect(performance.now() - started).toBeGreaterThanOrEqual(45);
    const aborted = new AbortController();
    aborted.abort();
    expect(await stateAfter(clock.sleep(3600, aborted.signal), 100)).toBe('ended');
  });

  it('does not end early when longer than one timer can hold, and still ends when aborted', async () => {
    const clock = new SystemClock();
    const overflows: string[] = [];
    const onWarning = (w: Error): void => {
      if (w.name === 'TimeoutOverflowWarning') overflows.push(w.message);
    };
    process.on('warning', onWarning);
    try {
      const wake = new AbortController();
      // A price refresh period of 600 hours, past setTimeout's 2^31 − 1 ms.
      const sleep = clock.sleep(600 * 3600, wake.signal);
      expect(await stateAfter(sleep, 200)).toBe('pending');
      wake.abort();
      expect(await stateAfter(sleep, 1000)).toBe('ended');
      expect(overflows).toEqual([]);
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('ends when the whole of a long sleep has passed, not one timer step after it began', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const clock = new SystemClock();
    const monthMs = 30 * 86_400_000; // more than one timer can hold
    let ended = false;
    const sleep = clock.sleep(monthMs / 1000).then(() => {
      ended = true;
    });
    await vi.advanceTimersByTimeAsync(MAX_TIMER_MS + 1);
    expect(ended).toBe(false);
    await vi.advanceTimersByTimeAsync(monthMs - MAX_TIMER_MS - 2);
    expect(ended).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(ended).toBe(true);
    await sleep;
  });
});
