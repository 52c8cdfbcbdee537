import type { StateStore } from '../state-store.js';

/**
 * The store ids a restored state had before (a restore gives the copy an id of its own: state/sqlite/migrate.ts
 * `renewStoreId`). Default launch tokens are `<store id>-<instance id>`, so an instance whose token carries one of
 * them was launched by this cluster's controller, after the backup the state was restored from: its tasks belong to
 * this state's jobs, and it is adopted even where unknown instances are only kept (`--orphans keep`).
 */
export const PREVIOUS_STORE_IDS_KEY = 'store.previousIds';

export function previousStoreIds(store: StateStore): readonly string[] {
  const value = store.getValue(PREVIOUS_STORE_IDS_KEY);
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : [];
}

export function recordPreviousStoreId(store: StateStore, storeId: string): void {
  const ids = previousStoreIds(store);
  if (!ids.includes(storeId)) store.setValue(PREVIOUS_STORE_IDS_KEY, [...ids, storeId]);
}

/** Whether a launch token was issued under one of `previousIds` (the state's ids before it was restored). */
export function launchedUnderPreviousStore(
  previousIds: readonly string[],
  launchToken: string | undefined,
): boolean {
  return launchToken !== undefined && previousIds.some((id) => launchToken.startsWith(`${id}-`));
}
