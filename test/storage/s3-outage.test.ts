import { CreateBucketCommand, type S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, beforeEach, expect, it } from 'vitest';
import { isObjectStoreError, ObjectStoreError } from '../../src/storage/object-store-error.js';
import { createS3Client, S3ObjectStore } from '../../src/storage/s3-store.js';
import { readAll } from '../../src/storage/streams.js';
import { describeWithMoto } from '../helpers/moto.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.js';
import { listAll, MIB, pseudoRandomBytes } from './object-store-contract.js';

/**
 * The S3 store when S3 is down or hung (moto_server behind the outage proxy): every call ends, with an
 * ObjectStoreError after the configured attempts, instead of waiting forever; and it works again once S3 is back.
 * Timeouts are short here so the tests are quick; what is asserted is that calls end and how often they were tried,
 * not how long they took.
 */
const BUCKET = 'fleetwise-outage';
const ATTEMPTS = 3;

describeWithMoto(
  'S3ObjectStore through an outage',
  (moto) => {
    let proxy: TcpProxy;
    let client: S3Client;
    let store: S3ObjectStore;
    /** The same bucket through a client with the default timeouts, for a test's set-up (not under test). */
    let patientClient: S3Client;
    let patient: S3ObjectStore;

    beforeAll(async () => {
      proxy = await startTcpProxy(moto.endpoint);
      client = createS3Client({
        ...moto.clientOptions,
        endpoint: proxy.url,
        maxAttempts: ATTEMPTS,
        timeouts: { connectTimeoutMs: 1_000, requestTimeoutMs: 400, idleTimeoutMs: 400 },
      });
      await client.send(new CreateBucketCommand({ Bucket: BUCKET }));
      store = new S3ObjectStore(client, BUCKET, 'cluster/');
      patientClient = createS3Client({ ...moto.clientOptions, endpoint: proxy.url });
      patient = new S3ObjectStore(patientClient, BUCKET, 'cluster/');
      await store.put('present', Buffer.from('here before the outage'));
    });
    beforeEach(async () => {
      await proxy.setMode('pass');
    });
    afterAll(async () => {
      client.destroy();
      patientClient.destroy();
      await proxy.close();
    });

    /** The call's failure, which must be the store's (ObjectStoreError), not a hang or another error. */
    async function storeFailure(call: () => Promise<unknown>): Promise<ObjectStoreError> {
      try {
        await call();
      } catch (e) {
        if (isObjectStoreError(e)) return e;
        throw e;
      }
      throw new Error('the call succeeded during the outage');
    }

    it('a hung endpoint fails every kind of call after the configured attempts, each a new connection', async () => {
      await proxy.setMode('hang');
      const calls: [string, () => Promise<unknown>][] = [
        ['head', () => store.head('present')],
        ['get', () => store.getBuffer('present')],
        ['put', () => store.put('new', Buffer.from('written during the outage'))],
        ['list', () => listAll(store, '')],
        ['delete', () => store.delete('present')],
      ];
      for (const [operation, call] of calls) {
        const before = proxy.accepted('hang');
        const failure = await storeFailure(call);
        expect(failure.operation).toBe(operation);
        expect(failure.message).toMatch(/timed out|timeout/i);
        // One attempt per connection: the timed-out connection is given up, the retry opens a new one.
        expect(proxy.accepted('hang') - before, operation).toBe(ATTEMPTS);
        expect(failure.attempts, operation).toBe(ATTEMPTS);
      }
      await proxy.setMode('pass');
      expect((await store.getBuffer('present')).toString()).toBe('here before the outage');
      expect(await store.exists('new')).toBe(false);
    });

    it('a refusing endpoint fails calls with ObjectStoreError naming the refusal, after the attempts', async () => {
      await proxy.setMode('refuse');
      const failure = await storeFailure(() => store.head('present'));
      expect(failure.message).toMatch(/ECONNREFUSED/);
      expect(failure.attempts).toBe(ATTEMPTS);
      expect(failure.message).toContain(`after ${ATTEMPTS} attempts`);
      await proxy.setMode('pass');
      expect(await store.exists('present')).toBe(true);
    });

    it('a download that stalls mid-body fails as the store failing, not as a hang', async () => {
      // Larger than what the sockets between moto, the proxy and the client can hold in flight.
      const body = pseudoRandomBytes(24 * MIB, 3);
      // Uploaded with the default timeouts: 24 MiB to moto can take longer than this store's 400 ms on a busy host.
      await patient.put('large', body);
      const stream = await store.get('large');
      // Freeze the transfer as soon as it is under way: the connection stays open and nothing more arrives.
      await proxy.setMode('hang', { freeze: true });
      let received = 0;
      const failure = await storeFailure(async () => {
        for await (const chunk of stream) received += (chunk as Buffer).length;
      });
      expect(failure.operation).toBe('get');
      expect(received).toBeLessThan(body.length);
      await proxy.setMode('pass');
      // The connections the freeze held are cut as it ends: one the client keeps pooled and has not yet seen closed
      // may fail the next call, as any reset does, and callers try a store failure again (storage/retry.ts).
      const read = async (): Promise<Buffer> => readAll(await store.get('large'));
      const again = await read().catch((e: unknown) => {
        if (isObjectStoreError(e)) return read();
        throw e;
      });
      expect(again.equals(body)).toBe(true);
    });

    it('a body that fails is the caller failing, never reported as the store failing', async () => {
      const { Readable } = await import('node:stream');
      const failing = Readable.from(
        (async function* () {
          yield Buffer.from('some bytes');
          throw new Error('the packer broke');
        })(),
      );
      await expect(store.put('from-a-broken-stream', failing)).rejects.toThrow(/^the packer broke$/);
    });
  },
  { resetBeforeEach: false },
);
