import { z } from 'zod';
import type { StateStore } from '../state-store.js';

/**
 * Whether a state has started a cluster, and which. A state file that is missing or emptied opens as a valid, empty
 * database: without a mark it could not be told from a new cluster's. The controller marks its state when it first
 * starts a cluster on it (new, or over evidence of an earlier one with `--init`), and a state with jobs or instances
 * but no mark (from before the mark existed) is marked as it is. The mark names the cluster: the controller finds its
 * instances by their cluster tag, so a state run under another name would take all of them for vanished.
 */

export const CLUSTER_INITIALIZED_KEY = 'cluster.initialized';

export type InitializedHow = 'new' | 'init' | 'existing';

const markSchema = z.looseObject({ clusterName: z.string() });

/** A state marked for one cluster, opened by a controller configured for another. */
export class ClusterMismatchError extends Error {
  override name = 'ClusterMismatchError';
  constructor(
    readonly stateCluster: string,
    readonly configuredCluster: string,
    where: string | undefined,
  ) {
    super(
      `refusing to start: the state${where === undefined ? '' : ` ${where}`} belongs to cluster "${stateCluster}", but this controller's ` +
        `\`cluster\` is "${configuredCluster}": it would find none of "${stateCluster}"'s instances under its own ` +
        `name, take them for vanished and run their jobs again. Set \`cluster: ${stateCluster}\` (or ` +
        `--cluster ${stateCluster}), or give cluster "${configuredCluster}" a state of its own`,
    );
  }
}

/** No mark, no job, no instance: nothing says a cluster ever started on this state. */
export function isEmptyState(store: StateStore): boolean {
  return (
    store.getValue(CLUSTER_INITIALIZED_KEY) === undefined &&
    store.countJobs() === 0 &&
    store.listInstances().length === 0
  );
}

/** The cluster the state was marked for; undefined before it was marked. */
export function markedCluster(store: StateStore): string | undefined {
  const mark = store.getValue(CLUSTER_INITIALIZED_KEY);
  if (mark === undefined) return undefined;
  const parsed = markSchema.safeParse(mark);
  // A mark this version cannot read names no cluster to compare with; it still says the state is not empty.
  return parsed.success ? parsed.data.clusterName : undefined;
}

/** When the cluster was first started on this state (its mark's time); undefined before it was marked. */
export function markedAtSeconds(store: StateStore): number | undefined {
  const mark = store.getValue(CLUSTER_INITIALIZED_KEY);
  if (mark === undefined) return undefined;
  const parsed = markSchema.extend({ atSeconds: z.number() }).safeParse(mark);
  return parsed.success ? parsed.data.atSeconds : undefined;
}

/** Throws ClusterMismatchError when the state was marked for a cluster other than `clusterName`. */
export function assertSameCluster(store: StateStore, clusterName: string, where?: string): void {
  const marked = markedCluster(store);
  if (marked !== undefined && marked !== clusterName)
    throw new ClusterMismatchError(marked, clusterName, where);
}

/** Mark the state as `clusterName`'s; a state marked already must be that cluster's (ClusterMismatchError). */
export function markInitialized(
  store: StateStore,
  clusterName: string,
  how: InitializedHow,
  atSeconds: number,
): void {
  if (store.getValue(CLUSTER_INITIALIZED_KEY) !== undefined) {
    assertSameCluster(store, clusterName);
    return;
  }
  store.setValue(CLUSTER_INITIALIZED_KEY, { clusterName, how, atSeconds });
}
