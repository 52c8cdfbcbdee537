import { createHash } from 'node:crypto';
import { createWriteStream, existsSync, statSync } from 'node:fs';
import { chmod, mkdir, rename, rm, writeFile } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';
import Database from 'better-sqlite3';
import type { Catalog } from '../../core/catalog.js';
import {
  backupSecretsKey,
  latestBackupKey,
  parseStateBackupKey,
  stateBackupKeys,
  stateBackupPrefix,
} from '../../protocol/object-keys.js';
import { ObjectNotFoundError, type ObjectStore } from '../../storage/object-store.js';
import { isObjectStoreError } from '../../storage/object-store-error.js';
import { markInitialized } from '../state/initialization.js';
import { recordPreviousStoreId } from '../state/lineage.js';
import { renewStoreId } from '../state/sqlite/migrate.js';
import { LATEST_SCHEMA_VERSION } from '../state/sqlite-schema.js';
import { SqliteStateStore } from '../state/sqlite-state-store.js';
import {
  backupManifestSchema,
  backupSecretsSchema,
  type BackupSecrets,
  readDocument,
  SECRET_NAMES,
  type BackupManifest,
  type SecretFilePaths,
} from './backup-documents.js';
import { ArchivedDocumentError, rebuildJobs, type JobRebuildSummary } from './rebuild-jobs.js';
import { parseRestoreSource } from './restore-source.js';

/** A restore refused: the backup is missing, corrupt, of another cluster, or there is a state it would replace. */
export class RestoreError extends Error {
  override name = 'RestoreError';
}

export interface RestoreOptions {
  /** `--restore-from`: an object store, or one backup in it (restore-source.ts). */
  readonly from: string;
  readonly cluster: string;
  /** The state database to create (`<state-dir>/state.db`); it must not hold a state yet. */
  readonly dbFile: string;
  /** The state directory's token files, written from the backup's secrets when it has them. */
  readonly secretFiles: SecretFilePaths;
  readonly openObjectStore: (location: string) => ObjectStore | Promise<ObjectStore>;
  /** What archived job specs are validated against (the catalog the controller runs with). */
  readonly catalog: Catalog;
}

export interface RestoreSummary extends JobRebuildSummary {
  readonly location: string;
  readonly manifest: BackupManifest;
  /** Which token files came from the backup. */
  readonly secrets: readonly string[];
  /**
   * Newer backups passed over, newest first: each could not be read whole, did not verify, or is not a state this
   * fleetwise restores (not a fleetwise state, or a newer fleetwise's).
   */
  readonly skipped: readonly SkippedBackup[];
}

export interface SkippedBackup {
  /** The manifest (or `latest.json`) that named it. */
  readonly key: string;
  readonly reason: string;
}

/**
 * Start a new box from a backup (`fleetwise controller --restore-from …`): find the backup (the cluster's newest, or
 * the one named), download it, check it (its sha256 against the manifest, gzip's own CRC, SQLite's integrity check,
 * the fleetwise schema), give it a store id of its own (migrate.ts renewStoreId), bring it up to the job archive
 * (rebuild-jobs.ts), and only then move it into place with one rename: a restore installs a checked, complete state
 * or nothing. The state directory's tokens come back from the backup's secrets. What the backup could not know is
 * found again once the controller runs: instances by their cluster tags (cloud-sync.ts), tasks from the workers that
 * register again.
 */
export async function restoreState(options: RestoreOptions): Promise<RestoreSummary> {
  refuseExistingState(options.dbFile);
  const source = parseRestoreSource(options.from);
  if (source.cluster !== undefined && source.cluster !== options.cluster)
    throw new RestoreError(
      `${options.from} is a backup of cluster ${source.cluster}, but this controller runs cluster ${options.cluster} ` +
        `(start it with --cluster ${source.cluster})`,
    );
  const objectStore = await options.openObjectStore(source.location);
  const candidates =
    source.key === undefined
      ? await newestFirst(objectStore, options.cluster)
      : [await namedBackup(objectStore, options.cluster, source.key)];
  const workDir = join(dirname(options.dbFile), `.restore-${process.pid}`);
  await rm(workDir, { recursive: true, force: true });
  await mkdir(workDir, { recursive: true, mode: 0o700 });
  try {
    const restored = join(workDir, basename(options.dbFile));
    const { manifest, skipped } = await fetchNewestVerified(objectStore, candidates, restored);
    const rebuilt = await rebuildOnCopy(restored, manifest.key, objectStore, options);
    const secrets = await restoreSecrets(objectStore, options);
    await install(restored, options.dbFile);
    return { location: objectStore.location, manifest, secrets, skipped, ...rebuilt };
  } finally {
    await rm(workDir, { recursive: true, force: true });
  }
}

/** A backup a restore may take: its manifest, or why it cannot be read. */
interface Candidate {
  /** The manifest's key (`latest.json`'s, for the pointer). */
  readonly key: string;
  readonly manifest: BackupManifest | RestoreError;
}

/**
 * Download and check the candidates in turn, newest first, until one verifies. A backup missing its data (a manifest
 * written while its data was lost or deleted) or failing a check (the schema's too) is passed over for the next older
 * one, and said so; the store failing is not the backup's fault, so it stops the restore (try again) rather than take
 * an older one.
 */
async function fetchNewestVerified(
  store: ObjectStore,
  candidates: readonly Candidate[],
  to: string,
): Promise<{ manifest: BackupManifest; skipped: SkippedBackup[] }> {
  const failures: RestoreError[] = [];
  const skipped: SkippedBackup[] = [];
  for (const candidate of candidates) {
    for (const file of [to, `${to}-wal`, `${to}-shm`]) await rm(file, { force: true });
    try {
      if (candidate.manifest instanceof RestoreError) throw candidate.manifest;
      await download(store, candidate.manifest, to);
      checkIntegrity(to, candidate.manifest.key);
      checkSchema(to, candidate.manifest.key);
      return { manifest: candidate.manifest, skipped };
    } catch (e) {
      if (!(e instanceof RestoreError) || isObjectStoreError(e.cause)) throw e;
      failures.push(e);
      skipped.push({ key: candidate.key, reason: e.message });
    }
  }
  if (failures.length === 1 && failures[0] !== undefined) throw failures[0];
  throw new RestoreError(
    `none of the ${failures.length} backups in ${store.location} verifies: ` +
      skipped.map((s) => `${s.key}: ${s.reason}`).join('; '),
  );
}

/** Read a backup manifest; undefined when there is none. The store failing is thrown as is (worth another try). */
async function readManifest(
  store: ObjectStore,
  key: string,
): Promise<BackupManifest | RestoreError | undefined> {
  let bytes: Buffer;
  try {
    bytes = await store.getBuffer(key);
  } catch (e) {
    if (e instanceof ObjectNotFoundError) return undefined;
    throw e;
  }
  const where = `${store.location} ${key}`;
  try {
    return readDocument(backupManifestSchema, bytes, where);
  } catch (e) {
    return new RestoreError(`backup manifest ${where} is unreadable: ${(e as Error).message}`);
  }
}

/** A manifest of the cluster, or the reason it is not one. */
function ofCluster(manifest: BackupManifest | RestoreError, cluster: string): BackupManifest | RestoreError {
  if (manifest instanceof RestoreError || manifest.cluster === cluster) return manifest;
  return new RestoreError(
    `the backup ${manifest.key} is of cluster ${manifest.cluster}, but this controller runs cluster ${cluster}`,
  );
}

/**
 * Every backup of the cluster that has its manifest, newest first, whatever latest.json says: the pointer is written
 * after the manifest, so a backup whose pointer write failed is newer than the pointer (and a missing pointer points
 * nowhere). `latest.json` joins them where its seq puts it when it says something no manifest does (the manifests
 * deleted, or another one written since), and last when it is unreadable (a broken pointer matters only when nothing
 * else restores).
 */
async function newestFirst(store: ObjectStore, cluster: string): Promise<Candidate[]> {
  const seqs = new Set<number>();
  for await (const info of store.list(`${stateBackupPrefix(cluster)}state-`)) {
    const parsed = parseStateBackupKey(info.key);
    if (parsed?.part === 'manifest' && parsed.cluster === cluster) seqs.add(parsed.seq);
  }
  const candidates: Candidate[] = [];
  for (const seq of [...seqs].sort((a, b) => b - a)) {
    const key = stateBackupKeys(cluster, seq).manifest;
    const manifest = await readManifest(store, key);
    // Gone since the listing (rotated by a running controller): the older ones remain.
    if (manifest !== undefined) candidates.push({ key, manifest: ofCluster(manifest, cluster) });
  }
  const latestKey = latestBackupKey(cluster);
  const latest = await readManifest(store, latestKey);
  if (latest instanceof RestoreError) candidates.push({ key: latestKey, manifest: latest });
  else if (latest !== undefined && !candidates.some((c) => sameManifest(c.manifest, latest))) {
    const at = candidates.findIndex(
      (c) => !(c.manifest instanceof RestoreError) && c.manifest.seq < latest.seq,
    );
    candidates.splice(at === -1 ? candidates.length : at, 0, {
      key: latestKey,
      manifest: ofCluster(latest, cluster),
    });
  }
  if (candidates.length === 0)
    throw new RestoreError(`no backup of cluster ${cluster} in ${store.location} (looked for ${latestKey})`);
  return candidates;
}

function sameManifest(a: BackupManifest | RestoreError, b: BackupManifest): boolean {
  return !(a instanceof RestoreError) && a.seq === b.seq && a.key === b.key && a.sha256 === b.sha256;
}

/** The backup `--restore-from` names: that one only, never another in its place. */
async function namedBackup(store: ObjectStore, cluster: string, key: string): Promise<Candidate> {
  const parsed = parseStateBackupKey(key);
  if (parsed === undefined) throw new RestoreError(`${key} is not a backup key`);
  const keys = stateBackupKeys(parsed.cluster, parsed.seq);
  const manifest = await readManifest(store, keys.manifest);
  if (manifest === undefined)
    throw new RestoreError(
      `backup ${store.location} ${keys.data} has no manifest (${keys.manifest}): it is incomplete or was deleted`,
    );
  if (manifest instanceof RestoreError) throw manifest;
  const checked = ofCluster(manifest, cluster);
  if (checked instanceof RestoreError) throw checked;
  return { key: keys.manifest, manifest: checked };
}

/** A restore starts a new box: it never replaces a state that has jobs or instances. */
function refuseExistingState(dbFile: string): void {
  if (!existsSync(dbFile) || statSync(dbFile).size === 0) return;
  let used: number;
  try {
    const store = new SqliteStateStore(dbFile);
    try {
      used = store.listJobs().length + store.listInstances().length;
    } finally {
      store.close();
    }
  } catch (e) {
    throw new RestoreError(
      `${dbFile} exists and is not an empty fleetwise state (${(e as Error).message}); move it away to restore`,
    );
  }
  if (used > 0)
    throw new RestoreError(
      `${dbFile} already holds a state (${used} job(s) and instance(s)); a restore starts a new box: move it away ` +
        'first, or start without --restore-from',
    );
}

/** Download and decompress the backup, checking its sha256 and size against the manifest. */
async function download(store: ObjectStore, manifest: BackupManifest, to: string): Promise<void> {
  const where = `${store.location} ${manifest.key}`;
  const hash = createHash('sha256');
  let compressedBytes = 0;
  const tap = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      hash.update(chunk);
      compressedBytes += chunk.length;
      done(null, chunk);
    },
  });
  let body: Readable;
  try {
    body = await store.get(manifest.key);
  } catch (e) {
    throw new RestoreError(
      `cannot read backup ${where}: ${(e as Error).message}${isObjectStoreError(e) ? '; try again' : ''}`,
      { cause: e },
    );
  }
  try {
    await pipeline(body, tap, createGunzip(), createWriteStream(to, { mode: 0o600 }));
  } catch (e) {
    // The store failing mid-download (a reset, a stall) says nothing about the backup: worth another try.
    if (isObjectStoreError(e))
      throw new RestoreError(`cannot read backup ${where}: ${e.message}; try again`, { cause: e });
    throw new RestoreError(`backup ${where} is corrupt: not a valid gzip stream (${(e as Error).message})`);
  }
  const sha256 = hash.digest('hex');
  if (sha256 !== manifest.sha256 || compressedBytes !== manifest.sizeBytes)
    throw new RestoreError(
      `backup ${where} is corrupt: ${compressedBytes} bytes with sha256 ${sha256}, its manifest says ` +
        `${manifest.sizeBytes} bytes with sha256 ${manifest.sha256}`,
    );
  const size = statSync(to).size;
  if (size !== manifest.databaseBytes)
    throw new RestoreError(
      `backup ${where} is corrupt: it decompresses to ${size} bytes, its manifest says ${manifest.databaseBytes}`,
    );
}

/** SQLite's own check of every page, index and constraint. */
function checkIntegrity(file: string, key: string): void {
  let problems: string[];
  try {
    const db = new Database(file, { fileMustExist: true });
    try {
      problems = (db.pragma('integrity_check') as { integrity_check: string }[]).map(
        (r) => r.integrity_check,
      );
    } finally {
      db.close();
    }
  } catch (e) {
    throw new RestoreError(`backup ${key} is not a usable SQLite database: ${(e as Error).message}`);
  }
  if (problems.length !== 1 || problems[0] !== 'ok')
    throw new RestoreError(
      `backup ${key} fails SQLite's integrity check: ${problems.slice(0, 5).join('; ')}` +
        `${problems.length > 5 ? ` (and ${problems.length - 5} more)` : ''}`,
    );
}

/**
 * A fleetwise state this fleetwise can open, read without changing it: one of a newer fleetwise (a schema version
 * above this one's) or not a fleetwise state at all is passed over like a corrupt one, saying which.
 */
function checkSchema(file: string, key: string): void {
  let tables: string[];
  let version: number | undefined;
  try {
    const db = new Database(file, { readonly: true, fileMustExist: true });
    try {
      tables = db
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
        .pluck()
        .all() as string[];
      if (tables.includes('schema_migrations'))
        version = Number(db.prepare('SELECT COALESCE(MAX(version), 0) FROM schema_migrations').pluck().get());
    } finally {
      db.close();
    }
  } catch (e) {
    throw new RestoreError(`backup ${key} is not a usable SQLite database: ${(e as Error).message}`);
  }
  if (version === undefined || version < 1) {
    const found = tables.length === 0 ? 'it has no tables' : `it has tables ${tables.join(', ')}`;
    throw new RestoreError(`backup ${key} is not a fleetwise state (${found})`);
  }
  if (version > LATEST_SCHEMA_VERSION)
    throw new RestoreError(
      `backup ${key} was written by a newer fleetwise (schema ${version} > ${LATEST_SCHEMA_VERSION}): upgrade ` +
        'fleetwise to restore it',
    );
}

/** On the downloaded copy: the schema (migrated if older), the job archive, then a store id of its own. */
async function rebuildOnCopy(
  file: string,
  backupKey: string,
  objectStore: ObjectStore,
  options: RestoreOptions,
): Promise<JobRebuildSummary> {
  let store: SqliteStateStore;
  try {
    store = new SqliteStateStore(file);
  } catch (e) {
    // The copy is a file of this restore's own: the backup is what the operator knows.
    const message = (e as Error).message.replaceAll(file, backupKey);
    throw new RestoreError(`backup ${backupKey} cannot be opened as a fleetwise state: ${message}`);
  }
  let rebuilt: JobRebuildSummary;
  try {
    try {
      rebuilt = await rebuildJobs(store, { objectStore, cluster: options.cluster }, options.catalog);
    } catch (e) {
      if (e instanceof ArchivedDocumentError)
        throw new RestoreError(`${e.message}; nothing was installed`, { cause: e });
      throw e;
    }
    // Instances the old box launched after the backup carry this id in their launch tokens (cloud-sync.ts).
    recordPreviousStoreId(store, store.storeId);
    // --restore-from is the explicit start from a backup: never refused as a lost state (empty-state-guard.ts).
    markInitialized(store, options.cluster, 'existing', Date.now() / 1000);
  } finally {
    store.close();
  }
  const db = new Database(file, { fileMustExist: true });
  try {
    renewStoreId(db);
    // Everything into the main file: the install moves that one file.
    db.pragma('wal_checkpoint(TRUNCATE)');
  } finally {
    db.close();
  }
  return rebuilt;
}

/** Move the checked copy into place (one rename: the state appears whole or not at all), owner-only. */
async function install(restored: string, dbFile: string): Promise<void> {
  for (const stale of [`${dbFile}-wal`, `${dbFile}-shm`, `${restored}-wal`, `${restored}-shm`])
    await rm(stale, { force: true });
  await chmod(restored, 0o600);
  await rename(restored, dbFile);
}

async function restoreSecrets(store: ObjectStore, options: RestoreOptions): Promise<string[]> {
  const key = backupSecretsKey(options.cluster);
  if (!(await store.exists(key))) return [];
  const bytes = await store.getBuffer(key);
  let secrets: BackupSecrets;
  try {
    secrets = readDocument(backupSecretsSchema, bytes, `${store.location} ${key}`);
  } catch (e) {
    // One document every backup overwrites: cut short, it would refuse every backup of the cluster, with no way past.
    throw new RestoreError(
      `the backups' tokens are unreadable (${(e as Error).message}); move that document aside to restore without ` +
        'them (the controller makes new ones at start, which its workers and clients must then be given); ' +
        'nothing was installed',
      { cause: e },
    );
  }
  const written: string[] = [];
  for (const name of SECRET_NAMES) {
    const value = secrets[name];
    const file = options.secretFiles[name];
    if (value === undefined) continue;
    await writeFile(file, `${value}\n`, { mode: 0o600 });
    await chmod(file, 0o600);
    written.push(file);
  }
  return written;
}
