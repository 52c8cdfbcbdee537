import { CarriedSeconds } from '../../carried-seconds.js';
import type { StateStore } from '../../state-store.js';

/**
 * How long each running instance has waited for its worker to register, as the controllers so far counted it, kept in
 * the state store for the next controller (registrations.ts: a controller in a crash loop must still replace an
 * instance whose worker never registers). Only running instances whose worker has not registered are kept: one that
 * registers, or stops running, drops out at the next save.
 */
export const CARRIED_REGISTRATION_WAIT_KEY = 'instances.carriedRegistrationWait';

/** A saved value is rewritten once some instance's wait moved this far from it (or an instance came or went). */
const RESAVE_AFTER_SECONDS = 1;

export function carriedRegistrationWait(store: StateStore): CarriedSeconds {
  return new CarriedSeconds(store, CARRIED_REGISTRATION_WAIT_KEY, RESAVE_AFTER_SECONDS);
}
