import { Readable } from 'node:stream';
import {
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  type ListObjectsV2CommandOutput,
  S3Client,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import {
  awsErrorCode,
  awsHttpStatus,
  commonClientConfig,
  timeoutHandlerOptions,
  type AwsClientOptions,
  type ClientTimeouts,
} from '../cloud/aws/client-config.js';
import { assertValidKey, assertValidPrefix, ObjectNotFoundError } from './object-key.js';
import type { ObjectInfo, ObjectStore, PutOptions } from './object-store.js';
import {
  ObjectExistsError,
  ObjectStoreError,
  ObjectTooLargeError,
  type ObjectStoreOperation,
} from './object-store-error.js';
import { bodyRelay, readAll, relayErrorsAs } from './streams.js';

/** S3's minimum multipart part size (every part but the last). */
export const MIN_PART_SIZE_BYTES = 5 * 1024 * 1024;
/** S3's maximum parts per multipart upload (lib-storage fails the upload past it). */
export const MAX_PARTS = 10_000;
/** Parts a hinted size is split into: below MAX_PARTS, so a body somewhat larger than its hint still fits. */
const PLANNED_PARTS = 9_000;

/**
 * The part size for a streamed body of about `sizeHintBytes`: `minimum` (5 MiB, or the tuning's), or larger when the
 * body would otherwise need more than PLANNED_PARTS parts. With 5 MiB parts a body past about 48.8 GiB cannot be
 * stored at all: lib-storage does not know a stream's length and stops at 10,000 parts.
 */
export function partSizeFor(minimum: number, sizeHintBytes: number | undefined): number {
  if (sizeHintBytes === undefined || !Number.isFinite(sizeHintBytes) || sizeHintBytes <= 0) return minimum;
  return Math.max(minimum, Math.ceil(sizeHintBytes / PLANNED_PARTS));
}

export interface S3StoreTuning {
  /**
   * Multipart part size: 5 MiB unless set, larger for a body whose size hint needs it (partSizeFor). Bodies up to one
   * part go in a single PutObject.
   */
  readonly partSizeBytes?: number;
  /** Parts uploaded concurrently (lib-storage's default is 4). Memory use is about partSize × queueSize. */
  readonly uploadQueueSize?: number;
  /** Keys per ListObjectsV2 page (S3's maximum and default is 1000). */
  readonly listPageSize?: number;
}

/**
 * How long one attempt of an S3 call may take before it fails (and is retried: the SDK's standard retry mode makes
 * `maxAttempts` attempts, 3 by default or AWS_MAX_ATTEMPTS, with exponential backoff and jitter, for timeouts, resets,
 * throttling and 5xx). Without them the SDK waits forever on an endpoint that accepts a connection and never answers,
 * and so does whoever awaits the call.
 */
export type S3Timeouts = ClientTimeouts;

export const DEFAULT_S3_TIMEOUTS: S3Timeouts = {
  connectTimeoutMs: 5_000,
  // The request timeout runs from the request's first byte, so it covers sending a whole part (5 MiB, up to hundreds
  // of MiB for a large checkpoint) too: 30 s would fail every part on an uplink slower than about 6 Mbit/s (four
  // 5 MiB parts in flight), and each retry the same way. An endpoint that stops answering is caught by the idle timeout, so this one only bounds
  // a transfer that trickles on forever.
  requestTimeoutMs: 30 * 60_000,
  idleTimeoutMs: 30_000,
};

export interface S3ClientOptions extends AwsClientOptions {
  /** Overrides of DEFAULT_S3_TIMEOUTS (tests use short ones). */
  readonly timeouts?: Partial<S3Timeouts>;
}

/**
 * An S3 client built from the SDK's standard configuration (credential chain, region, AWS_ENDPOINT_URL_S3 /
 * AWS_ENDPOINT_URL), with the timeouts above. With a custom endpoint (moto, MinIO, LocalStack) buckets are addressed
 * path-style, since those servers do not resolve virtual-host bucket names.
 */
export function createS3Client(
  options: S3ClientOptions = {},
  env: NodeJS.ProcessEnv = process.env,
): S3Client {
  const config = commonClientConfig('S3', options, env);
  const timeouts = { ...DEFAULT_S3_TIMEOUTS, ...options.timeouts };
  return new S3Client({
    ...config,
    ...(config.endpoint === undefined ? {} : { forcePathStyle: true }),
    requestHandler: timeoutHandlerOptions(timeouts),
  });
}

/** S3's answer to a conditional write whose condition failed (If-None-Match: an object has the key). */
function isPreconditionFailed(error: unknown): boolean {
  return awsErrorCode(error) === 'PreconditionFailed' || awsHttpStatus(error) === 412;
}

function isNotFound(error: unknown): boolean {
  const code = awsErrorCode(error);
  return code === 'NoSuchKey' || code === 'NotFound' || awsHttpStatus(error) === 404;
}

/** The attempts the SDK made, from the error's metadata. */
function attemptsOf(error: unknown): number | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const meta = (error as { $metadata?: { attempts?: unknown } }).$metadata;
  return typeof meta?.attempts === 'number' ? meta.attempts : undefined;
}

/** Objects under `s3://bucket/prefix`: keys are stored as `prefix + key`. */
export class S3ObjectStore implements ObjectStore {
  readonly location: string;

  constructor(
    private readonly client: S3Client,
    private readonly bucket: string,
    /** Empty, or ends with "/". */
    private readonly prefix: string,
    private readonly tuning: S3StoreTuning = {},
  ) {
    if (prefix !== '' && !prefix.endsWith('/'))
      throw new Error(`S3 store prefix must end with "/": ${prefix}`);
    if (tuning.partSizeBytes !== undefined && tuning.partSizeBytes < MIN_PART_SIZE_BYTES)
      throw new Error(
        `partSizeBytes ${tuning.partSizeBytes} is below S3's minimum part size ${MIN_PART_SIZE_BYTES}`,
      );
    this.location = `s3://${bucket}/${prefix}`;
  }

  private objectKey(key: string): string {
    assertValidKey(key);
    return `${this.prefix}${key}`;
  }

  /** A failure of the call itself (not a missing object), with the attempts the SDK made. */
  private failure(operation: ObjectStoreOperation, key: string, error: unknown): ObjectStoreError {
    return new ObjectStoreError(operation, key, this.location, attemptsOf(error), error);
  }

  /** The part size for a body of about `sizeHintBytes` (unknown: the configured one, or S3's minimum). */
  partSizeFor(sizeHintBytes: number | undefined): number {
    return partSizeFor(this.tuning.partSizeBytes ?? MIN_PART_SIZE_BYTES, sizeHintBytes);
  }

  async put(key: string, body: Buffer | Readable, options: PutOptions = {}): Promise<void> {
    const objectKey = this.objectKey(key);
    // A body that fails is the caller's failure (a checkpoint being packed, an upload being received), not the store's;
    // the relay tells that apart from the upload failing and giving up on the body (streams.ts).
    const relayed = body instanceof Readable ? bodyRelay(body) : undefined;
    const partSize =
      body instanceof Readable ? this.partSizeFor(options.sizeHintBytes) : this.partSizeFor(body.length);
    // lib-storage sends one PutObject for a body smaller than a part, otherwise a multipart upload that it aborts
    // on failure (leavePartsOnError: false), so a failed put leaves no object. Its parts go only if that abort reaches
    // the store: one that fails because the store cannot be reached (the likeliest reason the put failed) leaves them
    // billed and unlisted, for the bucket's AbortIncompleteMultipartUpload lifecycle rule (infra/controller.yaml) to
    // remove. Parts are buffers, so the SDK retries each one on its own. If-None-Match goes on the PutObject or on the
    // CompleteMultipartUpload, so S3 itself refuses to replace an object another writer stored meanwhile.
    const upload = new Upload({
      client: this.client,
      params: {
        Bucket: this.bucket,
        Key: objectKey,
        Body: relayed?.relay ?? body,
        ...(options.ifAbsent === true ? { IfNoneMatch: '*' } : {}),
      },
      leavePartsOnError: false,
      partSize,
      ...(this.tuning.uploadQueueSize === undefined ? {} : { queueSize: this.tuning.uploadQueueSize }),
    });
    try {
      await upload.done();
    } catch (e) {
      const bodyFailure = relayed?.bodyFailure();
      if (bodyFailure !== undefined) throw bodyFailure;
      if (options.ifAbsent === true && isPreconditionFailed(e))
        throw new ObjectExistsError(key, this.location);
      if (e instanceof Error && /^Exceeded \d+ parts/.test(e.message))
        throw new ObjectTooLargeError(
          `object store ${this.location}: put ${JSON.stringify(key)} failed: the body is larger than S3 takes in ` +
            `${MAX_PARTS} parts of ${partSize} bytes (${((partSize * MAX_PARTS) / 2 ** 30).toFixed(1)} GiB)` +
            (options.sizeHintBytes === undefined
              ? ''
              : `; it was expected to be about ${options.sizeHintBytes} bytes`),
          { cause: e },
        );
      throw this.failure('put', key, e);
    } finally {
      // Whatever the upload left unread (it failed, or stopped early) is released.
      relayed?.relay.destroy();
    }
  }

  async get(key: string): Promise<Readable> {
    const objectKey = this.objectKey(key);
    let body: unknown;
    try {
      body = (await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: objectKey }))).Body;
    } catch (e) {
      if (isNotFound(e)) throw new ObjectNotFoundError(key, this.location);
      throw this.failure('get', key, e);
    }
    if (!(body instanceof Readable))
      throw new Error(`GetObject ${this.location}${key}: expected a Node.js stream body`);
    // A download that stalls or breaks mid-body (the idle timeout) fails as the store's failure too.
    return relayErrorsAs(body, (e) => this.failure('get', key, e));
  }

  async getBuffer(key: string): Promise<Buffer> {
    return readAll(await this.get(key));
  }

  async head(key: string): Promise<ObjectInfo | undefined> {
    const objectKey = this.objectKey(key);
    try {
      const out = await this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: objectKey }));
      return { key, sizeBytes: out.ContentLength ?? 0, lastModified: out.LastModified };
    } catch (e) {
      if (isNotFound(e)) return undefined;
      throw this.failure('head', key, e);
    }
  }

  async exists(key: string): Promise<boolean> {
    return (await this.head(key)) !== undefined;
  }

  async *list(prefix = ''): AsyncIterable<ObjectInfo> {
    for await (const page of this.pages(prefix, undefined))
      for (const object of page.Contents ?? []) {
        if (object.Key === undefined) continue;
        yield {
          key: object.Key.slice(this.prefix.length),
          sizeBytes: object.Size ?? 0,
          lastModified: object.LastModified,
        };
      }
  }

  async *listPrefixes(prefix: string): AsyncIterable<string> {
    for await (const page of this.pages(prefix, '/'))
      for (const common of page.CommonPrefixes ?? [])
        if (common.Prefix !== undefined) yield common.Prefix.slice(this.prefix.length);
  }

  /** Every page of ListObjectsV2 under `prefix` (grouped into common prefixes at `delimiter`, when given). */
  private async *pages(
    prefix: string,
    delimiter: string | undefined,
  ): AsyncIterable<ListObjectsV2CommandOutput> {
    assertValidPrefix(prefix);
    let continuationToken: string | undefined;
    do {
      let page: ListObjectsV2CommandOutput;
      try {
        page = await this.client.send(
          new ListObjectsV2Command({
            Bucket: this.bucket,
            Prefix: `${this.prefix}${prefix}`,
            ...(delimiter === undefined ? {} : { Delimiter: delimiter }),
            ...(this.tuning.listPageSize === undefined ? {} : { MaxKeys: this.tuning.listPageSize }),
            ...(continuationToken === undefined ? {} : { ContinuationToken: continuationToken }),
          }),
        );
      } catch (e) {
        throw this.failure('list', prefix, e);
      }
      yield page;
      continuationToken = page.IsTruncated === true ? page.NextContinuationToken : undefined;
    } while (continuationToken !== undefined);
  }

  async delete(key: string): Promise<void> {
    const objectKey = this.objectKey(key);
    try {
      // S3's DeleteObject already succeeds for a missing key.
      await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: objectKey }));
    } catch (e) {
      throw this.failure('delete', key, e);
    }
  }
}
