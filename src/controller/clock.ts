/**
 * The controller's clock (ARCHITECTURE.md "Interfaces at the edges": `Clock`). Everything time-dependent in the
 * controller (round periods, registration timeouts, launch backoff, billing) reads this clock, so tests drive it by
 * hand instead of sleeping. Times are seconds; the real clock uses epoch seconds (the state store's clock too).
 */
export interface Clock {
  nowSeconds(): number;
  /**
   * Resolve after `seconds`, or as soon as `signal` aborts (never rejects: an aborted sleep is simply over early,
   * which is how an early round wakes the loop).
   */
  sleep(seconds: number, signal?: AbortSignal): Promise<void>;
}

export class SystemClock implements Clock {
  nowSeconds(): number {
    return Date.now() / 1000;
  }

  sleep(seconds: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      if (signal?.aborted === true || seconds <= 0) {
        resolve();
        return;
      }
      const done = (): void => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, seconds * 1000);
      signal?.addEventListener('abort', done, { once: true });
    });
  }
}

interface Sleeper {
  readonly wakeAtSeconds: number;
  readonly resolve: () => void;
}

/**
 * A clock that moves only when told to (tests). `advance` resolves every sleeper whose time has come, oldest
 * deadline first.
 */
export class ManualClock implements Clock {
  private now: number;
  private sleepers: Sleeper[] = [];

  constructor(startSeconds = 1_700_000_000) {
    this.now = startSeconds;
  }

  nowSeconds(): number {
    return this.now;
  }

  sleep(seconds: number, signal?: AbortSignal): Promise<void> {
    if (signal?.aborted === true || seconds <= 0) return Promise.resolve();
    return new Promise((resolve) => {
      const sleeper: Sleeper = {
        wakeAtSeconds: this.now + seconds,
        resolve: () => {
          signal?.removeEventListener('abort', abort);
          resolve();
        },
      };
      const abort = (): void => {
        this.sleepers = this.sleepers.filter((s) => s !== sleeper);
        sleeper.resolve();
      };
      signal?.addEventListener('abort', abort, { once: true });
      this.sleepers.push(sleeper);
    });
  }

  /** Move time forward and wake the sleepers whose deadline has passed. */
  advance(seconds: number): void {
    if (!(seconds >= 0)) throw new Error(`cannot move a clock backwards (${seconds} s)`);
    this.now += seconds;
    const due = this.sleepers
      .filter((s) => s.wakeAtSeconds <= this.now)
      .sort((a, b) => a.wakeAtSeconds - b.wakeAtSeconds);
    this.sleepers = this.sleepers.filter((s) => s.wakeAtSeconds > this.now);
    for (const s of due) s.resolve();
  }

  /** How many sleeps are waiting (tests check the loop is parked). */
  get pendingSleeps(): number {
    return this.sleepers.length;
  }
}
