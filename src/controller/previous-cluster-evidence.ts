import { existsSync } from 'node:fs';
import { journalPathOf, readLocalInstances, type LocalInstance } from '../cloud/local/instance-file.js';
import { TAG_CLUSTER, type CloudProvider } from '../cloud/provider.js';
import { ValidationError } from '../core/validation.js';
import { checkpointPrefix, jobArchivePrefix, taskLogPrefix } from '../protocol/object-keys.js';
import type { ObjectStore } from '../storage/object-store.js';
import { jobSeqOf } from './state/lifecycle.js';

/**
 * Evidence that a cluster ran before (ARCHITECTURE.md "A lost state"): what says an empty state is a lost one rather
 * than a new cluster. A controller that took a lost state for a new cluster would see the running instances as
 * orphans and the jobs on them as never submitted. Three places outlive the state file:
 *
 * - the cloud: instances tagged with the cluster's name (EC2 tags, the local provider's records);
 * - the local provider's instance file (with its journal), which lists every instance an earlier local controller launched, terminated
 *   ones included;
 * - the object store: checkpoints, task logs, reports, build contexts and backups an earlier run wrote.
 *
 * Read-only, and usable before anything else starts: `controller` calls it for an empty state, and a restore can ask
 * what the backup it restores will meet.
 */

export type EvidenceSource = 'cloud' | 'local-instance-file' | 'object-store';

export interface ClusterEvidence {
  readonly source: EvidenceSource;
  /** One line for the operator: what was found, where. */
  readonly description: string;
}

export interface EvidenceSources {
  readonly clusterName: string;
  /** Its listing of the cluster's live instances. */
  readonly provider?: CloudProvider | undefined;
  /** The local provider's instance file (`local-instances.json` in the state directory). */
  readonly localInstanceFile?: string | undefined;
  readonly objectStore?: ObjectStore | undefined;
}

/** Objects looked at in the object store: enough to say what is there without walking a large bucket. */
const OBJECT_SAMPLE = 1000;
/** Items named per line before "and N more". */
const NAMED = 5;

export async function findPreviousClusterEvidence(sources: EvidenceSources): Promise<ClusterEvidence[]> {
  const found: ClusterEvidence[] = [];
  if (sources.provider !== undefined) {
    const live = await sources.provider.list(sources.clusterName);
    if (live.length > 0)
      found.push({
        source: 'cloud',
        description:
          `${live.length} instance(s) tagged ${TAG_CLUSTER}=${sources.clusterName} still run: ` +
          named(live.map((i) => `${i.instanceId} (${i.typeName}, ${i.state})`)),
      });
  }
  if (sources.localInstanceFile !== undefined) {
    const file = localInstanceFile(sources.localInstanceFile);
    if (file !== undefined) found.push({ source: 'local-instance-file', description: file });
  }
  if (sources.objectStore !== undefined) {
    const objects = await objectStoreContents(sources.objectStore);
    if (objects !== undefined) found.push({ source: 'object-store', description: objects });
  }
  return found;
}

/** The operator's explanation: what was found, what starting would do, and what to do instead. */
export function describeEvidence(evidence: readonly ClusterEvidence[], stateFile: string): string {
  return [
    `refusing to start: the state ${stateFile} is empty, but a cluster ran here before:`,
    ...evidence.map((e) => `  - ${e.description}`),
    'Starting on an empty state would treat that cluster as gone: its jobs as never submitted, its instances as ' +
      'orphans. If the state file was lost, start from the newest backup with --restore-from <the object store> ' +
      '(or put back a copy of the file) and start again.',
    'To start a new, empty cluster anyway, run again with --init: the instances found are then kept running and ' +
      'reported as orphans (the default --orphans keep), and terminated only under --orphans terminate (or used and ' +
      'terminated when idle under --orphans adopt).',
  ].join('\n');
}

function named(items: readonly string[]): string {
  const shown = items.slice(0, NAMED).join(', ');
  return items.length > NAMED ? `${shown} and ${items.length - NAMED} more` : shown;
}

/** What the local instance file records, or undefined when it does not exist or lists nothing. */
function localInstanceFile(path: string): string | undefined {
  if (!existsSync(path) && !existsSync(journalPathOf(path))) return undefined;
  let records: LocalInstance[];
  try {
    records = readLocalInstances(path);
  } catch (e) {
    if (e instanceof ValidationError && e.problems.some((p) => p.startsWith('not valid JSON')))
      return `${path} exists but is not valid JSON`;
    return `${path} exists but cannot be read (${(e as Error).message})`;
  }
  if (records.length === 0) return undefined;
  const running = records.filter((r) => r.state === 'running');
  return (
    `${path} lists ${records.length} instance(s) an earlier controller launched, ${running.length} of them running` +
    (running.length === 0 ? '' : `: ${named(running.map((r) => r.instanceId))}`)
  );
}

/** The object store's top-level prefixes with an example key each, or undefined when it holds nothing. */
async function objectStoreContents(store: ObjectStore): Promise<string | undefined> {
  const byPrefix = new Map<string, { count: number; example: string }>();
  let seen = 0;
  for await (const object of store.list()) {
    const prefix = object.key.includes('/') ? `${object.key.split('/')[0] as string}/` : object.key;
    const entry = byPrefix.get(prefix);
    if (entry === undefined) byPrefix.set(prefix, { count: 1, example: object.key });
    else entry.count += 1;
    seen += 1;
    if (seen >= OBJECT_SAMPLE) break;
  }
  if (seen === 0) return undefined;
  const parts = [...byPrefix.values()].map(
    (e) => `${e.example}${e.count > 1 ? ` (+${e.count - 1} more)` : ''}`,
  );
  return (
    `the object store ${store.location} holds ${seen >= OBJECT_SAMPLE ? `${OBJECT_SAMPLE}+` : seen} object(s) of an ` +
    `earlier run: ${named(parts)}`
  );
}

/** The highest job number the object store holds objects of, and one prefix holding it. */
export interface StoredJobIds {
  readonly highestSeq: number;
  readonly where: string;
}

/**
 * The prefixes under which object-keys.ts files objects by job id alone (`<prefix><job>/…`), read from its key
 * builders so the two cannot drift: checkpoints and exit records, task logs, and `clusterName`'s job archive.
 */
function jobKeyedPrefixes(clusterName: string): string[] {
  const job = 'job-1';
  const parentOf = (jobPrefix: string): string => jobPrefix.slice(0, jobPrefix.indexOf(`/${job}/`) + 1);
  return [
    parentOf(checkpointPrefix({ jobId: job, taskId: `${job}.0` })),
    parentOf(taskLogPrefix(job)),
    jobArchivePrefix(clusterName),
  ];
}

/**
 * The highest job id an earlier run left objects under, or undefined when it left none. Keys carry only the job id,
 * so a new cluster on the same store that numbered its jobs from job-1 again would read the old jobs' logs as its
 * own and its workers would take the old exit records for their tasks' (a task "succeeded" without running). Reads
 * one entry per job directory (listPrefixes), not every object.
 */
export async function findStoredJobIds(
  store: ObjectStore,
  clusterName: string,
): Promise<StoredJobIds | undefined> {
  let found: StoredJobIds | undefined;
  for (const parent of jobKeyedPrefixes(clusterName))
    for await (const prefix of store.listPrefixes(parent)) {
      const seq = seqOf(prefix.slice(parent.length, -1));
      if (seq !== undefined && seq > (found?.highestSeq ?? 0)) found = { highestSeq: seq, where: prefix };
    }
  return found;
}

/** The n of a `job-<n>` directory name; undefined for anything else (nothing the controller numbered). */
function seqOf(name: string): number | undefined {
  try {
    return jobSeqOf(name);
  } catch {
    return undefined;
  }
}
