import { Readable } from 'node:stream';
import {
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  S3Client,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import {
  awsErrorCode,
  awsHttpStatus,
  commonClientConfig,
  type AwsClientOptions,
} from '../cloud/aws/client-config.js';
import { assertValidKey, assertValidPrefix, ObjectNotFoundError } from './object-key.js';
import type { ObjectInfo, ObjectStore } from './object-store.js';
import { readAll } from './streams.js';

/** S3's minimum multipart part size (every part but the last). */
export const MIN_PART_SIZE_BYTES = 5 * 1024 * 1024;

export interface S3StoreTuning {
  /** Multipart part size; lib-storage's default (5 MiB) unless set. Bodies up to one part go in a single PutObject. */
  readonly partSizeBytes?: number;
  /** Parts uploaded concurrently (lib-storage's default is 4). Memory use is about partSize × queueSize. */
  readonly uploadQueueSize?: number;
  /** Keys per ListObjectsV2 page (S3's maximum and default is 1000). */
  readonly listPageSize?: number;
}

/**
 * An S3 client built from the SDK's standard configuration (credential chain, region, AWS_ENDPOINT_URL_S3 /
 * AWS_ENDPOINT_URL). With a custom endpoint (moto, MinIO, LocalStack) buckets are addressed path-style, since those
 * servers do not resolve virtual-host bucket names.
 */
export function createS3Client(
  options: AwsClientOptions = {},
  env: NodeJS.ProcessEnv = process.env,
): S3Client {
  const config = commonClientConfig('S3', options, env);
  return new S3Client({ ...config, ...(config.endpoint === undefined ? {} : { forcePathStyle: true }) });
}

function isNotFound(error: unknown): boolean {
  const code = awsErrorCode(error);
  return code === 'NoSuchKey' || code === 'NotFound' || awsHttpStatus(error) === 404;
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

  async put(key: string, body: Buffer | Readable): Promise<void> {
    // lib-storage sends one PutObject for a body smaller than a part, otherwise a multipart upload that it aborts
    // on failure (leavePartsOnError: false), so a failed put leaves neither an object nor orphaned parts.
    const upload = new Upload({
      client: this.client,
      params: { Bucket: this.bucket, Key: this.objectKey(key), Body: body },
      leavePartsOnError: false,
      ...(this.tuning.partSizeBytes === undefined ? {} : { partSize: this.tuning.partSizeBytes }),
      ...(this.tuning.uploadQueueSize === undefined ? {} : { queueSize: this.tuning.uploadQueueSize }),
    });
    await upload.done();
  }

  async get(key: string): Promise<Readable> {
    try {
      const out = await this.client.send(
        new GetObjectCommand({ Bucket: this.bucket, Key: this.objectKey(key) }),
      );
      if (out.Body instanceof Readable) return out.Body;
      throw new Error(`GetObject ${this.location}${key}: expected a Node.js stream body`);
    } catch (e) {
      if (isNotFound(e)) throw new ObjectNotFoundError(key, this.location);
      throw e;
    }
  }

  async getBuffer(key: string): Promise<Buffer> {
    return readAll(await this.get(key));
  }

  async head(key: string): Promise<ObjectInfo | undefined> {
    try {
      const out = await this.client.send(
        new HeadObjectCommand({ Bucket: this.bucket, Key: this.objectKey(key) }),
      );
      return { key, sizeBytes: out.ContentLength ?? 0, lastModified: out.LastModified };
    } catch (e) {
      if (isNotFound(e)) return undefined;
      throw e;
    }
  }

  async exists(key: string): Promise<boolean> {
    return (await this.head(key)) !== undefined;
  }

  async *list(prefix = ''): AsyncIterable<ObjectInfo> {
    assertValidPrefix(prefix);
    let continuationToken: string | undefined;
    do {
      const page = await this.client.send(
        new ListObjectsV2Command({
          Bucket: this.bucket,
          Prefix: `${this.prefix}${prefix}`,
          ...(this.tuning.listPageSize === undefined ? {} : { MaxKeys: this.tuning.listPageSize }),
          ...(continuationToken === undefined ? {} : { ContinuationToken: continuationToken }),
        }),
      );
      for (const object of page.Contents ?? []) {
        if (object.Key === undefined) continue;
        yield {
          key: object.Key.slice(this.prefix.length),
          sizeBytes: object.Size ?? 0,
          lastModified: object.LastModified,
        };
      }
      continuationToken = page.IsTruncated === true ? page.NextContinuationToken : undefined;
    } while (continuationToken !== undefined);
  }

  async delete(key: string): Promise<void> {
    // S3's DeleteObject already succeeds for a missing key.
    await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: this.objectKey(key) }));
  }
}
