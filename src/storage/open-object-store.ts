import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { S3Client } from '@aws-sdk/client-s3';
import { FsObjectStore } from './fs-store.js';
import type { ObjectStore } from './object-store.js';
import type { S3ClientOptions, S3StoreTuning } from './s3-store.js';

/** A store location parsed: an S3 bucket and key prefix, or a filesystem directory. */
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

export interface OpenObjectStoreOptions extends S3ClientOptions, S3StoreTuning {
  /** Use this S3 client instead of building one from the SDK's standard configuration. */
  readonly s3Client?: S3Client;
}

/**
 * Open the store a URL names. S3 buckets are not created here: that is infrastructure (infra/). The S3 store, with
 * the AWS SDK behind it, is loaded only for an s3:// location: it takes each worker and controller process about a
 * seventh of a second to load, and a store on the filesystem never needs it.
 */
export async function openObjectStore(
  url: string,
  options: OpenObjectStoreOptions = {},
): Promise<ObjectStore> {
  const location = parseStoreLocation(url);
  if (location.kind === 'fs') return new FsObjectStore(location.root);
  const { createS3Client, S3ObjectStore } = await import('./s3-store.js');
  const client = options.s3Client ?? createS3Client(options);
  return new S3ObjectStore(client, location.bucket, location.prefix, options);
}
