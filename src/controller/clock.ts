/**
 * The controller's clock (ARCHITECTURE.md "The two runtimes": `Clock`). Everything time-dependent in the
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

/**
 * setTimeout's longest delay, 2^31 − 1 ms (about 24.8 days): Node fires a longer one after 1 ms, so a loop sleeping
 * a month (a price refresh period of 720 hours) would spin.
 */
const MAX_TIMER_MS = 2 ** 31 - 1;

export class SystemClock implements Clock {
  nowSeconds(): number {
    return Date.now() / 1000;
  }

  sleep(seconds: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      if (signal?.aborted === true || !(seconds > 0)) {
        resolve();
        return;
      }
      let timer: NodeJS.Timeout | undefined;
      const done = (): void => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', done);
        resolve();
      };
      // A sleep longer than one timer can hold waits in steps of at most MAX_TIMER_MS until its time is used up.
      let leftMs = seconds * 1000;
      const step = (): void => {
        if (!(leftMs > 0)) {
          done();
          return;
        }
        const stepMs = Math.min(leftMs, MAX_TIMER_MS);
        leftMs -= stepMs;
        timer = setTimeout(step, stepMs);
      };
      signal?.addEventListener('abort', done, { once: true });
      step();
    });
  }
}

interface Sleeper {
  readonly wakeAtSeconds: number;
  readonly resolve: () => void;
}

/**
 * A clock that moves only when told to: tests, and the simulator's controller runtime (virtual time). `advance`
 * resolves every sleeper whose time has come, oldest deadline first; a driver that must let the world act at a time
 * before the sleepers wake uses `advanceTo` and `wakeDue` apart. Nothing here reads the wall clock or sets a timer.
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
    if (signal?.aborted === true || !(seconds > 0)) return Promise.resolve();
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
    this.advanceTo(this.now + seconds);
    this.wakeDue();
  }

  /** Move time to `t` without waking anyone. */
  advanceTo(t: number): void {
    if (!(t >= this.now)) throw new Error(`cannot move a clock backwards (from ${this.now} s to ${t} s)`);
    this.now = t;
  }

  /** Wake the sleepers whose time has come, earliest deadline first; returns how many woke. */
  wakeDue(): number {
    const due = this.sleepers
      .filter((s) => s.wakeAtSeconds <= this.now)
      .sort((a, b) => a.wakeAtSeconds - b.wakeAtSeconds);
    if (due.length === 0) return 0;
    this.sleepers = this.sleepers.filter((s) => s.wakeAtSeconds > this.now);
    for (const s of due) s.resolve();
    return due.length;
  }

  /** Wake every sleeper now, due or not; returns how many woke. */
  wakeAll(): number {
    const all = this.sleepers;
    this.sleepers = [];
    for (const s of all) s.resolve();
    return all.length;
  }

  /** The earliest deadline of a pending sleep, or undefined when nobody sleeps. */
  nextWakeSeconds(): number | undefined {
    let next: number | undefined;
    for (const s of this.sleepers) if (next === undefined || s.wakeAtSeconds < next) next = s.wakeAtSeconds;
    return next;
  }

  /** How many sleeps are waiting (tests and the simulator's driver check the loop is parked). */
  get pendingSleeps(): number {
    return this.sleepers.length;
  }
}
