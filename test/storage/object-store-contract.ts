/**
 * The behaviour every ObjectStore must have, run against each implementation (fs-store.test.ts, s3-store.test.ts).
 */
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { expect, it } from 'vitest';
import { Rng } from '../../src/core/random.js';
import { InvalidObjectKeyError, ObjectNotFoundError } from '../../src/storage/object-key.js';
import type { ObjectInfo, ObjectStore } from '../../src/storage/object-store.js';
import { ObjectExistsError } from '../../src/storage/object-store-error.js';

export const MIB = 1024 * 1024;

/** Deterministic pseudo-random bytes (incompressible, so a short-circuiting bug cannot hide). */
export function pseudoRandomBytes(sizeBytes: number, seed: number): Buffer {
  const rng = new Rng(seed);
  const buffer = Buffer.alloc(sizeBytes);
  for (let offset = 0; offset + 4 <= sizeBytes; offset += 4) buffer.writeUInt32LE(rng.nextUint32(), offset);
  for (let offset = sizeBytes - (sizeBytes % 4); offset < sizeBytes; offset++) buffer[offset] = rng.int(256);
  return buffer;
}

/** A stream of unknown length (no ContentLength), delivered in uneven chunks, as a checkpoint upload would be. */
export function chunkedStream(body: Buffer, chunkBytes = 300_001): Readable {
  const chunks: Buffer[] = [];
  for (let offset = 0; offset < body.length; offset += chunkBytes)
    chunks.push(body.subarray(offset, offset + chunkBytes));
  return Readable.from(chunks, { objectMode: false });
}

/** A stream that fails after yielding some data: a worker crashing mid-upload. */
export function failingStream(prefix: Buffer): Readable {
  async function* generate(): AsyncGenerator<Buffer> {
    yield prefix;
    await new Promise((r) => setTimeout(r, 5));
    throw new Error('disk vanished mid-upload');
  }
  return Readable.from(generate(), { objectMode: false });
}

export function sha256(data: Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}

export async function listAll(store: ObjectStore, prefix?: string): Promise<ObjectInfo[]> {
  const out: ObjectInfo[] = [];
  for await (const info of store.list(prefix)) out.push(info);
  return out;
}

export interface ContractOptions {
  /** A fresh, empty store for each test. */
  readonly open: () => Promise<ObjectStore> | ObjectStore;
  /** Size of the streamed round-trip body (several MiB: more than one S3 multipart part). */
  readonly largeBodyBytes: number;
  /** Store-specific checks on the large streamed object (e.g. that S3 received it as a multipart upload). */
  readonly afterLargePut?: (key: string) => Promise<void>;
}

export function objectStoreContract(options: ContractOptions): void {
  it('round-trips a Buffer body and reports its size', async () => {
    const store = await options.open();
    const body = Buffer.from('checkpoint of job-7, step 1200\n');
    await store.put('ckpt/job-7/step-1200.bin', body);
    expect((await store.getBuffer('ckpt/job-7/step-1200.bin')).equals(body)).toBe(true);
    const info = await store.head('ckpt/job-7/step-1200.bin');
    expect(info?.key).toBe('ckpt/job-7/step-1200.bin');
    expect(info?.sizeBytes).toBe(body.length);
    expect(info?.lastModified).toBeInstanceOf(Date);
    expect(await store.exists('ckpt/job-7/step-1200.bin')).toBe(true);
  });

  it('stores an empty object', async () => {
    const store = await options.open();
    await store.put('empty', Buffer.alloc(0));
    expect((await store.getBuffer('empty')).length).toBe(0);
    expect((await store.head('empty'))?.sizeBytes).toBe(0);
  });

  it('replaces an object on a second put', async () => {
    const store = await options.open();
    await store.put('a/b', Buffer.from('first version, longer'));
    await store.put('a/b', Buffer.from('second'));
    expect((await store.getBuffer('a/b')).toString()).toBe('second');
    expect((await store.head('a/b'))?.sizeBytes).toBe(6);
  });

  it('puts only if absent when asked: a taken key fails with ObjectExistsError and keeps its object', async () => {
    const store = await options.open();
    await store.put('backup/1', Buffer.from('first writer'), { ifAbsent: true });
    await expect(
      store.put('backup/1', Buffer.from('second writer'), { ifAbsent: true }),
    ).rejects.toBeInstanceOf(ObjectExistsError);
    const large = pseudoRandomBytes(options.largeBodyBytes, 11);
    await expect(store.put('backup/1', chunkedStream(large), { ifAbsent: true })).rejects.toThrow(
      /"backup\/1" already exists/,
    );
    expect((await store.getBuffer('backup/1')).toString()).toBe('first writer');
    await store.put('backup/2', chunkedStream(large), { ifAbsent: true });
    expect((await store.head('backup/2'))?.sizeBytes).toBe(large.length);
  });

  it('streams a several-MiB body of unknown length in and out unchanged', async () => {
    const store = await options.open();
    const body = pseudoRandomBytes(options.largeBodyBytes, 7);
    await store.put('ckpt/big.tar', chunkedStream(body));
    expect((await store.head('ckpt/big.tar'))?.sizeBytes).toBe(body.length);
    await options.afterLargePut?.('ckpt/big.tar');
    const stream = await store.get('ckpt/big.tar');
    expect(stream).toBeInstanceOf(Readable);
    // Consume it as a stream, chunk by chunk, the way a worker restores a checkpoint.
    const hash = createHash('sha256');
    let chunks = 0;
    for await (const chunk of stream) {
      hash.update(chunk as Buffer);
      chunks++;
    }
    expect(hash.digest('hex')).toBe(sha256(body));
    expect(chunks).toBeGreaterThan(1);
  });

  it('reports missing objects: get throws ObjectNotFoundError, head is undefined, delete is a no-op', async () => {
    const store = await options.open();
    await expect(store.get('nope/missing')).rejects.toBeInstanceOf(ObjectNotFoundError);
    await expect(store.getBuffer('nope/missing')).rejects.toThrow(/no object "nope\/missing"/);
    expect(await store.head('nope/missing')).toBeUndefined();
    expect(await store.exists('nope/missing')).toBe(false);
    await expect(store.delete('nope/missing')).resolves.toBeUndefined();
  });

  it('lists by plain string prefix, in byte order, with keys relative to the store', async () => {
    const store = await options.open();
    const keys = [
      'jobs/job-1/log',
      'jobs/job-10/log',
      'jobs/job-2/ckpt/0001',
      'jobs/job-2/ckpt/0002',
      'jobs.txt',
      'other',
    ];
    for (const key of keys) await store.put(key, Buffer.from(key));
    expect((await listAll(store)).map((o) => o.key)).toEqual([
      'jobs.txt', // "." (0x2e) sorts before "/" (0x2f)
      'jobs/job-1/log',
      'jobs/job-10/log',
      'jobs/job-2/ckpt/0001',
      'jobs/job-2/ckpt/0002',
      'other',
    ]);
    expect((await listAll(store, 'jobs/job-1')).map((o) => o.key)).toEqual([
      'jobs/job-1/log',
      'jobs/job-10/log',
    ]);
    expect((await listAll(store, 'jobs/job-1/')).map((o) => o.key)).toEqual(['jobs/job-1/log']);
    expect((await listAll(store, 'jobs/job-2/ckpt/')).map((o) => [o.key, o.sizeBytes])).toEqual([
      ['jobs/job-2/ckpt/0001', 20],
      ['jobs/job-2/ckpt/0002', 20],
    ]);
    expect(await listAll(store, 'nothing-here/')).toEqual([]);
  });

  it('lists more objects than one page holds', async () => {
    const store = await options.open();
    const keys = Array.from({ length: 7 }, (_, i) => `many/${String(i).padStart(2, '0')}`);
    await Promise.all(keys.map((key) => store.put(key, Buffer.from(key))));
    expect((await listAll(store, 'many/')).map((o) => o.key)).toEqual(keys);
  });

  it('lists the prefixes one level below a prefix, once each, in order, across pages', async () => {
    const store = await options.open();
    const keys = [
      'logs/job-10/00001-job-10.0-i.log',
      'logs/job-2/run.segments/00000001.log',
      'logs/job-2/run.segments/00000002.log',
      'logs/job-1/a.log',
      'logs/job-1/b.log',
      'logs/job-3/x/y/z.log',
      'logs/job-4/a',
      'logs/job-5/a',
      'logs/stray-object',
      'logsx/job-99/a',
      'checkpoints/job-7/job-7.0/exit-1.json',
      'top-level',
    ];
    await Promise.all(keys.map((key) => store.put(key, Buffer.from(key))));
    const prefixes = async (prefix: string): Promise<string[]> => {
      const out: string[] = [];
      for await (const p of store.listPrefixes(prefix)) out.push(p);
      return out;
    };
    // More prefixes than one page (the S3 tests list 3 keys a page); objects directly under the prefix are not listed.
    expect(await prefixes('logs/')).toEqual([
      'logs/job-1/',
      'logs/job-10/',
      'logs/job-2/',
      'logs/job-3/',
      'logs/job-4/',
      'logs/job-5/',
    ]);
    expect(await prefixes('')).toEqual(['checkpoints/', 'logs/', 'logsx/']);
    expect(await prefixes('logs/job-1')).toEqual(['logs/job-1/', 'logs/job-10/']);
    expect(await prefixes('checkpoints/job-7/')).toEqual(['checkpoints/job-7/job-7.0/']);
    expect(await prefixes('checkpoints/job-7/job-7.0/')).toEqual([]);
    expect(await prefixes('nothing-here/')).toEqual([]);
    // A prefix stops being listed once its last object is deleted.
    await store.delete('logs/job-3/x/y/z.log');
    expect(await prefixes('logs/')).not.toContain('logs/job-3/');
    await expect(prefixes('../')).rejects.toBeInstanceOf(InvalidObjectKeyError);
  });

  it('deletes an object so that it is neither readable nor listed', async () => {
    const store = await options.open();
    await store.put('d/one', Buffer.from('1'));
    await store.put('d/two', Buffer.from('2'));
    await store.delete('d/one');
    expect(await store.exists('d/one')).toBe(false);
    await expect(store.get('d/one')).rejects.toBeInstanceOf(ObjectNotFoundError);
    expect((await listAll(store, 'd/')).map((o) => o.key)).toEqual(['d/two']);
  });

  it('leaves no object behind when a streamed put fails midway', async () => {
    const store = await options.open();
    await expect(store.put('partial/ckpt', failingStream(pseudoRandomBytes(64 * 1024, 3)))).rejects.toThrow(
      /disk vanished/,
    );
    expect(await store.exists('partial/ckpt')).toBe(false);
    expect(await listAll(store)).toEqual([]);
  });

  it('keeps the previous object when a replacing put fails', async () => {
    const store = await options.open();
    await store.put('keep', Buffer.from('good checkpoint'));
    await expect(store.put('keep', failingStream(Buffer.from('bad')))).rejects.toThrow(/disk vanished/);
    expect((await store.getBuffer('keep')).toString()).toBe('good checkpoint');
  });

  it.each([
    ['the empty key', '', /empty path segment/],
    ['an absolute key', '/abs', /empty path segment/],
    ['a doubled slash', 'a//b', /empty path segment/],
    ['a trailing slash', 'a/', /empty path segment/],
    ['a leading ".."', '../escape', /"\.\." segments/],
    ['an inner ".."', 'a/../../escape', /"\.\." segments/],
    ['a "." segment', 'a/./b', /"\." segments/],
    ['a backslash', 'a\\b', /backslashes/],
    ['a newline', 'a\nb', /control characters/],
    ['the reserved temp directory', '.fleetwise-tmp/x', /reserved/],
    ['a 1025-byte key', 'k'.repeat(1025), /longer than 1024/],
  ])('rejects %s on every operation', async (_label, key, reason) => {
    const store = await options.open();
    await expect(store.put(key, Buffer.from('x'))).rejects.toThrow(reason);
    await expect(store.get(key)).rejects.toBeInstanceOf(InvalidObjectKeyError);
    await expect(store.head(key)).rejects.toBeInstanceOf(InvalidObjectKeyError);
    await expect(store.delete(key)).rejects.toBeInstanceOf(InvalidObjectKeyError);
  });

  it('rejects a prefix whose complete segments are invalid', async () => {
    const store = await options.open();
    await expect(listAll(store, '../')).rejects.toBeInstanceOf(InvalidObjectKeyError);
    await expect(listAll(store, 'a//')).rejects.toBeInstanceOf(InvalidObjectKeyError);
  });
}
