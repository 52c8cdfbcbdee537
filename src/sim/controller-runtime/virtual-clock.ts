import type { Clock } from '../../controller/clock.js';

interface Sleeper {
  readonly wakeAtSeconds: number;
  readonly resolve: () => void;
}

/**
 * The controller's Clock on simulated time: it moves only when the driver says so (`advanceTo`), and a sleep ends
 * when the driver wakes it (`wakeDue`, or `wakeAll` when a simulated worker reports something the controller should
 * act on, as a worker's request reaches the real controller between its polls) or when its signal aborts. Nothing
 * here reads the wall clock or sets a timer, so a run is deterministic and as fast as the controller's code.
 */
export class VirtualClock implements Clock {
  private now: number;
  private sleepers: Sleeper[] = [];

  constructor(startSeconds = 0) {
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

  /** Move time to `t` without waking anyone (the driver first lets the simulated world act at `t`). */
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

  /** How many sleeps are pending (the driver waits until the controller's loop is parked again). */
  get sleeping(): number {
    return this.sleepers.length;
  }
}
