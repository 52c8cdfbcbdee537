import { execFileSync } from 'node:child_process';
import {
  createReadStream,
  mkdtempSync,
  readdirSync,
  rmSync,
  existsSync,
  statSync,
  writeFileSync,
  mkdirSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve, isAbsolute } from 'node:path';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { FsObjectStore } from '../../src/storage/fs-store.js';
import { InvalidObjectKeyError } from '../../src/storage/object-key.js';
import { ObjectStoreError } from '../../src/storage/object-store-error.js';
import { openObjectStore } from '../../src/storage/open-object-store.js';
import {
  failingStream,
  listAll,
  MIB,
  objectStoreContract,
  pseudoRandomBytes,
} from './object-store-contract.js';

const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-fs-store-'));
let counter = 0;
const freshRoot = (): string => join(scratch, `store-${++counter}`);

afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('FsObjectStore (ObjectStore contract)', () => {
  objectStoreContract({ open: () => new FsObjectStore(freshRoot()), largeBodyBytes: 12 * MIB });
});

describe('FsObjectStore specifics', () => {
  it('lists as prefixes only directories holding an object, never its temporary directory', async () => {
    const root = freshRoot();
    const store = new FsObjectStore(root);
    await store.put('logs/job-1/a.log', Buffer.from('a'));
    // Left empty by a put that failed after creating its directories, as S3 has no such "folder".
    mkdirSync(join(root, 'logs', 'job-9', 'deeper'), { recursive: true });
    mkdirSync(join(root, '.fleetwise-tmp'), { recursive: true });
    const prefixes = async (prefix: string): Promise<string[]> => {
      const out: string[] = [];
      for await (const p of store.listPrefixes(prefix)) out.push(p);
      return out;
    };
    expect(await prefixes('logs/')).toEqual(['logs/job-1/']);
    expect(await prefixes('')).toEqual(['logs/']);
  });

  it('is what openObjectStore returns for a directory path or file:// URL', async () => {
    const root = freshRoot();
    expect(await openObjectStore(root)).toBeInstanceOf(FsObjectStore);
    expect((await openObjectStore(root)).location).toBe(resolve(root));
    expect((await openObjectStore(`file://${root}`)).location).toBe(resolve(root));
  });

  it('writes through a temporary file and leaves none behind, on success or failure', async () => {
    const root = freshRoot();
    const store = new FsObjectStore(root);
    await store.put('x/y', pseudoRandomBytes(1000, 1));
    await expect(store.put('x/z', failingStream(Buffer.from('partial')))).rejects.toThrow(/disk vanished/);
    expect(readdirSync(join(root, '.fleetwise-tmp'))).toEqual([]);
    expect(readdirSync(join(root, 'x'))).toEqual(['y']);
  });

  it('keeps what it writes to its owner: files 0600, the directories it makes 0700 (backups hold the tokens)', async () => {
    const root = freshRoot();
    const store = new FsObjectStore(root);
    await store.put('backups/local/secrets.json', Buffer.from('{"adminToken":"x"}'));
    const mode = (path: string): number => statSync(path).mode & 0o777;
    expect(mode(join(root, 'backups', 'local', 'secrets.json'))).toBe(0o600);
    expect(mode(join(root, 'backups'))).toBe(0o700);
    expect(mode(join(root, 'backups', 'local'))).toBe(0o700);
    expect(mode(join(root, '.fleetwise-tmp'))).toBe(0o700);
  });

  it('does not list its temporary directory or half-written files', async () => {
    const root = freshRoot();
    const store = new FsObjectStore(root);
    mkdirSync(join(root, '.fleetwise-tmp'), { recursive: true });
    writeFileSync(join(root, '.fleetwise-tmp', 'in-flight.part'), 'half');
    await store.put('real', Buffer.from('1'));
    expect((await listAll(store)).map((o) => o.key)).toEqual(['real']);
  });

  it('prunes directories a delete leaves empty, but not the root or non-empty ones', async () => {
    const root = freshRoot();
    const store = new FsObjectStore(root);
    await store.put('a/b/c/one', Buffer.from('1'));
    await store.put('a/two', Buffer.from('2'));
    await store.delete('a/b/c/one');
    expect(existsSync(join(root, 'a', 'b'))).toBe(false);
    expect(existsSync(join(root, 'a', 'two'))).toBe(true);
    await store.delete('a/two');
    expect(existsSync(join(root, 'a'))).toBe(false);
    expect(existsSync(root)).toBe(true);
  });

  it("explains the one layout it cannot hold: a key that is also another key's directory", async () => {
    const store = new FsObjectStore(freshRoot());
    await store.put('a/b', Buffer.from('1'));
    await expect(store.put('a', Buffer.from('2'))).rejects.toThrow(/cannot hold both "a" and "a\/b"/);
    expect(await store.exists('a')).toBe(false); // a directory is not an object
    await expect(store.get('a')).rejects.toThrow(/no object "a"/);
  });

  it('a failing filesystem fails calls as the store failing', async () => {
    // The store's root is a plain file: every call the filesystem refuses (ENOTDIR), as a broken mount would.
    const root = freshRoot();
    writeFileSync(root, 'not a directory');
    const store = new FsObjectStore(root);
    const put = store.put('k', Buffer.from('1'));
    await expect(put).rejects.toBeInstanceOf(ObjectStoreError);
    await expect(put).rejects.toThrow(/put "k" failed: ENOTDIR/);
  });

  it('a write failing mid-body fails as the store failing, not as the body failing', async () => {
    // A file size limit on this process (RLIMIT_FSIZE, Node ignores SIGXFSZ) makes writes past 1 MiB fail with
    // EFBIG, as a full disk fails them with ENOSPC; the store stops reading the body and releases it.
    const root = freshRoot();
    const store = new FsObjectStore(root);
    const source = join(scratch, `body-${counter}.bin`);
    writeFileSync(source, pseudoRandomBytes(4 * MIB, 9));
    const body = createReadStream(source);
    const limit = (soft: string): void => {
      execFileSync('prlimit', ['--pid', String(process.pid), `--fsize=${soft}:`]);
    };
    limit(String(MIB));
    let failure: unknown;
    try {
      await store.put('big', body);
    } catch (e) {
      failure = e;
    } finally {
      limit('unlimited');
    }
    expect(failure).toBeInstanceOf(ObjectStoreError);
    expect((failure as Error).message).toMatch(/put "big" failed: EFBIG/);
    expect(body.destroyed).toBe(true);
    expect(await store.exists('big')).toBe(false);
    expect(readdirSync(join(root, '.fleetwise-tmp'))).toEqual([]);
  });

  it('lists nothing (rather than failing) before the root exists', async () => {
    const store = new FsObjectStore(freshRoot());
    expect(await listAll(store)).toEqual([]);
  });

  it('never resolves a key outside its root (property)', () => {
    const root = resolve(freshRoot());
    const store = new FsObjectStore(root);
    const pathFor = (key: string): string =>
      (store as unknown as { pathFor(k: string): string }).pathFor(key);
    const segment = fc.oneof(
      fc.constantFrom('..', '.', '', '...', '.fleetwise-tmp', '~', '%2e%2e', 'a'),
      fc.string({ minLength: 0, maxLength: 6 }),
    );
    fc.assert(
      fc.property(fc.array(segment, { minLength: 1, maxLength: 6 }), fc.boolean(), (segments, absolute) => {
        const key = (absolute ? '/' : '') + segments.join('/');
        let path: string;
        try {
          path = pathFor(key);
        } catch (e) {
          expect(e).toBeInstanceOf(InvalidObjectKeyError);
          return;
        }
        const rel = relative(root, path);
        expect(rel === '..' || rel.startsWith('../')).toBe(false);
        expect(isAbsolute(rel)).toBe(false);
        expect(rel).not.toBe('');
        expect(rel.split('/')[0]).not.toBe('.fleetwise-tmp');
      }),
      { numRuns: 500 },
    );
  });
});
