import { runBounded } from '../../core/bounded.js';
import { jobArchiveKeys } from '../../protocol/object-keys.js';
import type { ObjectStore } from '../../storage/object-store.js';
import { ObjectExistsError } from '../../storage/object-store-error.js';
import type { Clock } from '../clock.js';
import type { ControllerLogger } from '../seams.js';
import { isFinalJobState } from '../state/lifecycle.js';
import type { JobRecord } from '../state-store.js';
import {
  archivedSpecSchema,
  documentBytes,
  readDocument,
  type ArchivedEnd,
  type ArchivedSpec,
} from './backup-documents.js';

/** A spec not stored because the archive holds another submission under its job's id: another controller writes it. */
export class JobArchiveConflictError extends Error {
  override name = 'JobArchiveConflictError';
}

/** A submission's idempotency key as the archive keeps it (its team is the job's). */
export interface ArchivedSubmissionKey {
  readonly key: string;
  readonly requestHash: string;
}

/** What the archive reports (ControllerMetrics implements it for /metrics). */
export interface JobArchiveMetrics {
  jobArchiveFailed(part: 'spec' | 'end'): void;
}

export interface JobArchiveOptions {
  readonly objectStore: ObjectStore;
  readonly cluster: string;
  readonly clock: Clock;
  readonly log: ControllerLogger;
  readonly metrics?: JobArchiveMetrics | undefined;
  /**
   * When the cluster was first started on this state (its mark). A spec already archived under a new job's id that was
   * submitted before then is an earlier cluster's of the same name (one started again with `--init` on the same
   * store), not a controller writing beside this one: it is replaced, as before that cluster was started anew.
   */
  readonly stateBeganAtSeconds?: (() => number | undefined) | undefined;
  /** Seconds before an end record that failed to store is tried again. */
  readonly retrySeconds?: number;
}

/**
 * End records stored at once: 16 of the AWS SDK's default 50 sockets, leaving most to submissions' spec puts (up to
 * 48 for an array; the SDK queues what its sockets cannot carry at once).
 */
const END_WRITE_CONCURRENCY = 16;

/**
 * Every accepted job in the object store, next to the state backups, so a restore rebuilds what the newest backup
 * missed: a job's spec is stored before its submission is answered (one put; the API answers 503 and the job is
 * withdrawn when it fails), and how it ended is stored once it has, in the background and retried until stored, so
 * a restored controller neither drops a job accepted after its backup nor runs again one that ended after it. (The
 * end is not awaited, which would hold the loop through an object-store outage: a job that ended in the moments
 * before the loss, its end not yet stored, runs again from its last checkpoint.)
 */
export class JobArchive {
  private readonly pendingEnds = new Map<string, ArchivedEnd>();
  private writing: Promise<void> | undefined;
  private retry = new AbortController();
  private stopped = false;

  constructor(private readonly options: JobArchiveOptions) {}

  /** Store an accepted job's spec (with the idempotency key it came with); throws when the object store does not take it. */
  async keepSubmitted(
    job: JobRecord,
    key?: ArchivedSubmissionKey,
    options: { readonly ofArray: boolean } = { ofArray: false },
  ): Promise<void> {
    const doc: ArchivedSpec = {
      version: 1,
      id: job.id,
      submittedAtSeconds: job.submittedAtSeconds,
      spec: job.spec,
      ...(key === undefined ? {} : { submissionKey: { key: key.key, requestHash: key.requestHash } }),
      ofArraySubmission: options.ofArray,
    };
    const { objectStore, cluster, log } = this.options;
    const specKey = jobArchiveKeys(cluster, job.id).spec;
    try {
      // Only if absent: a job's spec is stored once, so a spec already there that is not this submission's was
      // stored by another controller (numbering its jobs the same way), which a put would silently replace.
      await objectStore.put(specKey, documentBytes(doc), { ifAbsent: true });
    } catch (e) {
      if (e instanceof ObjectExistsError) {
        const stored = await this.storedSpec(specKey);
        if (stored !== undefined && isSameSubmission(stored, doc)) return;
        const began = this.options.stateBeganAtSeconds?.();
        if (stored !== undefined && began !== undefined && stored.submittedAtSeconds < began) {
          log.warn(
            `${job.id}'s spec replaces one in the job archive (${objectStore.location} ${specKey}) submitted before ` +
              `this state began: an earlier cluster named ${cluster} used the same store`,
          );
          await objectStore.put(specKey, documentBytes(doc));
          return;
        }
      }
      this.options.metrics?.jobArchiveFailed('spec');
      if (!(e instanceof ObjectExistsError)) throw e;
      const message =
        `${job.id}'s spec is already in the job archive (${objectStore.location} ${specKey}) as another submission: ` +
        `another controller is writing the job archive of cluster ${cluster} to the same store; stop one, or give ` +
        'each its own cluster name or store';
      log.error(message);
      throw new JobArchiveConflictError(message, { cause: e });
    }
  }

  /** The spec archived at `key`; undefined when it cannot be read. */
  private async storedSpec(key: string): Promise<ArchivedSpec | undefined> {
    try {
      return readDocument(archivedSpecSchema, await this.options.objectStore.getBuffer(key), key);
    } catch {
      return undefined;
    }
  }

  /** Record that a job ended; stored in the background (several at a time, retried until stored). */
  keepEnded(job: JobRecord): void {
    if (!isFinalJobState(job.state)) return;
    this.pendingEnds.set(job.id, {
      version: 1,
      id: job.id,
      state: job.state,
      ...(job.reason === undefined ? {} : { reason: job.reason }),
      finishedAtSeconds: job.finishedAtSeconds ?? job.updatedAtSeconds,
      submittedAtSeconds: job.submittedAtSeconds,
    });
    this.writing ??= this.writeEnds().finally(() => {
      this.writing = undefined;
    });
  }

  /** Stop retrying; end records still unstored are written once more, then given up (the backup has them). */
  async stop(): Promise<void> {
    this.stopped = true;
    this.retry.abort();
    await this.writing;
  }

  /** End records not yet stored (tests, and the log at stop). */
  get pendingEndCount(): number {
    return this.pendingEnds.size;
  }

  private async writeEnds(): Promise<void> {
    const { clock, log } = this.options;
    while (this.pendingEnds.size > 0) {
      if (await this.writePendingEnds()) continue;
      if (this.stopped) {
        log.warn(
          `${this.pendingEnds.size} job end(s) left out of the job archive at stop (the state has them)`,
        );
        return;
      }
      await clock.sleep(this.options.retrySeconds ?? 5, this.retry.signal);
    }
  }

  /**
   * One pass over the ends pending now, END_WRITE_CONCURRENCY puts at a time (a whole array cancelled at once is
   * thousands of ends: stored in seconds, not one round trip after another). False when a put failed: the pass takes
   * no more, and the rest wait for the retry.
   */
  private async writePendingEnds(): Promise<boolean> {
    const { objectStore, cluster, log } = this.options;
    const failure = await runBounded([...this.pendingEnds], END_WRITE_CONCURRENCY, async ([jobId, doc]) => {
      try {
        await objectStore.put(jobArchiveKeys(cluster, jobId).end, documentBytes(doc));
      } catch (e) {
        this.options.metrics?.jobArchiveFailed('end');
        throw e;
      }
      if (this.pendingEnds.get(jobId) === doc) this.pendingEnds.delete(jobId);
    });
    if (failure === undefined) return true;
    log.warn(`cannot store how ${failure.item[0]} ended in the job archive; trying again`, {
      error: failure.error instanceof Error ? failure.error.message : String(failure.error),
    });
    return false;
  }
}

/** Whether an archived spec is this submission's (a resend of it, or a request retried after it landed). */
function isSameSubmission(stored: ArchivedSpec, doc: ArchivedSpec): boolean {
  return (
    stored.id === doc.id &&
    stored.submittedAtSeconds === doc.submittedAtSeconds &&
    JSON.stringify(stored.spec) === JSON.stringify(doc.spec)
  );
}
