import { gunzipSync } from 'node:zlib';
import type { Readable } from 'node:stream';
import {
  ObjectStoreError,
  type ObjectInfo,
  type ObjectStore,
  type PutOptions,
} from '../../src/storage/object-store.js';
import type { ControllerLogger } from '../../src/controller/seams.js';
import type { BackupMetrics } from '../../src/controller/backup/backup-schedule.js';
import type { BackupManifest } from '../../src/controller/backup/backup-documents.js';

/**
 * Shared pieces of the backup and restore tests: a real object store with an outage switch in front (as
 * test/helpers/tcp-proxy.ts puts one in front of S3), a logger and metrics that remember what they were told.
 */

/**
 * A real store whose writes fail while `failing` says so for their key, and that records every write's key. While
 * `losingReplies` says so for a key, a write is stored and then fails as S3's does when its reply is lost; while
 * `failingGets` does, a read fails as the store's failure.
 */
export class StoreWithOutage implements ObjectStore {
  readonly puts: string[] = [];
  failing: (key: string) => boolean = () => false;
  losingReplies: (key: string) => boolean = () => false;
  failingGets: (key: string) => boolean = () => false;

  constructor(private readonly inner: ObjectStore) {}

  get location(): string {
    return this.inner.location;
  }

  async put(key: string, body: Buffer | Readable, options?: PutOptions): Promise<void> {
    if (this.failing(key)) {
      if (!Buffer.isBuffer(body)) body.destroy();
      throw new Error(`injected outage: cannot store ${key}`);
    }
    await this.inner.put(key, body, options);
    this.puts.push(key);
    if (this.losingReplies(key))
      throw new ObjectStoreError(
        'put',
        key,
        this.location,
        3,
        new Error('injected lost reply: socket hang up'),
      );
  }

  async get(key: string): Promise<Readable> {
    this.refuseGet(key);
    return this.inner.get(key);
  }

  async getBuffer(key: string): Promise<Buffer> {
    this.refuseGet(key);
    return this.inner.getBuffer(key);
  }

  /** A read of `key` while `failingGets` says so fails as the store's (retryable) error does. */
  private refuseGet(key: string): void {
    if (this.failingGets(key))
      throw new ObjectStoreError(
        'get',
        key,
        this.location,
        3,
        new Error('injected outage: connection reset'),
      );
  }

  head(key: string): Promise<ObjectInfo | undefined> {
    return this.inner.head(key);
  }

  exists(key: string): Promise<boolean> {
    return this.inner.exists(key);
  }

  list(prefix?: string): AsyncIterable<ObjectInfo> {
    return this.inner.list(prefix);
  }

  listPrefixes(prefix: string): AsyncIterable<string> {
    return this.inner.listPrefixes(prefix);
  }

  delete(key: string): Promise<void> {
    return this.inner.delete(key);
  }
}

export async function keysUnder(store: ObjectStore, prefix: string): Promise<string[]> {
  const keys: string[] = [];
  for await (const info of store.list(prefix)) keys.push(info.key);
  return keys.sort();
}

export async function readJson(store: ObjectStore, key: string): Promise<Record<string, unknown>> {
  return JSON.parse((await store.getBuffer(key)).toString('utf8')) as Record<string, unknown>;
}

export async function gunzipObject(store: ObjectStore, key: string): Promise<Buffer> {
  return gunzipSync(await store.getBuffer(key));
}

export interface LogLine {
  readonly level: 'info' | 'warn' | 'error';
  readonly message: string;
  readonly data?: Record<string, unknown> | undefined;
}

export function recordingLogger(): ControllerLogger & { readonly lines: LogLine[] } {
  const lines: LogLine[] = [];
  return {
    lines,
    info: (message, data) => lines.push({ level: 'info', message, data }),
    warn: (message, data) => lines.push({ level: 'warn', message, data }),
    error: (message, data) => lines.push({ level: 'error', message, data }),
  };
}

export class RecordedBackupMetrics implements BackupMetrics {
  readonly stored: BackupManifest[] = [];
  readonly current: number[] = [];
  failures = 0;

  backupStored(manifest: BackupManifest): void {
    this.stored.push(manifest);
  }

  backupStillCurrent(atSeconds: number): void {
    this.current.push(atSeconds);
  }

  backupFailed(): void {
    this.failures += 1;
  }
}

export async function until<T>(
  what: string,
  probe: () => T | undefined | Promise<T | undefined>,
  timeoutMs = 10_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
