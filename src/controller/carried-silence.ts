import { z } from 'zod';
import type { JsonValue, StateStore } from './state-store.js';

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

const carriedSchema = z.record(z.string(), z.number().nonnegative());

export class CarriedSilence {
  /** What the earlier controllers saved (nothing when nothing, or something unreadable, was saved). */
  readonly loaded: ReadonlyMap<string, number>;
  private saved: ReadonlyMap<string, number>;

  constructor(
    private readonly store: StateStore,
    /** At most this much silence is taken as a worker heard (worker-silence-watch.ts: two heartbeat intervals). */
    private readonly fromSeconds: number,
  ) {
    const parsed = carriedSchema.safeParse(store.getValue(CARRIED_SILENCE_KEY));
    this.loaded = new Map(parsed.success ? Object.entries(parsed.data) : []);
    this.saved = this.loaded;
  }

  /** Save `silence` (worker → seconds) when it differs from what is saved. */
  save(silence: ReadonlyMap<string, number>): void {
    const kept = new Map(
      [...silence]
        .filter(([, seconds]) => seconds > this.fromSeconds)
        .map(([id, s]) => [id, round(s)] as const),
    );
    if (!differs(kept, this.saved)) return;
    this.store.setValue(CARRIED_SILENCE_KEY, Object.fromEntries(kept) as JsonValue);
    this.saved = kept;
  }
}

function differs(a: ReadonlyMap<string, number>, b: ReadonlyMap<string, number>): boolean {
  if (a.size !== b.size) return true;
  for (const [id, seconds] of a) {
    const other = b.get(id);
    if (other === undefined || Math.abs(other - seconds) >= RESAVE_AFTER_SECONDS) return true;
  }
  return false;
}

function round(seconds: number): number {
  return Math.round(seconds * 100) / 100;
}
