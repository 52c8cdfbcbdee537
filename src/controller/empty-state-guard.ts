import type { ControllerLogger } from './seams.js';
import type { ObjectStore } from '../storage/object-store.js';
import {
  describeEvidence,
  findPreviousClusterEvidence,
  findStoredJobIds,
  type ClusterEvidence,
  type EvidenceSources,
} from './previous-cluster-evidence.js';
import {
  assertSameCluster,
  isEmptyState,
  markInitialized,
  type InitializedHow,
} from './state/initialization.js';
import { jobIdOf } from './state/lifecycle.js';
import type { StateStore } from './state-store.js';

/**
 * Before a controller starts on its state (ARCHITECTURE.md "A lost state"): an empty state where a cluster ran before
 * is a lost state, not a new cluster. Starting on it would take the running instances for orphans and their jobs for
 * never submitted, so it is refused unless the operator says `--init`; a new cluster (no evidence) starts as before.
 * Either way the state is marked, so later starts are ordinary restarts, and job ids the object store already holds
 * objects of are reserved first, so new jobs never land on an earlier run's keys. A state marked for another cluster is
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
  // Before the mark: a start that fails between the two finds the state still empty and reserves again.
  if (sources.objectStore !== undefined) await reserveStoredJobIds(check, sources.objectStore);
  markInitialized(store, sources.clusterName, how, check.nowSeconds);
  return how;
}

/**
 * Keep new jobs off the ids an earlier run's objects are stored under: the state numbers jobs from job-1, but the
 * object store's keys carry only the job id, so a new job-1 would be shown the old job-1's logs (another team's,
 * perhaps) and its tasks would take the old exit records for their own and end without running.
 */
async function reserveStoredJobIds(check: EmptyStateCheck, objectStore: ObjectStore): Promise<void> {
  const stored = await findStoredJobIds(objectStore, check.sources.clusterName);
  if (stored === undefined) return;
  check.store.reserveJobIds(stored.highestSeq);
  check.log.warn(
    `the object store ${objectStore.location} holds objects of jobs up to ${jobIdOf(stored.highestSeq)} ` +
      `(${stored.where}) from an earlier run: ids through ${jobIdOf(stored.highestSeq)} are reserved, new jobs ` +
      `start at ${jobIdOf(stored.highestSeq + 1)}`,
  );
}
