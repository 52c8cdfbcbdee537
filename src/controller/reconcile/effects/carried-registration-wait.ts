import { z } from 'zod';
import type { JsonValue, StateStore } from '../../state-store.js';

/**
 * How long each running instance has waited for its worker to register, as the controllers so far counted it, kept in
 * the state store for the next controller (registrations.ts: a controller in a crash loop must still replace an
 * instance whose worker never registers). Only running instances whose worker has not registered are kept: one that
 * registers, or stops running, drops out at the next save.
 */
export const CARRIED_REGISTRATION_WAIT_KEY = 'instances.carriedRegistrationWait';

/** A saved value is rewritten once some instance's wait moved this far from it (or an instance came or went). */
const RESAVE_AFTER_SECONDS = 1;

const carriedSchema = z.record(z.string(), z.number().finite().nonnegative());

export class CarriedRegistrationWait {
  /** What the earlier controllers saved (nothing when nothing, or something unreadable, was saved). */
  readonly loaded: ReadonlyMap<string, number>;
  private saved: ReadonlyMap<string, number>;

  constructor(private readonly store: StateStore) {
    const parsed = carriedSchema.safeParse(store.getValue(CARRIED_REGISTRATION_WAIT_KEY));
    this.loaded = new Map(parsed.success ? Object.entries(parsed.data) : []);
    this.saved = this.loaded;
  }

  /** Save `waits` (instance → seconds waited so far) when they differ from what is saved. */
  save(waits: ReadonlyMap<string, number>): void {
    const kept = new Map([...waits].map(([id, seconds]) => [id, round(seconds)] as const));
    if (!differs(kept, this.saved)) return;
    this.store.setValue(CARRIED_REGISTRATION_WAIT_KEY, Object.fromEntries(kept) as JsonValue);
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
