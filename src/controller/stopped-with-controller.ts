import { z } from 'zod';
import type { StateStore } from './state-store.js';

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
