import { createReadStream, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import {
  CreateBucketCommand,
  ListMultipartUploadsCommand,
  ListObjectsV2Command,
  type S3Client,
} from '@aws-sdk/client-s3';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ObjectStoreError } from '../../src/storage/object-store-error.js';
import {
  createS3Client,
  DEFAULT_S3_TIMEOUTS,
  MAX_PARTS,
  MIN_PART_SIZE_BYTES,
  partSizeFor,
  S3ObjectStore,
} from '../../src/storage/s3-store.js';
import { describeWithMoto } from '../helpers/moto.js';
import { startS3FaultProxy, type S3FaultProxy } from '../helpers/s3-fault-proxy.js';
import { MIB, pseudoRandomBytes } from './object-store-contract.js';

const BUCKET = 'fleetwise-faults';
const GIB = 1024 * MIB;

describe('part size for a streamed body', () => {
  it('is S3 minimum (or the configured one) for small or unknown sizes', () => {
    expect(partSizeFor(MIN_PART_SIZE_BYTES, undefined)).toBe(MIN_PART_SIZE_BYTES);
    expect(partSizeFor(MIN_PART_SIZE_BYTES, 40 * GIB)).toBe(MIN_PART_SIZE_BYTES);
    expect(partSizeFor(8 * MIB, 1 * GIB)).toBe(8 * MIB);
  });

  it('grows so a large body fits in S3 part limit with room to spare', () => {
    for (const size of [49 * GIB, 200 * GIB, 5 * 1024 * GIB]) {
      const part = partSizeFor(MIN_PART_SIZE_BYTES, size);
      expect(part).toBeGreaterThan(MIN_PART_SIZE_BYTES);
      // 10% larger than hinted still fits.
      expect(Math.ceil((size * 1.1) / part)).toBeLessThanOrEqual(MAX_PARTS);
    }
  });
});

describe('S3 timeouts', () => {
  it('give a part upload on a slow uplink time to finish, and still catch a silent endpoint in 30 s', () => {
    // Four 5 MiB parts in flight over a 1 Mbit/s uplink: about 170 s each.
    const slowPartMs = ((4 * MIN_PART_SIZE_BYTES * 8) / 1_000_000) * 1000;
    expect(DEFAULT_S3_TIMEOUTS.requestTimeoutMs).toBeGreaterThan(slowPartMs);
    expect(DEFAULT_S3_TIMEOUTS.idleTimeoutMs).toBe(30_000);
  });
});

describeWithMoto(
  'S3ObjectStore when the store fails mid multipart upload',
  (moto) => {
    let proxy: S3FaultProxy;
    let direct: S3Client;
    let proxied: S3Client;
    let store: S3ObjectStore;
    let tmp: string;
    // Parts one at a time, so the upload fails with most of the body still unread (as a large checkpoint's would).
    const body = pseudoRandomBytes(24 * MIB, 21);

    beforeAll(async () => {
      proxy = await startS3FaultProxy(moto.endpoint);
      direct = createS3Client(moto.clientOptions);
      proxied = createS3Client({ ...moto.clientOptions, endpoint: proxy.url });
      await direct.send(new CreateBucketCommand({ Bucket: BUCKET }));
      store = new S3ObjectStore(proxied, BUCKET, 'c/', { uploadQueueSize: 1 });
      tmp = mkdtempSync(join(tmpdir(), 'fw-s3-faults-'));
      writeFileSync(join(tmp, 'body.bin'), body);
    });
    beforeEach(() => {
      proxy.failUploadPartsFrom(undefined);
      proxy.cutDownloadsAfter(undefined);
    });
    afterAll(async () => {
      direct.destroy();
      proxied.destroy();
      await proxy.close();
      rmSync(tmp, { recursive: true, force: true });
    });

    const bodies: [string, () => Readable][] = [
      [
        'a Readable',
        () => {
          let offset = 0;
          return new Readable({
            read() {
              this.push(offset < body.length ? body.subarray(offset, (offset += MIB)) : null);
            },
          });
        },
      ],
      ['a file stream', () => createReadStream(join(tmp, 'body.bin'))],
      [
        'a generator',
        () =>
          Readable.from(
            (async function* () {
              for (let offset = 0; offset < body.length; offset += MIB)
                yield body.subarray(offset, offset + MIB);
            })(),
            { objectMode: false },
          ),
      ],
    ];

    for (const [kind, make] of bodies)
      it(`fails with the store's ObjectStoreError, not the body's, for ${kind}`, async () => {
        proxy.failUploadPartsFrom(2);
        const refusedBefore = proxy.refusedParts;
        const stream = make();
        const failure = await store.put(`mid-${kind}`, stream).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(proxy.refusedParts).toBeGreaterThan(refusedBefore);
        expect(failure).toBeInstanceOf(ObjectStoreError);
        expect((failure as ObjectStoreError).operation).toBe('put');
        expect((failure as Error).message).toMatch(/reduce your request rate|SlowDown/);
        // The body is released, and the failed upload leaves neither an object nor parts.
        expect(stream.destroyed).toBe(true);
        const uploads = await direct.send(new ListMultipartUploadsCommand({ Bucket: BUCKET }));
        expect(uploads.Uploads ?? []).toEqual([]);
        const listed = await direct.send(
          new ListObjectsV2Command({ Bucket: BUCKET, Prefix: `c/mid-${kind}` }),
        );
        expect(listed.Contents ?? []).toEqual([]);
        // And once the store is back, the same kind of body goes through.
        proxy.failUploadPartsFrom(undefined);
        await store.put(`mid-${kind}`, make());
        expect((await store.getBuffer(`mid-${kind}`)).equals(body)).toBe(true);
      });

    it('takes parts large enough for the size it is told to expect', async () => {
      // Hinting 9,000 × 6 MiB makes the parts 6 MiB: the 24 MiB body goes in four parts, not five 5 MiB ones.
      await store.put('hinted', Readable.from([body], { objectMode: false }), {
        sizeHintBytes: 9_000 * 6 * MIB,
      });
      const listed = await direct.send(new ListObjectsV2Command({ Bucket: BUCKET, Prefix: 'c/hinted' }));
      expect(listed.Contents?.[0]?.ETag).toMatch(/-4"$/);
    });
  },
  { resetBeforeEach: false },
);
