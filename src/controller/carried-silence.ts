import { CarriedSeconds } from './carried-seconds.js';
import type { StateStore } from './state-store.js';

/**
 * The silence each registered worker has been counted so far, kept in the state store for the next controller
 * (worker-silence.ts: a controller in a crash loop must still replace a dead worker). Only workers silent longer than
 * two heartbeat intervals are kept, so a healthy cluster writes nothing; a worker heard again drops out at the next
 * save.
 */
export const CARRIED_SILENCE_KEY = 'workers.carriedSilence';

/** How often the silence is saved: what a controller killed in between fails to pass on. */
export const CARRY_SILENCE_EVERY_SECONDS = 0.5;

/** A saved value is rewritten once a worker's silence moved this far from it (or a worker came or went). */
const RESAVE_AFTER_SECONDS = 0.25;

export class CarriedSilence {
  private readonly carried: CarriedSeconds;

  constructor(
    store: StateStore,
    /** At most this much silence is taken as a worker heard (worker-silence-watch.ts: two heartbeat intervals). */
    private readonly fromSeconds: number,
  ) {
    this.carried = new CarriedSeconds(store, CARRIED_SILENCE_KEY, RESAVE_AFTER_SECONDS);
  }

  /** What the earlier controllers saved (nothing when nothing, or something unreadable, was saved). */
  get loaded(): ReadonlyMap<string, number> {
    return this.carried.loaded;
  }

  /** Save `silence` (worker → seconds) when it differs from what is saved. */
  save(silence: ReadonlyMap<string, number>): void {
    this.carried.save(new Map([...silence].filter(([, seconds]) => seconds > this.fromSeconds)));
  }
}
