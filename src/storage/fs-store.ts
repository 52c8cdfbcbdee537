import { randomUUID } from 'node:crypto';
import type { Dirent } from 'node:fs';
import { link, mkdir, open, readdir, rename, rm, rmdir, stat, type FileHandle } from 'node:fs/promises';
import { dirname, join, relative, resolve, sep } from 'node:path';
import type { Readable } from 'node:stream';
import {
  assertValidKey,
  assertValidPrefix,
  compareKeys,
  ObjectNotFoundError,
  RESERVED_TEMP_SEGMENT,
} from './object-key.js';
import type { ObjectInfo, ObjectStore, PutOptions } from './object-store.js';
import { ObjectExistsError, ObjectStoreError, type ObjectStoreOperation } from './object-store-error.js';
import { bodyRelay, readAll, relayErrorsAs } from './streams.js';
import { errnoCode } from '../core/errno.js';

/** Modes of what the store creates (before the umask, which can only narrow them). */
const PRIVATE_FILE = 0o600;
const PRIVATE_DIR = 0o700;

/** Write all of `data`: one write(2) may write less (a file size limit, a nearly full disk), and the rest must follow. */
async function writeFully(handle: FileHandle, data: Buffer): Promise<void> {
  for (let offset = 0; offset < data.length;) {
    const { bytesWritten } = await handle.write(data, offset, data.length - offset);
    offset += bytesWritten;
  }
}

/** Two keys that cannot both be files ("a" and "a/b"): the caller's layout, not a failing disk, so never retried. */
export class KeyCollisionError extends Error {
  constructor(message: string, options: ErrorOptions) {
    super(message, options);
    this.name = 'KeyCollisionError';
  }
}

/**
 * Objects as files under a root directory (a single-machine deployment, or tests). A put writes a temporary file in
 * `<root>/.fleetwise-tmp/`, fsyncs it and renames it into place, so readers see the old object or the new one, never
 * a torn write. Directories are an artefact of the layout: they are created on put and pruned on delete, so listing
 * behaves like S3. One limitation S3 does not have: a key cannot also be a "directory" of another key ("a" and "a/b").
 * A failing filesystem (full, read-only, I/O errors) fails calls with ObjectStoreError, as S3 failing does; local
 * calls do not hang the way a network does, so there are no timeouts here.
 */
export class FsObjectStore implements ObjectStore {
  readonly location: string;
  private readonly root: string;
  private readonly tempDir: string;

  constructor(root: string) {
    this.root = resolve(root);
    this.location = this.root;
    this.tempDir = join(this.root, RESERVED_TEMP_SEGMENT);
  }

  /** The file for a key; keys are validated so no key can leave the root (no "..", no absolute paths). */
  private pathFor(key: string): string {
    const segments = assertValidKey(key);
    const path = resolve(this.root, ...segments);
    const rel = relative(this.root, path);
    // Belt and braces: assertValidKey already rules these out.
    if (rel === '' || rel.startsWith(`..${sep}`) || rel === '..' || resolve(this.root, rel) !== path)
      throw new Error(`object key ${JSON.stringify(key)} resolves outside ${this.root}`);
    return path;
  }

  private failure(operation: ObjectStoreOperation, key: string, error: unknown): Error {
    return error instanceof KeyCollisionError ||
      error instanceof ObjectNotFoundError ||
      error instanceof ObjectExistsError
      ? error
      : new ObjectStoreError(operation, key, this.location, undefined, error);
  }

  async put(key: string, body: Buffer | Readable, options: PutOptions = {}): Promise<void> {
    const target = this.pathFor(key);
    // A body that fails is the caller's failure (a checkpoint being packed, an upload being received), not the store's;
    // the relay tells that apart from a write failing and the store giving up on the body (streams.ts).
    const relayed = Buffer.isBuffer(body) ? undefined : bodyRelay(body);
    const temp = join(this.tempDir, `${randomUUID()}.part`);
    try {
      await mkdir(this.tempDir, { recursive: true, mode: PRIVATE_DIR });
      // Readable by the owner only: the store holds backups with the cluster's tokens, jobs' environments in them,
      // and task checkpoints and logs (an S3 bucket is private to the account the same way).
      const handle = await open(temp, 'wx', PRIVATE_FILE);
      try {
        if (Buffer.isBuffer(body)) await handle.writeFile(body);
        else if (relayed !== undefined)
          for await (const chunk of relayed.relay)
            await writeFully(handle, typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Buffer));
        await handle.sync();
      } finally {
        await handle.close();
      }
      if (options.ifAbsent === true) await this.linkIntoPlace(temp, target, key);
      else await this.moveIntoPlace(temp, target, key);
    } catch (e) {
      await rm(temp, { force: true }).catch(() => undefined);
      throw relayed?.bodyFailure() ?? this.failure('put', key, e);
    } finally {
      relayed?.relay.destroy();
    }
  }

  /** moveIntoPlace, but only if the key is free: link(2) never replaces an existing file, so two writers cannot both win. */
  private async linkIntoPlace(temp: string, target: string, key: string): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        await mkdir(dirname(target), { recursive: true, mode: PRIVATE_DIR });
        await link(temp, target);
        await rm(temp, { force: true });
        return;
      } catch (e) {
        const code = errnoCode(e);
        if (code === 'ENOENT' && attempt < 3) continue;
        if (code === 'EEXIST' && (await this.fileInfo(target, key)) !== undefined)
          throw new ObjectExistsError(key, this.location);
        if (code === 'EEXIST' || code === 'ENOTDIR')
          throw new KeyCollisionError(
            `cannot store ${JSON.stringify(key)} in ${this.root}: a key and a key "directory" collide ` +
              `(the filesystem store cannot hold both "a" and "a/b")`,
            { cause: e },
          );
        throw e;
      }
    }
  }

  private async moveIntoPlace(temp: string, target: string, key: string): Promise<void> {
    // A concurrent delete may prune the parent directory between mkdir and rename: retry a few times.
    for (let attempt = 1; ; attempt++) {
      try {
        await mkdir(dirname(target), { recursive: true, mode: PRIVATE_DIR });
        await rename(temp, target);
        return;
      } catch (e) {
        const code = errnoCode(e);
        if (code === 'ENOENT' && attempt < 3) continue;
        if (code === 'EISDIR' || code === 'ENOTDIR' || code === 'EEXIST' || code === 'ENOTEMPTY')
          throw new KeyCollisionError(
            `cannot store ${JSON.stringify(key)} in ${this.root}: a key and a key "directory" collide ` +
              `(the filesystem store cannot hold both "a" and "a/b")`,
            { cause: e },
          );
        throw e;
      }
    }
  }

  async get(key: string): Promise<Readable> {
    const path = this.pathFor(key);
    if ((await this.fileInfo(path, key)) === undefined) throw new ObjectNotFoundError(key, this.location);
    try {
      const handle = await open(path, 'r');
      return relayErrorsAs(handle.createReadStream(), (e) => this.failure('get', key, e));
    } catch (e) {
      if (errnoCode(e) === 'ENOENT') throw new ObjectNotFoundError(key, this.location);
      throw this.failure('get', key, e);
    }
  }

  async getBuffer(key: string): Promise<Buffer> {
    return readAll(await this.get(key));
  }

  async head(key: string): Promise<ObjectInfo | undefined> {
    return this.fileInfo(this.pathFor(key), key);
  }

  async exists(key: string): Promise<boolean> {
    return (await this.head(key)) !== undefined;
  }

  private async fileInfo(path: string, key: string): Promise<ObjectInfo | undefined> {
    try {
      const s = await stat(path);
      return s.isFile() ? { key, sizeBytes: s.size, lastModified: s.mtime } : undefined;
    } catch (e) {
      const code = errnoCode(e);
      if (code === 'ENOENT' || code === 'ENOTDIR') return undefined;
      throw this.failure('head', key, e);
    }
  }

  async *list(prefix = ''): AsyncIterable<ObjectInfo> {
    const { directory, partial } = assertValidPrefix(prefix);
    const start = resolve(this.root, ...directory);
    const keyBase = directory.length === 0 ? '' : `${directory.join('/')}/`;
    // Collect then sort: a depth-first walk does not give S3's byte order ("a.txt" < "a/b" because "." < "/").
    const keys: string[] = [];
    await this.collect(start, keyBase, partial, keys);
    keys.sort(compareKeys);
    for (const key of keys) {
      const info = await this.fileInfo(this.pathFor(key), key);
      if (info !== undefined) yield info; // deleted since the walk: skip, as S3 would on a later page
    }
  }

  private async collect(dir: string, keyBase: string, partial: string, out: string[]): Promise<void> {
    const entries = await this.entriesOf(dir, keyBase);
    for (const entry of entries) {
      if (!entry.name.startsWith(partial)) continue;
      const key = `${keyBase}${entry.name}`;
      if (keyBase === '' && entry.name === RESERVED_TEMP_SEGMENT) continue;
      if (entry.isDirectory()) await this.collect(join(dir, entry.name), `${key}/`, '', out);
      else if (entry.isFile()) out.push(key);
    }
  }

  async *listPrefixes(prefix: string): AsyncIterable<string> {
    const { directory, partial } = assertValidPrefix(prefix);
    const dir = resolve(this.root, ...directory);
    const keyBase = directory.length === 0 ? '' : `${directory.join('/')}/`;
    const names = (await this.entriesOf(dir, prefix))
      .filter(
        (e) =>
          e.isDirectory() &&
          e.name.startsWith(partial) &&
          !(keyBase === '' && e.name === RESERVED_TEMP_SEGMENT),
      )
      .map((e) => `${keyBase}${e.name}/`)
      .sort(compareKeys);
    // A directory is a prefix only while it holds an object, as in S3: a put that failed after its mkdir can leave one
    // empty.
    for (const name of names) if (await this.holdsFile(join(this.root, ...name.split('/')))) yield name;
  }

  /** The entries of `dir`, none when it is not there (nothing stored under it); `what` names it in a failure. */
  private async entriesOf(dir: string, what: string): Promise<Dirent[]> {
    try {
      return await readdir(dir, { withFileTypes: true });
    } catch (e) {
      const code = errnoCode(e);
      if (code === 'ENOENT' || code === 'ENOTDIR') return [];
      throw this.failure('list', what, e);
    }
  }

  /** Whether a file lies anywhere below `dir`; stops at the first. */
  private async holdsFile(dir: string): Promise<boolean> {
    const entries = await this.entriesOf(dir, relative(this.root, dir));
    if (entries.some((e) => e.isFile())) return true;
    for (const entry of entries)
      if (entry.isDirectory() && (await this.holdsFile(join(dir, entry.name)))) return true;
    return false;
  }

  async delete(key: string): Promise<void> {
    const path = this.pathFor(key);
    if ((await this.fileInfo(path, key)) === undefined) return;
    try {
      await rm(path, { force: true });
    } catch (e) {
      throw this.failure('delete', key, e);
    }
    await this.pruneEmptyParents(dirname(path));
  }

  /** Remove directories the delete left empty, up to the root, so they do not linger like S3 "folders" never do. */
  private async pruneEmptyParents(dir: string): Promise<void> {
    let current = dir;
    while (current !== this.root && current.startsWith(`${this.root}${sep}`)) {
      try {
        await rmdir(current);
      } catch {
        return; // not empty (or already gone): stop
      }
      current = dirname(current);
    }
  }
}
