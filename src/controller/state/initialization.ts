import type { StateStore } from '../state-store.js';

/**
 * Whether a state has started a cluster. A state file that is missing or emptied opens as a valid, empty database:
 * without a mark it could not be told from a new cluster's. The controller marks its state when it first starts a
 * cluster on it (new, or over evidence of an earlier one with `--init`), and a state with jobs or instances but no
 * mark (from before the mark existed) is marked as it is.
 */

export const CLUSTER_INITIALIZED_KEY = 'cluster.initialized';

export type InitializedHow = 'new' | 'init' | 'existing';

/** No mark, no job, no instance: nothing says a cluster ever started on this state. */
export function isEmptyState(store: StateStore): boolean {
  return (
    store.getValue(CLUSTER_INITIALIZED_KEY) === undefined &&
    store.listJobs().length === 0 &&
    store.listInstances().length === 0
  );
}

export function markInitialized(
  store: StateStore,
  clusterName: string,
  how: InitializedHow,
  atSeconds: number,
): void {
  if (store.getValue(CLUSTER_INITIALIZED_KEY) !== undefined) return;
  store.setValue(CLUSTER_INITIALIZED_KEY, { clusterName, how, atSeconds });
}
