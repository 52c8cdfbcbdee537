import { z } from 'zod';
import { INSTANCE_STATES, type StateStore } from './state-store.js';

/**
 * The instances a clean stop of the controller terminated itself (local mode's workers stop with it), with when. The
 * loop has stopped by then, so the instances are written down here instead of closed; the next start's cloud sync
 * closes them at that time and says they stopped with the controller rather than that they were lost.
 */
const KEY = 'cloud.stopped-with-controller';
const schema = z.record(z.string(), z.number());

export function recordStoppedWithController(
  store: StateStore,
  stopped: readonly { readonly cloudId: string; readonly atSeconds: number }[],
): void {
  if (stopped.length === 0) return;
  const all = { ...stoppedWithController(store) };
  for (const s of stopped) all[s.cloudId] = s.atSeconds;
  store.setValue(KEY, all);
}

/**
 * Instances stopped as a controller's clean stop stops them, but by something else while no controller ran
 * (`fleetwise down`): recorded as stopped with the controller while the state still has them open, so that the next
 * cloud sync closes them as such; those already closed are left out, so repeated starts record nothing more.
 */
export function recordStoppedWithoutController(
  store: StateStore,
  stopped: readonly { readonly cloudId: string; readonly atSeconds: number }[],
): void {
  if (stopped.length === 0) return;
  const open = new Set(
    store.listInstances({ states: INSTANCE_STATES.filter((s) => s !== 'terminated') }).map((i) => i.cloudId),
  );
  recordStoppedWithController(
    store,
    stopped.filter((s) => open.has(s.cloudId)),
  );
}

/** Cloud id → when the controller's stop terminated it. */
export function stoppedWithController(store: StateStore): Readonly<Record<string, number>> {
  const parsed = schema.safeParse(store.getValue(KEY));
  return parsed.success ? parsed.data : {};
}

/** Those the cloud sync has closed are forgotten. */
export function forgetStoppedWithController(store: StateStore, cloudIds: readonly string[]): void {
  if (cloudIds.length === 0) return;
  const all = { ...stoppedWithController(store) };
  for (const id of cloudIds) delete all[id];
  if (Object.keys(all).length === 0) store.deleteValue(KEY);
  else store.setValue(KEY, all);
}
