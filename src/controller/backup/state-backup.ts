import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { Transform, type Readable } from 'node:stream';
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

/**
 * One backup of the controller's state to the object store. The snapshot is SQLite's online backup (consistent,
 * taken while the controller runs), compressed with gzip, and stored under a new sequence number: the data first,
 * then its manifest (size, sha256), then `latest.json`, so a reader that finds a manifest finds its data, and one
 * that follows `latest.json` finds a complete backup. Then backups beyond the newest `keep` are deleted (manifest
 * first, so no manifest ever points at deleted data). Callers run one backup at a time (BackupSchedule).
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
    const seq = (await this.previousSeq()) + 1;
    const keys = stateBackupKeys(cluster, seq);
    await mkdir(this.options.workDir, { recursive: true, mode: 0o700 });
    const snapshot = join(this.options.workDir, `backup-${process.pid}-${seq}.db`);
    const compressed = `${snapshot}.gz`;
    let dataStored = false;
    let manifestStored = false;
    try {
      const takenAtSeconds = this.options.nowSeconds();
      await this.options.source.snapshotTo(snapshot);
      const databaseBytes = (await stat(snapshot)).size;
      const { sha256, sizeBytes } = await gzipFile(snapshot, compressed);
      // Only if absent: a seq already taken means another controller writes this cluster's backups to this store
      // (each would otherwise replace the other's backups, and a restore would take whichever came last).
      await this.putNew(keys.data, createReadStream(compressed), seq, sha256);
      dataStored = true;
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
      const manifestBytes = documentBytes(manifest);
      await this.putNew(keys.manifest, manifestBytes, seq, sha256Of(manifestBytes));
      manifestStored = true;
      await objectStore.put(latestBackupKey(cluster), documentBytes(manifest));
      this.lastSeq = seq;
      await this.storeSecrets();
      await this.rotate(seq);
      return manifest;
    } catch (e) {
      // Stored whole but for the pointer: the backup is complete (the next one's pointer covers it). Its data alone
      // took the seq: freed again for the next backup, or (the store failing the delete too) left partial, for
      // rotation to delete, while the next backup takes the next seq.
      if (manifestStored) this.lastSeq = seq;
      else if (dataStored && !(e instanceof BackupConflictError)) {
        const freed = await objectStore.delete(keys.data).then(
          () => true,
          () => false,
        );
        if (!freed) this.lastSeq = seq;
      }
      throw e;
    } finally {
      for (const file of [snapshot, compressed, `${snapshot}-wal`, `${snapshot}-shm`])
        await rm(file, { force: true });
    }
  }

  /**
   * Store a backup's object under a seq no one has used yet; another writer's object there fails the backup, loudly.
   * An object with our own bytes is our own write (a request the SDK retried after it had landed).
   */
  private async putNew(key: string, body: Buffer | Readable, seq: number, sha256: string): Promise<void> {
    const { objectStore, cluster } = this.options;
    try {
      await objectStore.put(key, body, { ifAbsent: true });
    } catch (e) {
      if (!(e instanceof ObjectExistsError)) throw e;
      if ((await sha256OfObject(objectStore, key)) === sha256) return;
      // The next backup lists the store again and takes the next free seq.
      this.lastSeq = undefined;
      throw new BackupConflictError(
        `state backup ${seq} of cluster ${cluster} was not stored: ${objectStore.location} ${key} was written by ` +
          `another controller meanwhile. Two controllers are writing backups of cluster ${cluster} to the same ` +
          'store; a restore takes the newest, whichever wrote it: stop one, or give each its own cluster name ' +
          'or store',
        { cause: e },
      );
    }
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
