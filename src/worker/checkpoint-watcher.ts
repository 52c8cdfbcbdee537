import { watch, type FSWatcher } from 'node:fs';
import { unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { CheckpointRef } from '../protocol/object-keys.js';
import type { ObjectStore } from '../storage/object-store.js';
import { isObjectStoreError } from '../storage/object-store-error.js';
import {
  checkpointsToPrune,
  COMPLETE_MARKER,
  deleteCheckpoints,
  exists,
  fingerprint,
  listCheckpoints,
  uploadCheckpoint,
  usesMarkers,
  type CheckpointManifest,
  type StoredCheckpoint,
  type UploadResult,
} from './checkpoints.js';

/**
 * The watcher that uploads a running task's checkpoints as it writes them (the contract in checkpoints.ts).
 */

/**
 * The watcher's answer to a marker it could not honour: the task's checkpoint cannot be packed (a link out of the
 * directory, a file that cannot be read). Written, with the reason on one line, before the marker is deleted, so a task
 * that waits for the marker to go finds it there; deleted before the next upload, so it is never part of a checkpoint.
 */
export const FAILED_MARKER = `${COMPLETE_MARKER}.failed`;
/** FAILED_MARKER's line in a fingerprint (`name:size:mtime`), and no other file's. */
const FAILED_MARKER_LINE = /^COMPLETE\.failed:[^:]*:[^:]*$/;

/** `poll`: the periodic check; `final`: the task exited, take any change; `marked-only`: only a COMPLETE marker. */
export type CheckMode = 'poll' | 'final' | 'marked-only';

export interface CheckpointWatcherOptions {
  readonly store: ObjectStore;
  readonly ref: CheckpointRef;
  readonly dir: string;
  /**
   * Poll period; 1 s by default. A COMPLETE marker is noticed at once where the directory can be watched (inotify),
   * the poll being the fallback and the clock of the quiescence rule.
   */
  readonly pollMs?: number;
  /** How long an unmarked directory must stay unchanged before it is uploaded; 3 polls by default. */
  readonly quiescentMs?: number;
  /** Complete checkpoints kept in the store after each upload (default 3). */
  readonly keep?: number;
  readonly onUpload?: (result: UploadResult) => void;
  /** Each failure of the store's; one that is not (the task's checkpoint cannot be packed) once, not at every poll. */
  readonly onError?: (error: Error) => void;
  /**
   * Runs the final upload (`flush`, `flushMarkedOnly`: the one a stop waits for) until the store takes it
   * (TaskLifecycle retries while the store fails). Periodic uploads are not retried: the next poll tries again, or,
   * when packing the directory failed, the first poll after the task changes it.
   */
  readonly retry?: StoreStepRetry;
}

/** Runs a step that needs the object store, trying it again while the store fails (src/storage/retry.ts). */
export type StoreStepRetry = <T>(what: string, step: () => Promise<T>) => Promise<T>;

const once: StoreStepRetry = (_what, step) => step();

/**
 * Uploads the checkpoints a running task writes (contract above), so a lost instance costs at most the work since
 * the last upload. Call `start()` after a restore (the restored state is the baseline, never re-uploaded), `flush()`
 * after the task exited, `stop()` when done.
 */
export class CheckpointWatcher {
  private timer: NodeJS.Timeout | undefined;
  private dirWatch: FSWatcher | undefined;
  /** A marker check is queued: further events for the marker add nothing. */
  private markerCheckQueued = false;
  private nextSeq = 0;
  private lastUploaded = '';
  private candidate = '';
  private candidateSince = 0;
  /** The task uses COMPLETE markers: seen by this watcher, or recorded in the newest manifest at start. */
  private markerSeen = false;
  /**
   * The task's checkpoints in the store, oldest first: listed at start, then kept up to date with this watcher's own
   * uploads and deletions, so pruning after each upload costs no listing (the store's requests per checkpoint are
   * what bounds how often fifty tasks can checkpoint to one store).
   */
  private stored: StoredCheckpoint[] = [];
  private pruning: Promise<void> | undefined;
  private pruneAgain = false;
  private busy: Promise<UploadResult | undefined> = Promise.resolve(undefined);
  private readonly pollMs: number;
  private readonly quiescentMs: number;
  private readonly keep: number;
  /**
   * The directory's state when packing it failed for a reason of its own (not the store's), with that failure: the
   * same state would fail the same way, so it is not tried again until the task changes the directory.
   */
  private refused: { readonly state: string; readonly error: Error } | undefined;
  /** The message of the last failure reported through `onError` that was not the store's: told once. */
  private told: string | undefined;
  /**
   * The worker was retired (`retire`): its task runs on elsewhere from its last checkpoint, writing the same seqs under
   * the same keys, so this watcher uploads and prunes nothing more, whatever asks it to.
   */
  private retired = false;
  /** The newest checkpoint this watcher uploaded. */
  lastManifest: CheckpointManifest | undefined;
  /**
   * Why the running task's checkpoints are not being uploaded, a failure that is not the store's (which is retried at
   * every poll): what the worker reports to the controller. Cleared by the next upload that succeeds.
   */
  checkpointError: string | undefined;
  /**
   * Why the last final upload (`flush`, `flushMarkedOnly`) failed, once its retries ended: a permanent error (a file the
   * archive refuses), or the agent leaving while the store was down. The state the task left is then not in the store.
   */
  finalUploadError: Error | undefined;

  constructor(private readonly options: CheckpointWatcherOptions) {
    this.pollMs = options.pollMs ?? 1000;
    this.quiescentMs = options.quiescentMs ?? 3 * this.pollMs;
    this.keep = options.keep ?? 3;
  }

  /**
   * `baseline: 'restored'` (a start after a restore): the directory holds what the store has, never re-uploaded.
   * `'unknown'` (a task adopted after the agent restarted): what it wrote while no watcher ran may never have been
   * uploaded, so the current state counts as new.
   */
  async start(baseline: 'restored' | 'unknown' = 'restored'): Promise<void> {
    const { store, ref } = this.options;
    const stored = await listCheckpoints(store, ref);
    // Known before nextSeq (which lets uploads happen): a marker-using task's half-written next checkpoint, quiet
    // between two of its writes, must never be taken for a complete one.
    this.markerSeen = await usesMarkers(store, ref, stored);
    this.stored = stored;
    // After every seq ever used, partial ones included: a new checkpoint never overwrites an old object.
    this.nextSeq = (stored.at(-1)?.seq ?? 0) + 1;
    // A directory that cannot be read yet is no reason to watch nothing: the polls report it, and upload once it reads.
    this.lastUploaded = baseline === 'restored' ? await this.state().catch(() => '') : '';
    this.watchDir();
    this.schedule();
  }

  private schedule(): void {
    if (this.retired) return;
    this.timer = setTimeout(() => {
      // The directory may not have existed yet (the task creates it), or its watch may have failed: try again.
      this.watchDir();
      void this.check('poll').finally(() => {
        if (this.timer !== undefined) this.schedule();
      });
    }, this.pollMs);
  }

  /**
   * Upload a marked checkpoint as soon as the task marks it rather than at the next poll: a lost instance costs the
   * work since the last durable checkpoint, and the task writes its next one only once the marker is gone.
   */
  private watchDir(): void {
    if (this.dirWatch !== undefined || this.retired) return;
    try {
      const dirWatch = watch(this.options.dir, { persistent: false }, (_event, name) => {
        if (name !== COMPLETE_MARKER || this.markerCheckQueued || this.timer === undefined) return;
        this.markerCheckQueued = true;
        // The flag clears when the check starts, so a marker written during an upload queues the next one.
        this.busy = this.busy.then(() => {
          this.markerCheckQueued = false;
          return undefined;
        });
        void this.check('poll');
      });
      dirWatch.on('error', () => {
        dirWatch.close();
        if (this.dirWatch === dirWatch) this.dirWatch = undefined;
      });
      this.dirWatch = dirWatch;
    } catch {
      // No directory yet, or no inotify watch left (ENOSPC): the poll covers it.
    }
  }

  /** One poll: upload if the task marked a checkpoint complete, or (unmarked tasks) the directory went quiet. */
  check(mode: CheckMode = 'poll'): Promise<UploadResult | undefined> {
    this.busy = this.busy.then(async () => {
      try {
        const result = await this.checkNow(mode);
        if (mode !== 'poll') this.finalUploadError = undefined;
        return result;
      } catch (e) {
        const error = e as Error;
        if (mode !== 'poll') this.finalUploadError = error;
        if (!isObjectStoreError(error)) {
          // The task's own doing, which recurs until it changes the directory: reported once, not at every poll.
          if (mode === 'poll') this.checkpointError = oneLine(error.message);
          if (error.message === this.told) return undefined;
          this.told = error.message;
        }
        this.options.onError?.(error);
        return undefined;
      }
    });
    return this.busy;
  }

  private async checkNow(mode: CheckMode): Promise<UploadResult | undefined> {
    // Not started (its listing of the store never finished): the next seq is unknown, and one written as 0 would be
    // refused by every restore (or overwrite a later attempt's). Nothing is uploaded until the watcher knows it.
    if (this.nextSeq === 0 || this.retired) return undefined;
    const { dir } = this.options;
    const marker = join(dir, COMPLETE_MARKER);
    const marked = await exists(marker);
    if (marked) this.markerSeen = true;
    const refused = this.refused;
    // A marked state that failed is answered again at once; a task that exited is told the state it left failed.
    if (refused !== undefined && (marked || mode === 'final') && (await this.state()) === refused.state) {
      if (marked) await this.answerMarker(refused.error);
      if (mode === 'poll') return undefined;
      throw refused.error;
    }
    if (marked) {
      const result = await this.upload(mode, true);
      // The task may write its next checkpoint as soon as this one is durable, before any housekeeping.
      await unlink(marker).catch(() => undefined);
      this.prune();
      return result;
    }
    if (this.markerSeen || mode === 'marked-only') return undefined;
    const current = await this.state();
    if (current === this.lastUploaded || current === '' || current === refused?.state) return undefined;
    if (mode === 'poll') {
      if (current !== this.candidate) {
        this.candidate = current;
        this.candidateSince = Date.now();
        return undefined;
      }
      if (Date.now() - this.candidateSince < this.quiescentMs) return undefined;
    }
    const result = await this.upload(mode, false);
    this.prune();
    return result;
  }

  private async upload(mode: CheckMode, marked: boolean): Promise<UploadResult> {
    const { store, ref, dir } = this.options;
    const attempt = async (): Promise<UploadResult> => {
      // Retired while a final upload was being retried: the next attempt would write under the new copy's keys.
      if (this.retired) throw new WatcherRetiredError();
      // The watcher's answer to an earlier state is no part of this one.
      await unlink(join(dir, FAILED_MARKER)).catch(() => undefined);
      // Each attempt packs the directory as it is then, under a new seq (one the store failed is left partial).
      const before = await this.state();
      const seq = this.nextSeq++;
      // Partial until the manifest is written: a failed attempt may leave its tar behind, for pruning to delete.
      const entry = { seq, complete: false };
      this.stored.push(entry);
      try {
        const uploaded = await uploadCheckpoint(store, ref, dir, seq, { marked });
        entry.complete = true;
        this.lastUploaded = before;
        return uploaded;
      } catch (e) {
        if (!isObjectStoreError(e)) {
          // Refused by packing, or its body failed and the put was undone: nothing of it is in the store, so its seq
          // is the next attempt's. This state is not tried again until the directory changes ('' is one mid-change).
          this.nextSeq = seq;
          this.stored = this.stored.filter((c) => c !== entry);
          if (before !== '') this.refused = { state: before, error: e as Error };
        }
        throw e;
      }
    };
    let result: UploadResult;
    try {
      result =
        mode === 'poll' ? await attempt() : await (this.options.retry ?? once)('checkpoint upload', attempt);
    } catch (e) {
      // A marker left in place would hold a task that follows the contract for good: it is answered instead.
      if (marked && !isObjectStoreError(e)) await this.answerMarker(e as Error);
      throw e;
    }
    this.refused = undefined;
    this.told = undefined;
    this.checkpointError = undefined;
    this.lastManifest = result.manifest;
    this.options.onUpload?.(result);
    return result;
  }

  /**
   * The task's checkpoint files as `fingerprint` describes them, the watcher's own FAILED_MARKER left out: writing or
   * deleting it is no change of the task's state.
   */
  private async state(): Promise<string> {
    return (await fingerprint(this.options.dir))
      .split('\n')
      .filter((line) => !FAILED_MARKER_LINE.test(line))
      .join('\n');
  }

  /**
   * Tell the task its marked checkpoint cannot be uploaded: the reason in FAILED_MARKER, then the marker deleted, so it
   * goes on. The note is created afresh (never written through a link the task put in its place); a directory that
   * takes no note still loses the marker.
   */
  private async answerMarker(error: Error): Promise<void> {
    const { dir } = this.options;
    const note = join(dir, FAILED_MARKER);
    await unlink(note).catch(() => undefined);
    await writeFile(note, `${oneLine(error.message)}\n`, { flag: 'wx', mode: 0o644 }).catch(() => undefined);
    await unlink(join(dir, COMPLETE_MARKER)).catch(() => undefined);
  }

  /**
   * Pruning is housekeeping, run beside the uploads rather than before the next one (on a busy store its deletions
   * took as long as the upload, and doubled the time between checkpoints); one at a time, and once more after one
   * that uploads overtook. The upload stands when it fails, and the next upload prunes again.
   */
  private prune(): void {
    // A retired watcher's idea of which seqs are old is wrong: the new copy writes the same seqs.
    if (this.retired) return;
    if (this.pruning !== undefined) {
      this.pruneAgain = true;
      return;
    }
    this.pruning = this.pruneNow().finally(() => {
      this.pruning = undefined;
      if (this.pruneAgain) {
        this.pruneAgain = false;
        this.prune();
      }
    });
  }

  private async pruneNow(): Promise<void> {
    const { store, ref } = this.options;
    const doomed = checkpointsToPrune(this.stored, this.keep);
    try {
      await deleteCheckpoints(store, ref, doomed);
      this.stored = this.stored.filter((c) => !doomed.includes(c.seq));
    } catch (e) {
      this.options.onError?.(e as Error);
    }
  }

  /** Upload the final state of an exited task (see the contract); returns the upload, if one was made. */
  async flush(): Promise<UploadResult | undefined> {
    return this.check('final');
  }

  /** After a kill: upload only a checkpoint the task marked complete (unmarked files may be torn mid-write). */
  async flushMarkedOnly(): Promise<UploadResult | undefined> {
    return this.check('marked-only');
  }

  /**
   * The worker was retired (the controller replaced its instance and resumes the task elsewhere): stop, and upload or
   * delete nothing more from now on, a final upload asked for later (a stop under way) included. Resolves once the
   * upload under way, if any, has ended.
   */
  async retire(): Promise<void> {
    this.retired = true;
    await this.stop();
  }

  async stop(): Promise<void> {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    this.dirWatch?.close();
    this.dirWatch = undefined;
    await this.busy;
    while (this.pruning !== undefined) await this.pruning;
  }
}

/** What a final upload retried after its watcher was retired ends with (nothing more of it is written). */
export class WatcherRetiredError extends Error {
  constructor() {
    super('not uploaded: the controller retired this worker (its task resumed elsewhere)');
    this.name = 'WatcherRetiredError';
  }
}

/** A reason as one line of at most 4000 characters (what the marker's answer and the task report carry). */
function oneLine(message: string): string {
  return message.replace(/\s*\n\s*/g, ' ').slice(0, 4000);
}
