import type { Readable } from 'node:stream';

export { InvalidObjectKeyError, ObjectNotFoundError } from './object-key.js';
export {
  isObjectStoreError,
  ObjectExistsError,
  ObjectStoreError,
  ObjectTooLargeError,
} from './object-store-error.js';
export { readAll } from './streams.js';

export interface ObjectInfo {
  readonly key: string;
  readonly sizeBytes: number;
  readonly lastModified: Date | undefined;
}

/**
 * Where checkpoints, logs and job artefacts live (ARCHITECTURE.md "Failures at the edges: the object store"). Keys
 * follow the rules of object-key.ts, laid out by src/protocol/object-keys.ts. Bodies stream both ways so a multi-GiB
 * checkpoint never has to fit in memory. This file is only the interface: open-object-store.ts chooses an
 * implementation from a location, so code that takes a store (the worker, reports) does not load the S3 SDK.
 *
 * Every call ends: a store that cannot answer (unreachable, hung, refusing) fails the call with ObjectStoreError
 * after its own bounded timeouts and retries (s3-store.ts), never leaving the caller waiting. A body stream the caller
 * passes to `put` that fails makes `put` fail with the stream's own error, so the two can be told apart.
 */
export interface PutOptions {
  /**
   * About how many bytes a streamed body holds, when the caller knows (a checkpoint's files add up to it): S3 takes
   * at most 10,000 parts per object, so a large body needs parts larger than the default 5 MiB. A hint, not a promise:
   * the body may be a little larger or smaller.
   */
  readonly sizeHintBytes?: number;
  /** Write only if no object has the key yet; otherwise fail with ObjectExistsError and leave the object as it is. */
  readonly ifAbsent?: boolean;
}

export interface ObjectStore {
  /** Where the store points, for logs and errors: `s3://bucket/prefix/` or an absolute directory. */
  readonly location: string;
  /**
   * Write (or replace) an object. Readers never see a partial body: the object appears whole or not at all. A body
   * larger than the store takes fails with ObjectTooLargeError.
   */
  put(key: string, body: Buffer | Readable, options?: PutOptions): Promise<void>;
  /** Stream an object's body; throws ObjectNotFoundError when it does not exist. */
  get(key: string): Promise<Readable>;
  getBuffer(key: string): Promise<Buffer>;
  /** Size and modification time, or undefined when the object does not exist. */
  head(key: string): Promise<ObjectInfo | undefined>;
  exists(key: string): Promise<boolean>;
  /** Every object whose key starts with `prefix` (a plain string prefix), in ascending UTF-8 byte order. */
  list(prefix?: string): AsyncIterable<ObjectInfo>;
  /**
   * The "directories" one level below `prefix`: for every key `prefix + name + "/" + rest`, `prefix + name + "/"`
   * once, in ascending UTF-8 byte order; keys with no "/" after the prefix are not listed. Reads one entry per
   * directory rather than every object (S3 ListObjectsV2 with a delimiter), so `checkpoints/` says which jobs left
   * checkpoints without walking every checkpoint.
   */
  listPrefixes(prefix: string): AsyncIterable<string>;
  /** Remove an object; removing a missing object is not an error (retries are safe). */
  delete(key: string): Promise<void>;
}
