import { resolve } from 'node:path';
import type { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import type { S3Client } from '@aws-sdk/client-s3';
import type { AwsClientOptions } from '../cloud/aws/client-config.js';
import { FsObjectStore } from './fs-store.js';
import { createS3Client, S3ObjectStore, type S3StoreTuning } from './s3-store.js';

export { InvalidObjectKeyError, ObjectNotFoundError } from './object-key.js';
export { readAll } from './streams.js';

export interface ObjectInfo {
  readonly key: string;
  readonly sizeBytes: number;
  readonly lastModified: Date | undefined;
}

/**
 * Where checkpoints, logs and job artefacts live (ARCHITECTURE.md "Interfaces at the edges"). Keys follow
 * object-key.ts. Bodies stream both ways so a multi-GiB checkpoint never has to fit in memory.
 */
export interface ObjectStore {
  /** Where the store points, for logs and errors: `s3://bucket/prefix/` or an absolute directory. */
  readonly location: string;
  /** Write (or replace) an object. Readers never see a partial body: the object appears whole or not at all. */
  put(key: string, body: Buffer | Readable): Promise<void>;
  /** Stream an object's body; throws ObjectNotFoundError when it does not exist. */
  get(key: string): Promise<Readable>;
  getBuffer(key: string): Promise<Buffer>;
  /** Size and modification time, or undefined when the object does not exist. */
  head(key: string): Promise<ObjectInfo | undefined>;
  exists(key: string): Promise<boolean>;
  /** Every object whose key starts with `prefix` (a plain string prefix), in ascending UTF-8 byte order. */
  list(prefix?: string): AsyncIterable<ObjectInfo>;
  /** Remove an object; removing a missing object is not an error (retries are safe). */
  delete(key: string): Promise<void>;
}

export type StoreLocation =
  | { readonly kind: 's3'; readonly bucket: string; readonly prefix: string }
  | { readonly kind: 'fs'; readonly root: string };

// S3 bucket naming rules (general purpose buckets): 3–63 of [a-z0-9.-], starting and ending with a letter or digit.
const BUCKET_NAME = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;

/** Parse `s3://bucket[/prefix]`, `file:///dir` or a plain directory path (relative to `cwd`). */
export function parseStoreLocation(url: string, cwd: string = process.cwd()): StoreLocation {
  const trimmed = url.trim();
  if (trimmed === '')
    throw new Error('object store location is empty (expected s3://bucket/prefix or a directory)');
  if (trimmed.startsWith('s3://')) {
    const rest = trimmed.slice('s3://'.length);
    const slash = rest.indexOf('/');
    const bucket = slash === -1 ? rest : rest.slice(0, slash);
    if (!BUCKET_NAME.test(bucket))
      throw new Error(`object store location ${url}: "${bucket}" is not a valid S3 bucket name`);
    const rawPrefix = slash === -1 ? '' : rest.slice(slash + 1);
    const segments = rawPrefix.split('/').filter((s) => s !== '');
    if (segments.some((s) => s === '.' || s === '..'))
      throw new Error(`object store location ${url}: "." and ".." are not allowed in the prefix`);
    return { kind: 's3', bucket, prefix: segments.length === 0 ? '' : `${segments.join('/')}/` };
  }
  if (trimmed.startsWith('file://')) return { kind: 'fs', root: fileURLToPath(trimmed) };
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(trimmed))
    throw new Error(`object store location ${url}: unsupported scheme (expected s3:// or a directory)`);
  return { kind: 'fs', root: resolve(cwd, trimmed) };
}

export interface OpenObjectStoreOptions extends AwsClientOptions, S3StoreTuning {
  /** Use this S3 client instead of building one from the SDK's standard configuration. */
  readonly s3Client?: S3Client;
}

/** Open the store a URL names. S3 buckets are not created here: that is infrastructure (infra/). */
export function openObjectStore(url: string, options: OpenObjectStoreOptions = {}): ObjectStore {
  const location = parseStoreLocation(url);
  if (location.kind === 'fs') return new FsObjectStore(location.root);
  const client = options.s3Client ?? createS3Client(options);
  return new S3ObjectStore(client, location.bucket, location.prefix, options);
}
