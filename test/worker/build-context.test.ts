import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import {
  chmodSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { packContext } from '../../src/cli/context-archive.js';
import { PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import type { Readable } from 'node:stream';
import { DEFAULT_CONTEXT_LIMITS } from '../../src/protocol/context-limits.js';
import { buildContextKey } from '../../src/protocol/object-keys.js';
import { FsObjectStore } from '../../src/storage/fs-store.js';
import { fetchBuildContext, releaseBuildContext } from '../../src/worker/build-context.js';
import { craftTar, gzipBomb } from '../helpers/tar.js';
import { asNobody, NOBODY } from '../helpers/as-nobody.js';

const COUNTER_CONTEXT = join(PROJECT_ROOT, 'examples', 'counter');

let tmp = '';
beforeEach(() => {
  tmp = mkdtempSync(join(tmpdir(), 'fw-build-context-'));
});
afterEach(() => rmSync(tmp, { recursive: true, force: true }));

/** A filesystem store that counts the archives fetched from it. */
class CountingStore extends FsObjectStore {
  fetches = 0;
  override async get(key: string): Promise<Readable> {
    this.fetches++;
    return super.get(key);
  }
}

async function uploadCounter(store: FsObjectStore): Promise<{ ref: string; hash: string; key: string }> {
  const { archive } = await packContext(COUNTER_CONTEXT);
  return upload(store, archive);
}

async function upload(
  store: FsObjectStore,
  archive: Buffer,
): Promise<{ ref: string; hash: string; key: string }> {
  const hash = createHash('sha256').update(archive).digest('hex');
  const key = buildContextKey(hash, 'gzip'); // packContext gzips, as `fleetwise submit` uploads it
  await store.put(key, archive);
  return { ref: `${store.location}/${key}`, hash, key };
}

describe('fetchBuildContext of an uploaded context', () => {
  it('extracts once for concurrent tasks of the same context, and leaves no temporary directory', async () => {
    const store = new CountingStore(join(tmp, 'store'));
    const { ref, hash } = await uploadCounter(store);
    const workDir = join(tmp, 'work');
    const results = await Promise.all(
      Array.from({ length: 6 }, () => fetchBuildContext({ context: ref }, workDir, () => store)),
    );
    const target = join(workDir, 'contexts', hash);
    for (const r of results)
      expect(r).toEqual({ contextDir: target, dockerfile: undefined, contentHash: hash });
    expect(store.fetches).toBe(1);
    expect(existsSync(join(target, 'counter.sh'))).toBe(true);
    expect(readdirSync(join(workDir, 'contexts'))).toEqual([hash, `${hash}.complete`]);

    // Already on this host: not fetched again.
    await fetchBuildContext({ context: ref }, workDir, () => store);
    expect(store.fetches).toBe(1);
  });

  it('cleans up after a failed extraction and retries on the next call', async () => {
    const store = new CountingStore(join(tmp, 'store'));
    const { ref, hash, key } = await uploadCounter(store);
    const good = await store.getBuffer(key);
    store.fetches = 0;
    // Same key, other bytes (a tampered store): refused for its sha256 if it unpacked at all.
    await store.put(key, Buffer.from('not a tar archive at all, just bytes '.repeat(40)));
    const workDir = join(tmp, 'work');
    const failed = await Promise.allSettled(
      Array.from({ length: 3 }, () => fetchBuildContext({ context: ref }, workDir, () => store)),
    );
    expect(failed.map((r) => r.status)).toEqual(['rejected', 'rejected', 'rejected']);
    expect(store.fetches).toBe(1);
    expect(readdirSync(join(workDir, 'contexts'))).toEqual([]);

    await store.put(key, good);
    const retried = await fetchBuildContext({ context: ref }, workDir, () => store);
    expect(store.fetches).toBe(2);
    expect(existsSync(join(retried.contextDir, 'counter.sh'))).toBe(true);
    expect(readdirSync(join(workDir, 'contexts'))).toEqual([hash, `${hash}.complete`]);
  });

  it('refuses a path on the host: only uploaded contexts are build contexts', async () => {
    const store = new CountingStore(join(tmp, 'store'));
    for (const context of [COUNTER_CONTEXT, '/etc', `${COUNTER_CONTEXT}/../counter`])
      await expect(fetchBuildContext({ context }, join(tmp, 'work'), () => store)).rejects.toThrow(
        /is not an uploaded context: workers run only contexts uploaded to the controller/,
      );
    expect(store.fetches).toBe(0);
    expect(existsSync(join(tmp, 'work', 'contexts'))).toBe(false);
  });

  it('stops a gzip bomb within its limits and leaves no temporary directory', async () => {
    const store = new CountingStore(join(tmp, 'store'));
    const { ref } = await upload(store, await gzipBomb(64 * 1024 * 1024));
    const workDir = join(tmp, 'work');
    await expect(
      fetchBuildContext(
        { context: ref, limits: { ...DEFAULT_CONTEXT_LIMITS, maxExpandedBytes: 8 * 1024 * 1024 } },
        workDir,
        () => store,
      ),
    ).rejects.toThrow(/expands to more than its limit of 8 MiB \(maxExpandedBytes\)/);
    expect(readdirSync(join(workDir, 'contexts'))).toEqual([]);
  });

  it("checks the expansion ratio against the stored archive's size: a mixed context unpacks, a bomb stops early", async () => {
    const store = new CountingStore(join(tmp, 'store'));
    const src = join(tmp, 'mixed');
    mkdirSync(src);
    writeFileSync(join(src, 'Dockerfile'), 'FROM busybox\n');
    // Zeros first by name (a preallocated disk image), then incompressible weights: 2.7 times overall.
    writeFileSync(join(src, 'a-disk.img'), Buffer.alloc(20 * 1024 * 1024));
    writeFileSync(join(src, 'z-model.bin'), randomBytes(12 * 1024 * 1024));
    const { archive } = await packContext(src);
    const mixed = await upload(store, archive);
    const workDir = join(tmp, 'work');
    const handed = await fetchBuildContext({ context: mixed.ref }, workDir, () => store);
    expect(handed.contextDir).toBe(join(workDir, 'contexts', mixed.hash));
    expect(statSync(join(handed.contextDir, 'a-disk.img')).size).toBe(20 * 1024 * 1024);
    const model = readFileSync(join(handed.contextDir, 'z-model.bin'));
    expect(model.equals(readFileSync(join(src, 'z-model.bin')))).toBe(true);

    const bomb = await gzipBomb(200 * 1024 * 1024);
    const { ref } = await upload(store, bomb);
    const refused = await fetchBuildContext({ context: ref }, workDir, () => store).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(Error);
    const over =
      /expands more than 100 times its archive \((\d+) bytes to over ([\d.]+) MiB; maxExpansionRatio\)/.exec(
        (refused as Error).message,
      );
    expect(over, (refused as Error).message).not.toBeNull();
    expect(Number(over?.[1])).toBe(bomb.length);
    expect(Number(over?.[2])).toBeLessThan(32);
    expect(readdirSync(join(workDir, 'contexts')).sort()).toEqual([mixed.hash, `${mixed.hash}.complete`]);
  });

  it('removes what a worker killed mid-extraction left behind', async () => {
    const store = new CountingStore(join(tmp, 'store'));
    const { ref, hash } = await uploadCounter(store);
    const contexts = join(tmp, 'work', 'contexts');
    // A killed worker's temporary directories: of this context and of another one.
    for (const left of [`${hash}.tmp-Ab12Cd`, `${'e'.repeat(64)}.tmp-Zz99Yy`]) {
      mkdirSync(join(contexts, left, 'half'), { recursive: true });
      writeFileSync(join(contexts, left, 'half', 'file'), 'partial');
    }
    await fetchBuildContext({ context: ref }, join(tmp, 'work'), () => store);
    expect(readdirSync(contexts)).toEqual([hash, `${hash}.complete`]);
  });

  it('removes a context a worker killed mid-removal left without its marker, and keeps whole ones', async () => {
    const store = new CountingStore(join(tmp, 'store'));
    const { ref, hash } = await uploadCounter(store);
    const contexts = join(tmp, 'work', 'contexts');
    // Removed after its build as far as its marker: half of it is still there, and no task may take it for whole.
    const halfGone = 'a'.repeat(64);
    mkdirSync(join(contexts, halfGone, 'half'), { recursive: true });
    writeFileSync(join(contexts, halfGone, 'half', 'file'), 'partial');
    // Whole, and still held by a task of the killed worker's (a process runs inside it): kept.
    const whole = 'b'.repeat(64);
    mkdirSync(join(contexts, whole));
    writeFileSync(join(contexts, whole, 'Dockerfile'), 'FROM busybox\n');
    writeFileSync(join(contexts, `${whole}.complete`), '');
    await fetchBuildContext({ context: ref }, join(tmp, 'work'), () => store);
    expect(readdirSync(contexts).sort()).toEqual(
      [hash, `${hash}.complete`, whole, `${whole}.complete`].sort(),
    );
  });

  it('never writes through a symlink of the archive, whatever its name', async () => {
    const store = new CountingStore(join(tmp, 'store'));
    const victim = join(tmp, 'host-file.json');
    writeFileSync(victim, '{"token":"precious"}\n');
    const archive = await craftTar([
      { name: 'Dockerfile', content: 'FROM busybox\n' },
      // A context's symlinks may point anywhere (docker build copies them as links): these are the archive's own.
      { name: '.fleetwise-complete', type: 'symlink', linkname: victim },
    ]);
    const hash = createHash('sha256').update(archive).digest('hex');
    const key = buildContextKey(hash, 'tar');
    await store.put(key, archive);
    const workDir = join(tmp, 'work');
    const { contextDir } = await fetchBuildContext({ context: key }, workDir, () => store);
    expect(readFileSync(victim, 'utf8')).toBe('{"token":"precious"}\n');
    expect(lstatSync(join(contextDir, '.fleetwise-complete')).isSymbolicLink()).toBe(true);
    // Extracted whole (its marker lies beside it): the next task of the context does not fetch it again.
    await fetchBuildContext({ context: key }, workDir, () => store);
    expect(store.fetches).toBe(1);
    expect(readFileSync(victim, 'utf8')).toBe('{"token":"precious"}\n');
  });
});

describe('releaseBuildContext', () => {
  it('removes a context a worker that is not root unpacked with read-only directories, marker and all', async () => {
    const store = new CountingStore(join(tmp, 'store'));
    const archive = await craftTar([
      { name: 'Dockerfile', content: 'FROM busybox\n', mode: 0o644 },
      { name: 'vendor', type: 'directory', mode: 0o555 },
      { name: 'vendor/lib.go', content: 'package lib\n', mode: 0o444 },
      // Not even searchable: what is below it is reached only once it is made so.
      { name: 'sealed', type: 'directory', mode: 0o444 },
      { name: 'sealed/inner', type: 'directory', mode: 0o555 },
      { name: 'sealed/inner/state', content: 'epoch 3\n', mode: 0o644 },
    ]);
    const hash = createHash('sha256').update(archive).digest('hex');
    const key = buildContextKey(hash, 'tar');
    await store.put(key, archive);
    const workDir = join(tmp, 'work');
    const build = await fetchBuildContext({ context: key }, workDir, () => store);
    const contexts = join(workDir, 'contexts');
    expect(statSync(join(build.contextDir, 'sealed')).mode & 0o777).toBe(0o444);
    // As the worker that unpacked it would own it.
    chmodSync(tmp, 0o755);
    execFileSync('chown', ['-R', `${NOBODY}:${NOBODY}`, workDir]);
    await asNobody(() => releaseBuildContext(build));
    expect(readdirSync(contexts)).toEqual([]);
  });

  it('leaves alone what it did not hand out, and a context released already', async () => {
    const store = new CountingStore(join(tmp, 'store'));
    const { ref, hash } = await uploadCounter(store);
    const workDir = join(tmp, 'work');
    const first = await fetchBuildContext({ context: ref }, workDir, () => store);
    const second = await fetchBuildContext({ context: ref }, workDir, () => store);
    await releaseBuildContext({ ...first });
    await releaseBuildContext(first);
    await releaseBuildContext(first);
    expect(readdirSync(join(workDir, 'contexts'))).toEqual([hash, `${hash}.complete`]);
    await releaseBuildContext(second);
    expect(readdirSync(join(workDir, 'contexts'))).toEqual([]);
  });
});
