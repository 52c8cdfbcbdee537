import {
  CreateBucketCommand,
  ListMultipartUploadsCommand,
  ListObjectsV2Command,
  S3Client,
} from '@aws-sdk/client-s3';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createS3Client, S3ObjectStore } from '../../src/storage/s3-store.js';
import { openObjectStore } from '../../src/storage/open-object-store.js';
import { describeWithMoto, TEST_CREDENTIALS, TEST_REGION } from '../helpers/moto.js';
import {
  failingStream,
  listAll,
  MIB,
  objectStoreContract,
  pseudoRandomBytes,
} from './object-store-contract.js';

const BUCKET = 'fleetwise-test';

afterEach(() => {
  vi.unstubAllEnvs();
});

describeWithMoto('S3ObjectStore against moto', (moto) => {
  let client: S3Client | undefined;
  const s3 = (): S3Client => (client ??= createS3Client(moto.clientOptions));

  async function freshStore(prefix = 'cluster-a/'): Promise<S3ObjectStore> {
    await s3().send(new CreateBucketCommand({ Bucket: BUCKET }));
    return new S3ObjectStore(s3(), BUCKET, prefix, { listPageSize: 3 });
  }

  objectStoreContract({
    open: () => freshStore(),
    largeBodyBytes: 12 * MIB,
    afterLargePut: async (key) => {
      const listed = await s3().send(
        new ListObjectsV2Command({ Bucket: BUCKET, Prefix: `cluster-a/${key}` }),
      );
      // A multipart ETag is "<md5 of the part md5s>-<part count>": 12 MiB in 5 MiB parts is 3 parts.
      expect(listed.Contents?.[0]?.ETag).toMatch(/-3"$/);
    },
  });

  it('aborts the multipart upload of a failed stream (no orphaned parts)', async () => {
    const store = await freshStore();
    await expect(store.put('broken', failingStream(pseudoRandomBytes(6 * MIB, 5)))).rejects.toThrow(
      /disk vanished/,
    );
    const uploads = await s3().send(new ListMultipartUploadsCommand({ Bucket: BUCKET }));
    expect(uploads.Uploads ?? []).toEqual([]);
  });

  it('keeps stores with different prefixes apart and stores keys under the prefix', async () => {
    const a = await freshStore('cluster-a/');
    const b = new S3ObjectStore(s3(), BUCKET, 'cluster-b/');
    await a.put('k', Buffer.from('a'));
    await b.put('k', Buffer.from('b'));
    expect((await a.getBuffer('k')).toString()).toBe('a');
    expect((await listAll(b)).map((o) => o.key)).toEqual(['k']);
    const raw = await s3().send(new ListObjectsV2Command({ Bucket: BUCKET }));
    expect(raw.Contents?.map((o) => o.Key)).toEqual(['cluster-a/k', 'cluster-b/k']);
  });

  it('opens s3:// URLs with the endpoint from AWS_ENDPOINT_URL_S3 and path-style addressing', async () => {
    await s3().send(new CreateBucketCommand({ Bucket: BUCKET }));
    vi.stubEnv('AWS_ENDPOINT_URL', 'http://127.0.0.1:9/wrong-generic-endpoint');
    vi.stubEnv('AWS_ENDPOINT_URL_S3', moto.endpoint);
    vi.stubEnv('AWS_ACCESS_KEY_ID', TEST_CREDENTIALS.accessKeyId);
    vi.stubEnv('AWS_SECRET_ACCESS_KEY', TEST_CREDENTIALS.secretAccessKey);
    vi.stubEnv('AWS_REGION', TEST_REGION);
    const store = await openObjectStore(`s3://${BUCKET}/via-env/nested`, { maxAttempts: 1 });
    expect(store.location).toBe(`s3://${BUCKET}/via-env/nested/`);
    await store.put('hello', Buffer.from('world'));
    const raw = await s3().send(new ListObjectsV2Command({ Bucket: BUCKET }));
    expect(raw.Contents?.map((o) => o.Key)).toEqual(['via-env/nested/hello']);
  });
});

// Configuration and URL parsing need no server.
describe('S3 client configuration', () => {
  it('uses the service-specific endpoint over the generic one and forces path style with an endpoint', async () => {
    const client = createS3Client(
      { region: 'eu-west-1', credentials: TEST_CREDENTIALS },
      { AWS_ENDPOINT_URL: 'http://generic:1', AWS_ENDPOINT_URL_S3: 'http://s3-only:2' },
    );
    expect(client.config.forcePathStyle).toBe(true);
    const endpoint = await client.config.endpoint?.();
    expect(endpoint?.hostname).toBe('s3-only');
    expect(await client.config.region()).toBe('eu-west-1');
  });

  it('leaves addressing to the SDK (virtual host) without an endpoint, or when endpoints are ignored', () => {
    expect(createS3Client({ region: 'us-east-1' }, {}).config.forcePathStyle).toBe(false);
    const ignored = createS3Client(
      { region: 'us-east-1' },
      { AWS_ENDPOINT_URL_S3: 'http://x:1', AWS_IGNORE_CONFIGURED_ENDPOINT_URLS: 'true' },
    );
    expect(ignored.config.forcePathStyle).toBe(false);
  });
});
