import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGzip } from 'node:zlib';
import {
  backupSecretsKey,
  latestBackupKey,
  parseStateBackupKey,
  stateBackupKeys,
  stateBackupPrefix,
} from '../../protocol/object-keys.js';
import type { ObjectStore } from '../../storage/object-store.js';
import { ObjectExistsError } from '../../storage/object-store-error.js';
import {
  backupManifestSchema,
  documentBytes,
  readDocument,
  type BackupManifest,
  type BackupSecrets,
} from './backup-documents.js';

/** A backup refused because another writer took its seq: another controller backs up the same cluster to the store. */
export class BackupConflictError extends Error {
  override name = 'BackupConflictError';
}

/** What a backup copies: the state store's database, as of one moment (SqliteStateStore implements it). */
export interface BackupSource {
  /** Write a consistent copy of the database to `destination`, a new file, without blocking the event loop long. */
  snapshotTo(destination: string): Promise<void>;
  /** Changes whenever the database does; equal marks mean nothing was written in between. */
  changeMark(): string;
}

export interface StateBackupOptions {
  readonly source: BackupSource;
  readonly objectStore: ObjectStore;
  readonly cluster: string;
  /** A private directory for the snapshot while it is compressed (the state directory: the copy holds secrets). */
  readonly workDir: string;
  /** Backups kept (the newest ones); older ones are deleted after each new backup. */
  readonly keep: number;
  /** The tokens a restore needs besides the database, read at each backup (written when they change). */
  readonly secrets?: (() => BackupSecrets) | undefined;
  readonly nowSeconds: () => number;
}

/** Seqs a backup moves past, at most, when each it tries holds another backup's data without its manifest. */
const INCOMPLETE_SEQS_SKIPPED = 3;

/**
 * One backup of the controller's state to the object store. The snapshot is SQLite's online backup (consistent,
 * taken while the controller runs), compressed with gzip, and stored under a new sequence number: the data first,
 * then its manifest (size, sha256), then `latest.json`, so a reader that finds a manifest finds its data, and one
 * that follows `latest.json` finds a complete backup. Then backups beyond the newest `keep` are deleted (manifest
 * first, so no manifest ever points at deleted data). Callers run one backup at a time (BackupSchedule).
 *
 * A write the store reports failed may have landed all the same (S3 answers an error when the reply is lost), so a
 * seq this controller has written to is never written again: a failed backup leaves its seq to rotation, and the next
 * one takes the next seq. Data under a seq nobody has finished (no manifest) is such a leftover, or another writer's
 * backup under way: a backup moves past it. Only a manifest that is not this backup's means another controller.
 */
export class StateBackup {
  private lastSeq: number | undefined;
  private lastSecrets: string | undefined;

  constructor(private readonly options: StateBackupOptions) {
    if (!Number.isInteger(options.keep) || options.keep < 1)
      throw new Error(`backups kept must be a whole number ≥ 1, got ${options.keep}`);
  }

  /** Take, store and rotate one backup; answers its manifest. Throws when any step fails (nothing is half-visible). */
  async run(): Promise<BackupManifest> {
    const { objectStore, cluster } = this.options;
    // A process killed mid-backup leaves its snapshot (which holds secrets) behind: the first backup clears them.
    if (this.lastSeq === undefined) await rm(this.options.workDir, { recursive: true, force: true });
    const firstSeq = (await this.previousSeq()) + 1;
    await mkdir(this.options.workDir, { recursive: true, mode: 0o700 });
    const snapshot = join(this.options.workDir, `backup-${process.pid}-${firstSeq}.db`);
    const compressed = `${snapshot}.gz`;
    try {
      const takenAtSeconds = this.options.nowSeconds();
      await this.options.source.snapshotTo(snapshot);
      const databaseBytes = (await stat(snapshot)).size;
      const { sha256, sizeBytes } = await gzipFile(snapshot, compressed);
      const seq = await this.storeData(firstSeq, compressed, sha256);
      const keys = stateBackupKeys(cluster, seq);
      const manifest: BackupManifest = {
        version: 1,
        cluster,
        seq,
        key: keys.data,
        sha256,
        sizeBytes,
        databaseBytes,
        takenAtSeconds,
      };
      await this.storeManifest(seq, documentBytes(manifest));
      // Complete from here on: a failed pointer write is covered by the next backup's.
      this.lastSeq = seq;
      await objectStore.put(latestBackupKey(cluster), documentBytes(manifest));
      await this.storeSecrets();
      await this.rotate(seq);
      return manifest;
    } finally {
      for (const file of [snapshot, compressed, `${snapshot}-wal`, `${snapshot}-shm`])
        await rm(file, { force: true });
    }
  }

  /**
   * Store the backup's data under `firstSeq` or the first free seq after it; answers the seq taken. Only if absent: two
   * controllers writing one cluster's backups would otherwise replace each other's. An object with our own bytes is
   * our own write (a request the SDK retried after it had landed).
   */
  private async storeData(firstSeq: number, file: string, sha256: string): Promise<number> {
    const { objectStore, cluster } = this.options;
    let seq = firstSeq;
    for (let skipped = 0; ; skipped++) {
      const keys = stateBackupKeys(cluster, seq);
      try {
        await objectStore.put(keys.data, createReadStream(file), { ifAbsent: true });
        return seq;
      } catch (e) {
        if (!(e instanceof ObjectExistsError)) {
          // Stored or not (a lost reply): the next backup takes the next seq.
          this.lastSeq = seq;
          throw e;
        }
        if ((await sha256OfObject(objectStore, keys.data)) === sha256) return seq;
        if (await objectStore.exists(keys.manifest)) throw this.conflict(seq, keys.data, e);
        if (skipped === INCOMPLETE_SEQS_SKIPPED) throw this.conflict(seq, keys.data, e);
      }
      // Data without its manifest: a backup that failed after storing it (maybe this controller's, its reply lost),
      // or another writer's under way. Not ours to delete; the newest seq in the store is passed too.
      this.lastSeq = undefined;
      seq = Math.max(seq, await this.previousSeq()) + 1;
    }
  }

  /**
   * Store the manifest, only if absent. A failed write is looked for: one that landed (its reply lost) completes the
   * backup. Either way this seq is never written again: the data stays (a manifest may yet point at it; rotation
   * deletes it once older than the backups kept).
   */
  private async storeManifest(seq: number, bytes: Buffer): Promise<void> {
    const { objectStore, cluster } = this.options;
    const key = stateBackupKeys(cluster, seq).manifest;
    const ours = sha256Of(bytes);
    try {
      await objectStore.put(key, bytes, { ifAbsent: true });
    } catch (e) {
      this.lastSeq = seq;
      if (e instanceof ObjectExistsError) {
        if ((await sha256OfObject(objectStore, key)) === ours) return;
        throw this.conflict(seq, key, e);
      }
      const stored = await sha256OfObject(objectStore, key).catch(() => undefined);
      if (stored === ours) return;
      if (stored !== undefined) throw this.conflict(seq, key, e);
      throw e;
    }
  }

  /** Another writer's manifest under a seq this backup took: another controller writes this cluster's backups. */
  private conflict(seq: number, key: string, cause: unknown): BackupConflictError {
    const { objectStore, cluster } = this.options;
    // The next backup lists the store again and takes the next free seq.
    this.lastSeq = undefined;
    return new BackupConflictError(
      `state backup ${seq} of cluster ${cluster} was not stored: ${objectStore.location} ${key} was written by ` +
        `another controller meanwhile. Two controllers are writing backups of cluster ${cluster} to the same ` +
        'store; a restore takes the newest, whichever wrote it: stop one, or give each its own cluster name ' +
        'or store',
      { cause },
    );
  }

  /**
   * The newest seq in the store: `latest.json`'s, or a higher one listed (a backup whose pointer write failed), so a
   * new controller (a restart, a restored box) never writes over a backup.
   */
  private async previousSeq(): Promise<number> {
    if (this.lastSeq !== undefined) return this.lastSeq;
    const { objectStore, cluster } = this.options;
    let seq = 0;
    try {
      const latest = readDocument(
        backupManifestSchema,
        await objectStore.getBuffer(latestBackupKey(cluster)),
        latestBackupKey(cluster),
      );
      seq = latest.seq;
    } catch {
      // A missing or unreadable pointer is rewritten by this backup; the listing below still finds every seq.
    }
    for await (const info of objectStore.list(`${stateBackupPrefix(cluster)}state-`)) {
      const parsed = parseStateBackupKey(info.key);
      if (parsed !== undefined && parsed.cluster === cluster) seq = Math.max(seq, parsed.seq);
    }
    return seq;
  }

  private async storeSecrets(): Promise<void> {
    const secrets = this.options.secrets?.();
    if (secrets === undefined) return;
    const text = JSON.stringify(secrets);
    if (text === this.lastSecrets) return;
    await this.options.objectStore.put(backupSecretsKey(this.options.cluster), documentBytes(secrets));
    this.lastSecrets = text;
  }

  /** Delete every backup older than the newest `keep` complete ones (a complete backup has its manifest). */
  private async rotate(newest: number): Promise<void> {
    const { objectStore, cluster, keep } = this.options;
    const parts = new Map<number, { data?: string; manifest?: string }>();
    for await (const info of objectStore.list(`${stateBackupPrefix(cluster)}state-`)) {
      const parsed = parseStateBackupKey(info.key);
      if (parsed === undefined || parsed.cluster !== cluster || parsed.seq > newest) continue;
      const entry = parts.get(parsed.seq) ?? {};
      entry[parsed.part] = info.key;
      parts.set(parsed.seq, entry);
    }
    const complete = [...parts]
      .filter(([, p]) => p.data !== undefined && p.manifest !== undefined)
      .map(([seq]) => seq)
      .sort((a, b) => b - a);
    const oldestKept = complete[Math.min(keep, complete.length) - 1] ?? newest;
    for (const [seq, p] of [...parts].sort(([a], [b]) => a - b)) {
      if (seq >= oldestKept) continue;
      if (p.manifest !== undefined) await objectStore.delete(p.manifest);
      if (p.data !== undefined) await objectStore.delete(p.data);
    }
  }
}

function sha256Of(bytes: Buffer): string {
  return createHash('sha256').update(bytes).digest('hex');
}

async function sha256OfObject(store: ObjectStore, key: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of await store.get(key)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

/** gzip `from` into `to` (0600: it holds the state), hashing the compressed bytes on the way. */
async function gzipFile(from: string, to: string): Promise<{ sha256: string; sizeBytes: number }> {
  const hash = createHash('sha256');
  let sizeBytes = 0;
  const tap = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      hash.update(chunk);
      sizeBytes += chunk.length;
      done(null, chunk);
    },
  });
  await pipeline(createReadStream(from), createGzip(), tap, createWriteStream(to, { mode: 0o600 }));
  return { sha256: hash.digest('hex'), sizeBytes };
}
