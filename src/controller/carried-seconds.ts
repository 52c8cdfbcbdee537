import { z } from 'zod';
import type { JsonValue, StateStore } from './state-store.js';

const carriedSchema = z.record(z.string(), z.number().finite().nonnegative());

/**
 * Seconds counted per instance that a controller passes on to the next through a key-value of the state store: a
 * count a controller keeps only in memory starts afresh at every start, and a controller in a crash loop would never
 * reach its limit (the workers' silence, carried-silence.ts; the wait for a worker's registration,
 * reconcile/effects/carried-registration-wait.ts). A value nothing saved, or that cannot be read, is nothing carried.
 */
export class CarriedSeconds {
  /** What the earlier controllers saved, per instance. */
  readonly loaded: ReadonlyMap<string, number>;
  private saved: ReadonlyMap<string, number>;

  constructor(
    private readonly store: StateStore,
    private readonly key: string,
    /** A saved value is rewritten once some instance's count moved this far from it (or an instance came or went). */
    private readonly resaveAfterSeconds: number,
  ) {
    const parsed = carriedSchema.safeParse(store.getValue(key));
    this.loaded = new Map(parsed.success ? Object.entries(parsed.data) : []);
    this.saved = this.loaded;
  }

  /** Save `counts` (instance → seconds; those left out are dropped) when they differ from what is saved. */
  save(counts: ReadonlyMap<string, number>): void {
    const kept = new Map([...counts].map(([id, seconds]) => [id, round(seconds)] as const));
    if (!this.differs(kept)) return;
    this.store.setValue(this.key, Object.fromEntries(kept) as JsonValue);
    this.saved = kept;
  }

  private differs(counts: ReadonlyMap<string, number>): boolean {
    if (counts.size !== this.saved.size) return true;
    for (const [id, seconds] of counts) {
      const other = this.saved.get(id);
      if (other === undefined || Math.abs(other - seconds) >= this.resaveAfterSeconds) return true;
    }
    return false;
  }
}

function round(seconds: number): number {
  return Math.round(seconds * 100) / 100;
}
