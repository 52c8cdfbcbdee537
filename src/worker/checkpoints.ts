import { createHash, randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { lstat, mkdir, readdir, rm, stat, unlink } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { z } from 'zod';
import {
  checkpointKeys,
  checkpointPrefix,
  parseCheckpointKey,
  type CheckpointRef,
} from '../protocol/object-keys.js';
import type { ObjectStore } from '../storage/object-store.js';
import { isObjectStoreError } from '../storage/object-store-error.js';
import { extractCheckpoint, packCheckpoint } from './archives.js';
import { listFiles } from './image-cache.js';

/**
 * Checkpoints in the object store (ARCHITECTURE.md: checkpoint transfer, the worker's side of migration).
 *
 * Layout (src/protocol/object-keys.ts): `checkpoints/<job>/<task>/<seq>/data.tar` then `…/<seq>/manifest.json`
 * (sha256 and size of the tar, its file list, creation time, seq, whether the task marked it). The manifest is
 * written LAST: a sequence number without a manifest is a partial upload (a worker died mid-way) and is never
 * restored. Restoring takes the newest checkpoint whose tar matches its manifest's sha256 and size, skipping corrupt or
 * partial ones for the previous good one. This worker's own disk failing (full, read-only, I/O errors) is not a
 * checkpoint being bad: it fails the restore (RestoreDiskError), since starting from an older state would lose work
 * and later uploads of it would prune the good checkpoint.
 *
 * The task contract (FLEETWISE_CHECKPOINT_DIR):
 * - The task writes its state files into the directory, then creates an empty `COMPLETE` file. The worker uploads the
 *   directory (without the marker) and deletes `COMPLETE` when the upload is durable. The task must not modify the
 *   directory while `COMPLETE` exists: it waits, or skips that checkpoint.
 * - A task that never writes the marker is uploaded when the directory is quiescent: its listing (names, sizes,
 *   modification times) differs from the last upload and has not changed for `quiescentMs`. Once a task has written a
 *   marker, only markers trigger uploads (a slow marker-writer is never caught half-way), after an agent restart or a
 *   move too: the manifest records it.
 * - After the task exits, `flush()` uploads whatever complete state is left (marker present, or any change for a
 *   task that does not use markers), so a final checkpoint written on the signal is never lost.
 * - On a restore, the directory is emptied and the checkpoint's files are extracted into it before the task starts.
 * - Symlinks are kept as links and must be relative and point inside the directory, also when followed through the
 *   directory's other links; other special files are left out.
 *
 * The tar is written and extracted in-process (src/worker/archives.ts, which also holds extraction's safety
 * rules); checkpoints that the host's GNU tar wrote read the same way.
 */
export const COMPLETE_MARKER = 'COMPLETE';

export const checkpointManifestSchema = z.strictObject({
  version: z.literal(1),
  jobId: z.string().min(1),
  taskId: z.string().min(1),
  seq: z.number().int().positive(),
  createdAt: z.string().datetime(),
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
  sizeBytes: z.number().int().nonnegative(),
  files: z.array(z.string()),
  /**
   * The task marked this checkpoint COMPLETE. The task's use of markers outlives the watcher that saw it (an agent
   * restart, a move): a later watcher reads it back and uploads that task's checkpoints only on markers. Absent from
   * manifests written before it was recorded.
   */
  marked: z.boolean().optional(),
});
export type CheckpointManifest = z.infer<typeof checkpointManifestSchema>;

export interface StoredCheckpoint {
  readonly seq: number;
  /** The manifest exists (the upload finished); its tar is verified only when restoring. */
  readonly complete: boolean;
}

/** Every sequence number under the task's prefix, ascending, with whether its manifest exists. */
export async function listCheckpoints(store: ObjectStore, ref: CheckpointRef): Promise<StoredCheckpoint[]> {
  const seen = new Map<number, boolean>();
  for await (const o of store.list(checkpointPrefix(ref))) {
    const parsed = parseCheckpointKey(ref, o.key);
    if (parsed === undefined) continue;
    seen.set(parsed.seq, (seen.get(parsed.seq) ?? false) || parsed.part === 'manifest');
  }
  return [...seen.entries()].sort((a, b) => a[0] - b[0]).map(([seq, complete]) => ({ seq, complete }));
}

/** Files of the checkpoint directory that belong in a checkpoint (everything but the marker and temp files). */
async function checkpointFiles(dir: string): Promise<string[]> {
  return (await listFiles(dir)).filter((f) => f !== COMPLETE_MARKER);
}

export interface UploadResult {
  readonly manifest: CheckpointManifest;
  readonly durationMs: number;
}

export interface UploadOptions {
  /** The task marked this state COMPLETE (recorded in the manifest); false by default. */
  readonly marked?: boolean;
  readonly now?: () => Date;
}

/**
 * Upload `dir` as checkpoint `seq`: the tar streams through a sha256 hash into the store (multipart for large ones,
 * via the store), then the manifest. A failure leaves no manifest (so the seq counts as partial) and removes the tar.
 */
export async function uploadCheckpoint(
  store: ObjectStore,
  ref: CheckpointRef,
  dir: string,
  seq: number,
  options: UploadOptions = {},
): Promise<UploadResult> {
  const { marked = false, now = () => new Date() } = options;
  const started = Date.now();
  const listed = await checkpointFiles(dir);
  if (listed.some((f) => f.includes('\n')))
    throw new Error(`checkpoint of ${ref.taskId}: file names with newlines are not supported`);
  const keys = checkpointKeys(ref, seq);
  const hash = createHash('sha256');
  let sizeBytes = 0;
  const { tar, files } = await packCheckpoint(dir, listed).catch((e: Error) => {
    throw new Error(`checkpoint ${seq} of ${ref.taskId}: ${e.message}`);
  });
  const hashed = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      hash.update(chunk);
      sizeBytes += chunk.length;
      done(null, chunk);
    },
  });
  tar.once('error', (e) => hashed.destroy(new Error(`checkpoint ${seq} of ${ref.taskId}: ${e.message}`)));
  tar.pipe(hashed);
  try {
    // The tar's size, known before packing, lets the store choose parts large enough for a checkpoint of any size.
    await store.put(keys.data, hashed, { sizeHintBytes: await tarSizeEstimate(dir, listed) });
  } catch (e) {
    tar.destroy();
    hashed.destroy();
    await store.delete(keys.data).catch(() => undefined);
    throw e;
  }
  const manifest: CheckpointManifest = {
    version: 1,
    jobId: ref.jobId,
    taskId: ref.taskId,
    seq,
    createdAt: now().toISOString(),
    sha256: hash.digest('hex'),
    sizeBytes,
    files,
    marked,
  };
  await store.put(keys.manifest, Buffer.from(`${JSON.stringify(manifest, null, 2)}\n`));
  return { manifest, durationMs: Date.now() - started };
}

/**
 * About the size of the tar of `files`: each file's bytes padded to 512-byte blocks, a header block each (two for long
 * names), and the end blocks. A file that vanished counts nothing (packing reports it).
 */
async function tarSizeEstimate(dir: string, files: readonly string[]): Promise<number> {
  let bytes = 1024;
  for (const file of files) {
    const info = await lstat(join(dir, file)).catch(() => undefined);
    const content = info?.isFile() === true ? Math.ceil(info.size / 512) * 512 : 0;
    bytes += content + (file.length > 100 ? 2048 : 512);
  }
  return bytes;
}

export interface SkippedCheckpoint {
  readonly seq: number;
  readonly reason: string;
}

export interface RestoreResult {
  /** The restored checkpoint, or undefined when there is no good one (the task starts from zero). */
  readonly manifest: CheckpointManifest | undefined;
  /** Newer checkpoints passed over (partial, corrupt), newest first. */
  readonly skipped: readonly SkippedCheckpoint[];
  readonly durationMs: number;
}

/** Checkpoint `seq`'s manifest; an ObjectStoreError when the store fails, another Error when the manifest is bad. */
async function readManifest(
  store: ObjectStore,
  ref: CheckpointRef,
  seq: number,
): Promise<CheckpointManifest> {
  const body = await store.getBuffer(checkpointKeys(ref, seq).manifest);
  const parsed = checkpointManifestSchema.safeParse(JSON.parse(body.toString()));
  if (!parsed.success)
    throw new Error(parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; '));
  if (parsed.data.seq !== seq) throw new Error(`manifest says seq ${parsed.data.seq}`);
  return parsed.data;
}

/**
 * Whether the task uses COMPLETE markers, as its newest readable manifest that says records it (older manifests say
 * nothing). A bad manifest is passed over for an older one; the store failing fails the call.
 */
export async function usesMarkers(
  store: ObjectStore,
  ref: CheckpointRef,
  stored: readonly StoredCheckpoint[],
): Promise<boolean> {
  for (const { seq, complete } of [...stored].reverse()) {
    if (!complete) continue;
    try {
      const { marked } = await readManifest(store, ref, seq);
      if (marked !== undefined) return marked;
    } catch (e) {
      if (isObjectStoreError(e)) throw e;
    }
  }
  return false;
}

/**
 * Restoring failed on this worker's own disk (writing the downloaded tar, emptying the directory, extracting into it:
 * ENOSPC, EACCES, EROFS, EIO…). The checkpoint may be good: no older one is tried.
 */
export class RestoreDiskError extends Error {
  constructor(ref: CheckpointRef, seq: number, cause: unknown) {
    const reason = cause instanceof Error ? cause.message : String(cause);
    super(
      `restoring checkpoint ${seq} of ${ref.taskId}: this worker's disk failed (${reason}); ` +
        'not falling back to an older checkpoint, which would lose the work since',
      { cause },
    );
    this.name = 'RestoreDiskError';
  }
}

/** A failed system call (what Node's fs reports with `syscall`), as opposed to an archive's content being refused. */
function isSystemError(e: unknown): boolean {
  return e instanceof Error && typeof (e as NodeJS.ErrnoException).syscall === 'string';
}

async function emptyDir(dir: string): Promise<void> {
  await mkdir(dir, { recursive: true });
  for (const name of await readdir(dir)) await rm(join(dir, name), { recursive: true, force: true });
}

/**
 * Download the newest checkpoint whose tar matches its manifest and extract it into `dir` (emptied first). The tar
 * is verified (sha256, size) in a temp file next to `dir` before anything is extracted. Only the checkpoint's content
 * passes it over for an older one (partial, bad manifest, sha256 or size mismatch, an unsafe entry, a tar that does
 * not parse). The store failing fails the restore (ObjectStoreError, for the caller to try again), and so does this
 * worker's disk failing (RestoreDiskError, `dir` emptied to give the space back), instead of passing over a good
 * checkpoint for an older one, or for none.
 */
export async function restoreLatestCheckpoint(
  store: ObjectStore,
  ref: CheckpointRef,
  dir: string,
): Promise<RestoreResult> {
  const started = Date.now();
  const skipped: SkippedCheckpoint[] = [];
  const stored = (await listCheckpoints(store, ref)).reverse();
  await mkdir(dirname(dir), { recursive: true });
  for (const { seq, complete } of stored) {
    if (!complete) {
      skipped.push({ seq, reason: 'partial (no manifest)' });
      continue;
    }
    const keys = checkpointKeys(ref, seq);
    let manifest: CheckpointManifest;
    try {
      manifest = await readManifest(store, ref, seq);
    } catch (e) {
      if (isObjectStoreError(e)) throw e;
      skipped.push({ seq, reason: `bad manifest: ${(e as Error).message}` });
      continue;
    }
    const temp = join(dirname(dir), `.fleetwise-restore-${randomBytes(6).toString('hex')}.tar`);
    try {
      const hash = createHash('sha256');
      let size = 0;
      const body = await store.get(keys.data);
      const counter = new Transform({
        transform(chunk: Buffer, _encoding, done) {
          hash.update(chunk);
          size += chunk.length;
          done(null, chunk);
        },
      });
      // The store relays its body's failures as its own, so anything else failed writing the temp file here.
      await pipeline(body, counter, createWriteStream(temp)).catch((e: unknown) => {
        throw isObjectStoreError(e) ? e : new RestoreDiskError(ref, seq, e);
      });
      const sha256 = hash.digest('hex');
      if (size !== manifest.sizeBytes || sha256 !== manifest.sha256) {
        skipped.push({
          seq,
          reason: `corrupt: ${size} bytes with sha256 ${sha256.slice(0, 12)}…, manifest says ${manifest.sizeBytes} bytes with ${manifest.sha256.slice(0, 12)}…`,
        });
        continue;
      }
      try {
        await emptyDir(dir);
        await extractCheckpoint(temp, dir);
      } catch (e) {
        // A failed system call is the disk's doing; the archive's faults come as UnsafeArchiveEntry or tar errors.
        throw isSystemError(e) ? new RestoreDiskError(ref, seq, e) : e;
      }
      return { manifest, skipped, durationMs: Date.now() - started };
    } catch (e) {
      if (isObjectStoreError(e)) throw e;
      if (e instanceof RestoreDiskError) {
        await emptyDir(dir).catch(() => undefined);
        throw e;
      }
      skipped.push({ seq, reason: `unreadable: ${(e as Error).message}` });
    } finally {
      await unlink(temp).catch(() => undefined);
    }
  }
  await emptyDir(dir);
  return { manifest: undefined, skipped, durationMs: Date.now() - started };
}

/**
 * Which checkpoints to delete, from a listing (oldest first): keep the newest `keep` complete ones; delete older ones,
 * and partial ones older than the oldest kept (a newer partial one may be an upload in flight).
 */
export function checkpointsToPrune(stored: readonly StoredCheckpoint[], keep: number): number[] {
  if (!Number.isInteger(keep) || keep < 1) throw new Error(`keep must be a whole number ≥ 1, got ${keep}`);
  const complete = stored.filter((c) => c.complete);
  if (complete.length === 0) return [];
  const oldestKept = complete[Math.max(0, complete.length - keep)]?.seq ?? 0;
  return stored.filter((c) => c.seq < oldestKept).map((c) => c.seq);
}

/** The manifest goes first, so a half-deleted checkpoint is partial, never restored. */
export async function deleteCheckpoints(
  store: ObjectStore,
  ref: CheckpointRef,
  seqs: readonly number[],
): Promise<void> {
  for (const seq of seqs) {
    const keys = checkpointKeys(ref, seq);
    await store.delete(keys.manifest);
    await store.delete(keys.data);
  }
}

/**
 * Names, sizes and modification times of the directory's checkpoint files: "did anything change?" Links are not
 * followed (a dangling one is state like any file, and is packed as a link). '' when the directory or a file in it is
 * missing (not made yet, or mid-rename: the next poll looks again); any other failure is thrown, to be reported.
 */
export async function fingerprint(dir: string): Promise<string> {
  try {
    const files = await checkpointFiles(dir);
    const parts = await Promise.all(
      files.map(async (f) => {
        const s = await lstat(join(dir, f));
        return `${f}:${s.size}:${s.mtimeMs}`;
      }),
    );
    return parts.join('\n');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return '';
    throw new Error(`reading the checkpoint directory: ${(e as Error).message}`);
  }
}

export async function exists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch {
    return false;
  }
}
