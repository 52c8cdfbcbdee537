import type { ControllerLogger } from './seams.js';
import {
  describeEvidence,
  findPreviousClusterEvidence,
  type ClusterEvidence,
  type EvidenceSources,
} from './previous-cluster-evidence.js';
import {
  assertSameCluster,
  isEmptyState,
  markInitialized,
  type InitializedHow,
} from './state/initialization.js';
import type { StateStore } from './state-store.js';

/**
 * Before a controller starts on its state (ARCHITECTURE.md "A lost state"): an empty state where a cluster ran before
 * is a lost state, not a new cluster. Starting on it would take the running instances for orphans and their jobs for
 * never submitted, so it is refused unless the operator says `--init`; a new cluster (no evidence) starts as before.
 * Either way the state is marked, so later starts are ordinary restarts. A state marked for another cluster is
 * refused before anything reads the cloud: under its own name the controller would find none of that cluster's
 * instances and run their jobs again on new ones.
 */

export class LostStateError extends Error {
  override name = 'LostStateError';
  constructor(
    readonly evidence: readonly ClusterEvidence[],
    stateFile: string,
  ) {
    super(describeEvidence(evidence, stateFile));
  }
}

export interface EmptyStateCheck {
  readonly store: StateStore;
  readonly stateFile: string;
  /** `--init`: start a new cluster even over evidence of an earlier one. */
  readonly init: boolean;
  readonly sources: EvidenceSources;
  readonly nowSeconds: number;
  readonly log: ControllerLogger;
}

export async function checkStateBeforeStart(check: EmptyStateCheck): Promise<InitializedHow> {
  const { store, sources } = check;
  if (!isEmptyState(store)) {
    assertSameCluster(store, sources.clusterName, check.stateFile);
    markInitialized(store, sources.clusterName, 'existing', check.nowSeconds);
    return 'existing';
  }
  const evidence = await findPreviousClusterEvidence(sources);
  if (evidence.length > 0 && !check.init) throw new LostStateError(evidence, check.stateFile);
  const how = evidence.length > 0 ? 'init' : 'new';
  if (how === 'init')
    check.log.error(
      `starting a new cluster on an empty state over evidence of an earlier one (--init): ${evidence
        .map((e) => e.description)
        .join('; ')}`,
    );
  markInitialized(store, sources.clusterName, how, check.nowSeconds);
  return how;
}
