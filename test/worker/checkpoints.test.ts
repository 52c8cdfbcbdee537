import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  existsSync,
  linkSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CreateBucketCommand, type S3Client } from '@aws-sdk/client-s3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FsObjectStore } from '../../src/storage/fs-store.js';
import type { ObjectStore } from '../../src/storage/object-store.js';
import { createS3Client, S3ObjectStore } from '../../src/storage/s3-store.js';
import { checkpointKeys } from '../../src/protocol/object-keys.js';
import {
  checkpointManifestSchema,
  checkpointsToPrune,
  listCheckpoints,
  restoreLatestCheckpoint,
  uploadCheckpoint,
  type UploadResult,
} from '../../src/worker/checkpoints.js';
import { CheckpointWatcher } from '../../src/worker/checkpoint-watcher.js';
import { describeWithMoto } from '../helpers/moto.js';
import { craftTar } from '../helpers/tar.js';

const REF = { jobId: 'job-7', taskId: 'job-7.0' };

let tmp: string;
beforeEach(() => {
  tmp = mkdtempSync(join(tmpdir(), 'fw-ckpt-'));
});
afterEach(() => {
  rmSync(tmp, { recursive: true, force: true });
});

function writeState(dir: string, files: Record<string, string | Buffer>): void {
  mkdirSync(dir, { recursive: true });
  for (const [name, body] of Object.entries(files)) {
    mkdirSync(join(dir, name, '..'), { recursive: true });
    writeFileSync(join(dir, name), body);
  }
}

async function until<T>(probe: () => Promise<T | undefined> | T | undefined, timeoutMs = 5000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** Store `tar` as checkpoint `seq` with a manifest that matches it, the way a worker would. */
async function putCheckpoint(store: ObjectStore, seq: number, tar: Buffer, files: string[]): Promise<void> {
  const keys = checkpointKeys(REF, seq);
  await store.put(keys.data, tar);
  const manifest = {
    version: 1,
    ...REF,
    seq,
    createdAt: new Date().toISOString(),
    sha256: createHash('sha256').update(tar).digest('hex'),
    sizeBytes: tar.length,
    files,
  };
  await store.put(keys.manifest, Buffer.from(JSON.stringify(manifest)));
}

/** The round-trip contract, for any store. */
function checkpointContract(open: () => Promise<ObjectStore>, largeBytes: number): void {
  it('uploads a tar + manifest (written last) and restores it verified, byte for byte', async () => {
    const store = await open();
    const big = Buffer.alloc(largeBytes);
    for (let i = 0; i < big.length; i++) big[i] = (i * 2654435761) >>> 24;
    const src = join(tmp, 'src');
    writeState(src, { counter: '42\n', 'nested/model.bin': big, COMPLETE: '' });
    const { manifest } = await uploadCheckpoint(store, REF, src, 1);
    expect(manifest.files).toEqual(['counter', 'nested/model.bin']); // the marker is not part of the checkpoint
    const tar = await store.getBuffer(checkpointKeys(REF, 1).data);
    expect(manifest.sizeBytes).toBe(tar.length);
    expect(manifest.sha256).toBe(createHash('sha256').update(tar).digest('hex'));
    const stored = checkpointManifestSchema.parse(
      JSON.parse((await store.getBuffer(checkpointKeys(REF, 1).manifest)).toString()),
    );
    expect(stored).toEqual(manifest);

    const dst = join(tmp, 'dst');
    writeState(dst, { stale: 'from an older attempt' });
    const restored = await restoreLatestCheckpoint(store, REF, dst);
    expect(restored.skipped).toEqual([]);
    expect(restored.manifest?.seq).toBe(1);
    expect(readFileSync(join(dst, 'counter'), 'utf8')).toBe('42\n');
    expect(readFileSync(join(dst, 'nested/model.bin')).equals(big)).toBe(true);
    expect(existsSync(join(dst, 'stale'))).toBe(false);
  });

  it('skips a corrupt and a partial checkpoint for the previous good one', async () => {
    const store = await open();
    const src = join(tmp, 'src');
    for (const seq of [1, 2, 3]) {
      writeState(src, { counter: `${seq * 10}\n` });
      await uploadCheckpoint(store, REF, src, seq);
    }
    // seq 3: the tar's bytes changed after the manifest was written (bit rot, a truncated copy).
    const tar = await store.getBuffer(checkpointKeys(REF, 3).data);
    tar[600] = (tar[600] ?? 0) ^ 0xff;
    await store.put(checkpointKeys(REF, 3).data, tar);
    // seq 4: a worker died after the tar and before the manifest.
    await store.put(checkpointKeys(REF, 4).data, Buffer.from('half a tar'));
    const dst = join(tmp, 'dst');
    const restored = await restoreLatestCheckpoint(store, REF, dst);
    expect(restored.manifest?.seq).toBe(2);
    expect(readFileSync(join(dst, 'counter'), 'utf8')).toBe('20\n');
    expect(restored.skipped.map((s) => s.seq)).toEqual([4, 3]);
    expect(restored.skipped[0]?.reason).toMatch(/partial/);
    expect(restored.skipped[1]?.reason).toMatch(/corrupt.*sha256/);
  });
}

describe('checkpoints on the filesystem store', () => {
  checkpointContract(async () => new FsObjectStore(join(tmp, 'store')), 256 * 1024);

  it('restores nothing (and empties the directory) when no checkpoint exists', async () => {
    const store = new FsObjectStore(join(tmp, 'store'));
    const dst = join(tmp, 'dst');
    writeState(dst, { leftover: 'x' });
    const restored = await restoreLatestCheckpoint(store, REF, dst);
    expect(restored.manifest).toBeUndefined();
    expect(existsSync(join(dst, 'leftover'))).toBe(false);
  });

  it('a manifest that does not validate is skipped with the reason', async () => {
    const store = new FsObjectStore(join(tmp, 'store'));
    const src = join(tmp, 'src');
    writeState(src, { counter: '1\n' });
    await uploadCheckpoint(store, REF, src, 1);
    await store.put(checkpointKeys(REF, 2).data, Buffer.from('x'));
    await store.put(checkpointKeys(REF, 2).manifest, Buffer.from('{"version":1,"sha256":"nope"}'));
    const restored = await restoreLatestCheckpoint(store, REF, join(tmp, 'dst'));
    expect(restored.manifest?.seq).toBe(1);
    expect(restored.skipped[0]).toMatchObject({
      seq: 2,
      reason: expect.stringMatching(/bad manifest: .*sha256/),
    });
  });

  it('tells the store about how large the tar will be, so a large checkpoint gets parts large enough', async () => {
    const fsStore = new FsObjectStore(join(tmp, 'store'));
    const hints = new Map<string, number | undefined>();
    const store: ObjectStore = {
      location: fsStore.location,
      put: (key, body, options) => {
        hints.set(key, options?.sizeHintBytes);
        return fsStore.put(key, body, options);
      },
      get: (key) => fsStore.get(key),
      getBuffer: (key) => fsStore.getBuffer(key),
      head: (key) => fsStore.head(key),
      exists: (key) => fsStore.exists(key),
      delete: (key) => fsStore.delete(key),
      list: (prefix?: string) => fsStore.list(prefix),
      listPrefixes: (prefix) => fsStore.listPrefixes(prefix),
    };
    const src = join(tmp, 'src');
    writeState(src, {
      'model.bin': Buffer.alloc(3 * 1024 * 1024 + 7, 1),
      'opt/state.bin': Buffer.alloc(99_999, 2),
    });
    const { manifest } = await uploadCheckpoint(store, REF, src, 1);
    const hint = hints.get(checkpointKeys(REF, 1).data);
    expect(hint).toBeDefined();
    expect(Math.abs((hint ?? 0) - manifest.sizeBytes)).toBeLessThan(manifest.sizeBytes * 0.01);
  });

  it('pruning keeps the newest N complete checkpoints and an in-flight partial one', async () => {
    const store = new FsObjectStore(join(tmp, 'store'));
    const src = join(tmp, 'src');
    writeState(src, { counter: '1\n' });
    await store.put(checkpointKeys(REF, 1).data, Buffer.from('old partial'));
    for (const seq of [2, 3, 4, 5]) await uploadCheckpoint(store, REF, src, seq);
    await store.put(checkpointKeys(REF, 6).data, Buffer.from('uploading'));
    const stored = await listCheckpoints(store, REF);
    expect(checkpointsToPrune(stored, 2)).toEqual([1, 2, 3]);
    expect(checkpointsToPrune(stored, 10)).toEqual([1]);
    expect(checkpointsToPrune(stored.slice(0, 1), 2)).toEqual([]);
    expect(() => checkpointsToPrune(stored, 0)).toThrow(/keep must be a whole number/);
  });

  it('uploads nothing before its listing of the store is done, and counts an adopted task’s state as new', async () => {
    const store = new FsObjectStore(join(tmp, 'store'));
    const dir = join(tmp, 'ck');
    mkdirSync(dir);
    writeState(dir, { counter: '4\n', COMPLETE: '' });
    // Never started (the store was down while it listed): a flush has no seq to use, and 0 no restore accepts.
    const unstarted = new CheckpointWatcher({ store, ref: REF, dir, pollMs: 20 });
    expect(await unstarted.flush()).toBeUndefined();
    expect(await listCheckpoints(store, REF)).toEqual([]);
    // After a restore the directory is what the store holds: not uploaded again.
    rmSync(join(dir, 'COMPLETE'));
    const restored = new CheckpointWatcher({ store, ref: REF, dir, pollMs: 20 });
    await restored.start('restored');
    await restored.stop();
    expect(await restored.flush()).toBeUndefined();
    // Adopted after the agent restarted: what the task wrote meanwhile may never have been uploaded, so it is.
    const adopted = new CheckpointWatcher({ store, ref: REF, dir, pollMs: 20 });
    await adopted.start('unknown');
    await adopted.stop();
    expect((await adopted.flush())?.manifest.seq).toBe(1);
    const back = await restoreLatestCheckpoint(store, REF, join(tmp, 'dst'));
    expect(readFileSync(join(tmp, 'dst', 'counter'), 'utf8')).toBe('4\n');
    expect(back.manifest?.seq).toBe(1);
  });

  it('the watcher uploads on the COMPLETE marker, deletes the marker, and keeps going from the next seq', async () => {
    const store = new FsObjectStore(join(tmp, 'store'));
    const dir = join(tmp, 'ck');
    mkdirSync(dir);
    await store.put(checkpointKeys(REF, 7).data, Buffer.from('partial from a dead worker'));
    const uploads: UploadResult[] = [];
    const watcher = new CheckpointWatcher({
      store,
      ref: REF,
      dir,
      pollMs: 20,
      onUpload: (u) => uploads.push(u),
    });
    await watcher.start();
    try {
      writeState(dir, { counter: '5\n', COMPLETE: '' });
      await until(() => (existsSync(join(dir, 'COMPLETE')) ? undefined : true));
      writeState(dir, { counter: '9\n', COMPLETE: '' });
      await until(() => (uploads.length >= 2 ? true : undefined));
      // Once a task uses markers, an unmarked change is not uploaded (it may be a half-written checkpoint).
      writeState(dir, { counter: '11\n' });
      await new Promise((r) => setTimeout(r, 150));
    } finally {
      await watcher.stop();
    }
    expect(uploads.map((u) => u.manifest.seq)).toEqual([8, 9]);
    const restored = await restoreLatestCheckpoint(store, REF, join(tmp, 'dst'));
    expect(restored.manifest?.seq).toBe(9);
    expect(readFileSync(join(tmp, 'dst', 'counter'), 'utf8')).toBe('9\n');
  });

  it('a marked checkpoint is uploaded when the marker appears, not at the next poll; uploads and the marker never wait for pruning, which lists nothing', async () => {
    const fsStore = new FsObjectStore(join(tmp, 'store'));
    // Deletions (pruning) wait while `held` is set: the marker must be gone by then.
    let held: Promise<void> | undefined;
    let release = (): void => undefined;
    let listings = 0;
    const store: ObjectStore = {
      location: fsStore.location,
      put: (key, body) => fsStore.put(key, body),
      get: (key) => fsStore.get(key),
      getBuffer: (key) => fsStore.getBuffer(key),
      head: (key) => fsStore.head(key),
      exists: (key) => fsStore.exists(key),
      delete: async (key) => {
        await held;
        await fsStore.delete(key);
      },
      list: (prefix?: string) => {
        listings += 1;
        return fsStore.list(prefix);
      },
      listPrefixes: (prefix) => fsStore.listPrefixes(prefix),
    };
    const dir = join(tmp, 'ck');
    mkdirSync(dir);
    // Left by an earlier worker: a complete checkpoint and a partial one, pruned in their turn.
    await putCheckpoint(store, 1, await craftTar([{ name: 'counter', content: '0' }]), ['counter']);
    await store.put(checkpointKeys(REF, 2).data, Buffer.from('partial'));
    const uploads: UploadResult[] = [];
    // A poll far longer than the test: only the directory's watch can start these uploads.
    const watcher = new CheckpointWatcher({
      store,
      ref: REF,
      dir,
      pollMs: 600_000,
      onUpload: (u) => uploads.push(u),
    });
    await watcher.start();
    expect(listings).toBe(1);
    try {
      for (const counter of ['1', '2', '3']) {
        writeState(dir, { counter, COMPLETE: '' });
        await until(() => (existsSync(join(dir, 'COMPLETE')) ? undefined : true));
      }
      expect(uploads.map((u) => u.manifest.seq)).toEqual([3, 4, 5]);
      await until(async () => ((await listCheckpoints(fsStore, REF)).length === 3 ? true : undefined));
      expect(await listCheckpoints(fsStore, REF)).toEqual([3, 4, 5].map((seq) => ({ seq, complete: true })));

      held = new Promise((resolve) => (release = resolve));
      // Durable and unmarked while pruning still waits, and the next upload does not wait for it either.
      for (const counter of ['4', '5']) {
        writeState(dir, { counter, COMPLETE: '' });
        await until(() => (existsSync(join(dir, 'COMPLETE')) ? undefined : true));
      }
      expect(uploads.map((u) => u.manifest.seq)).toEqual([3, 4, 5, 6, 7]);
    } finally {
      release();
      await watcher.stop();
    }
    expect(listings).toBe(1);
    // The pruning that the last upload overtook ran again before stop() returned.
    expect((await listCheckpoints(fsStore, REF)).map((c) => c.seq)).toEqual([5, 6, 7]);
    expect((await restoreLatestCheckpoint(fsStore, REF, join(tmp, 'dst'))).manifest?.seq).toBe(7);
    expect(readFileSync(join(tmp, 'dst', 'counter'), 'utf8')).toBe('5');
  });

  it('a task that used markers is uploaded only on markers by the next watcher too (an agent restart, a move)', async () => {
    const store = new FsObjectStore(join(tmp, 'store'));
    const dir = join(tmp, 'ck');
    writeState(dir, { 'shard-a': 'step1', 'shard-b': 'step1', COMPLETE: '' });
    // A poll far longer than the test, and no quiescence to wait for: only the checks below upload.
    const options = { store, ref: REF, dir, pollMs: 600_000, quiescentMs: 0 };
    const first = new CheckpointWatcher(options);
    await first.start();
    expect((await first.check())?.manifest).toMatchObject({ seq: 1, marked: true });
    await first.stop();

    // Adopted after the agent restarted, the task half-way through its next checkpoint: shard-a new, shard-b not yet.
    const adopted = new CheckpointWatcher(options);
    await adopted.start('unknown');
    writeState(dir, { 'shard-a': 'step2' });
    expect(await adopted.check()).toBeUndefined();
    expect(await adopted.check()).toBeUndefined(); // quiet since the last check, but unmarked
    expect(await adopted.flush()).toBeUndefined();
    writeState(dir, { 'shard-b': 'step2', COMPLETE: '' });
    expect((await adopted.check())?.manifest).toMatchObject({ seq: 2, marked: true });
    await adopted.stop();

    // Moved: restored elsewhere, its watcher knows the task's markers all the same.
    const elsewhere = join(tmp, 'elsewhere');
    expect((await restoreLatestCheckpoint(store, REF, elsewhere)).manifest?.seq).toBe(2);
    const moved = new CheckpointWatcher({ ...options, dir: elsewhere });
    await moved.start('restored');
    writeState(elsewhere, { 'shard-a': 'step3' });
    expect(await moved.check()).toBeUndefined();
    expect(await moved.check()).toBeUndefined();
    expect(await moved.flush()).toBeUndefined();
    await moved.stop();
    expect((await listCheckpoints(store, REF)).map((c) => c.seq)).toEqual([1, 2]);

    // A task without markers goes on being uploaded when its directory is quiet (its manifests say so).
    const unmarkedRef = { jobId: 'job-8', taskId: 'job-8.0' };
    const unmarkedDir = join(tmp, 'unmarked');
    writeState(unmarkedDir, { state: '1' });
    const unmarked = new CheckpointWatcher({ ...options, ref: unmarkedRef, dir: unmarkedDir });
    await unmarked.start('unknown');
    expect((await unmarked.flush())?.manifest).toMatchObject({ seq: 1, marked: false });
    await unmarked.stop();
    const again = new CheckpointWatcher({ ...options, ref: unmarkedRef, dir: unmarkedDir });
    await again.start('restored');
    writeState(unmarkedDir, { state: '2' });
    expect(await again.check()).toBeUndefined();
    expect((await again.check())?.manifest.seq).toBe(2);
    await again.stop();
  });

  it('a dangling symlink is state like any file: uploaded, restored as a link; an unreadable directory is reported', async () => {
    const store = new FsObjectStore(join(tmp, 'store'));
    const dir = join(tmp, 'ck');
    mkdirSync(dir);
    const errors: Error[] = [];
    const options = {
      store,
      ref: REF,
      pollMs: 600_000,
      quiescentMs: 0,
      onError: (e: Error) => errors.push(e),
    };
    const watcher = new CheckpointWatcher({ ...options, dir });
    await watcher.start();
    writeState(dir, { 'step-10': 'weights' });
    symlinkSync('step-9', join(dir, 'latest')); // step-9 rotated away
    expect(await watcher.check()).toBeUndefined();
    expect((await watcher.check())?.manifest.files).toEqual(['latest', 'step-10']);
    writeState(dir, { 'step-11': 'more' });
    expect((await watcher.flush())?.manifest.seq).toBe(2);
    await watcher.stop();
    expect(errors).toEqual([]);
    const dst = join(tmp, 'dst');
    expect((await restoreLatestCheckpoint(store, REF, dst)).manifest?.seq).toBe(2);
    expect(readlinkSync(join(dst, 'latest'))).toBe('step-9');

    // Not a directory at all: nothing to upload, and the reason is reported rather than taken for "no checkpoint".
    const notDir = join(tmp, 'not-a-dir');
    writeFileSync(notDir, 'x');
    const broken = new CheckpointWatcher({ ...options, dir: notDir });
    await broken.start();
    expect(await broken.flush()).toBeUndefined();
    await broken.stop();
    expect(errors.map((e) => e.message)).toEqual([
      expect.stringMatching(/^reading the checkpoint directory: ENOTDIR/),
    ]);
    expect(broken.finalUploadError?.message).toMatch(/ENOTDIR/);
  });

  it('a marked checkpoint that cannot be packed is answered with COMPLETE.failed, told once, and tried again only once the directory changes', async () => {
    const store = new FsObjectStore(join(tmp, 'store'));
    const dir = join(tmp, 'ck');
    mkdirSync(dir);
    const errors: Error[] = [];
    const uploads: UploadResult[] = [];
    const watcher = new CheckpointWatcher({
      store,
      ref: REF,
      dir,
      pollMs: 20,
      onError: (e) => errors.push(e),
      onUpload: (u) => uploads.push(u),
    });
    await watcher.start();
    const marker = join(dir, 'COMPLETE');
    const answer = join(dir, 'COMPLETE.failed');
    try {
      writeState(dir, { state: 'step 1' });
      symlinkSync('/etc/hostname', join(dir, 'cfg'));
      writeFileSync(marker, '');
      // The marker goes, so a task that waits for it goes on; why is in COMPLETE.failed, one line, there first.
      await until(() => (existsSync(marker) ? undefined : true));
      expect(readFileSync(answer, 'utf8')).toMatch(
        /^checkpoint 1 of job-7\.0: entry "cfg" is a symlink to \/etc\/hostname, outside the checkpoint directory[^\n]*\n$/,
      );
      expect(watcher.checkpointError).toMatch(/"cfg" is a symlink to \/etc\/hostname/);
      // Many polls later: not tried again (nothing more told), and nothing stored.
      await new Promise((r) => setTimeout(r, 300));
      expect(errors.map((e) => e.message)).toEqual([expect.stringMatching(/"cfg" is a symlink/)]);
      expect(await listCheckpoints(store, REF)).toEqual([]);

      // Marked again, unchanged: answered at once the same way, without another attempt or report.
      writeFileSync(marker, '');
      await until(() => (existsSync(marker) ? undefined : true));
      expect(readFileSync(answer, 'utf8')).toMatch(/"cfg" is a symlink/);
      expect(errors).toHaveLength(1);

      // A stop or an exit now is told that the state the task left is not in the store.
      expect(await watcher.flush()).toBeUndefined();
      expect(watcher.finalUploadError?.message).toMatch(/"cfg" is a symlink/);
      expect(errors).toHaveLength(1);

      // The task mends its directory and marks it: uploaded under the seq the refused attempt did not keep, without
      // the watcher's answer in it, which is gone with the error.
      rmSync(join(dir, 'cfg'));
      writeFileSync(marker, '');
      await until(() => (uploads.length === 1 ? true : undefined));
      await until(() => (existsSync(marker) ? undefined : true));
    } finally {
      await watcher.stop();
    }
    expect(uploads[0]?.manifest).toMatchObject({ seq: 1, files: ['state'] });
    expect(existsSync(answer)).toBe(false);
    expect(watcher.checkpointError).toBeUndefined();
    expect(errors).toHaveLength(1);
  });

  it('an unmarked directory that cannot be packed is tried once per state, and reported once', async () => {
    const store = new FsObjectStore(join(tmp, 'store'));
    const dir = join(tmp, 'ck');
    mkdirSync(dir);
    const errors: Error[] = [];
    const watcher = new CheckpointWatcher({
      store,
      ref: REF,
      dir,
      pollMs: 600_000,
      quiescentMs: 0,
      onError: (e) => errors.push(e),
    });
    await watcher.start();
    writeState(dir, { state: 'a' });
    symlinkSync('/etc/passwd', join(dir, 'out'));
    expect(await watcher.check()).toBeUndefined(); // seen
    for (let i = 0; i < 5; i += 1) expect(await watcher.check()).toBeUndefined();
    expect(errors.map((e) => e.message)).toEqual([
      expect.stringMatching(/^checkpoint 1 of job-7\.0: .*"out"/),
    ]);
    expect(watcher.checkpointError).toMatch(/"out" is a symlink to \/etc\/passwd/);
    // No COMPLETE.failed for a task that never marks: nothing waits for an answer.
    expect(existsSync(join(dir, 'COMPLETE.failed'))).toBe(false);
    rmSync(join(dir, 'out'));
    expect(await watcher.check()).toBeUndefined(); // a new state, seen
    expect((await watcher.check())?.manifest.seq).toBe(1);
    expect(watcher.checkpointError).toBeUndefined();
    await watcher.stop();
    expect(errors).toHaveLength(1);
  });

  it('the watcher uploads an unmarked directory once it is quiescent, and flush() takes the final state', async () => {
    const store = new FsObjectStore(join(tmp, 'store'));
    const dir = join(tmp, 'ck');
    writeState(dir, { restored: 'baseline' });
    const uploads: UploadResult[] = [];
    const watcher = new CheckpointWatcher({
      store,
      ref: REF,
      dir,
      pollMs: 20,
      quiescentMs: 100,
      onUpload: (u) => uploads.push(u),
    });
    await watcher.start();
    await new Promise((r) => setTimeout(r, 200));
    expect(uploads).toEqual([]); // the restored baseline is not uploaded again
    writeState(dir, { state: 'a' });
    await until(() => (uploads.length === 1 ? true : undefined));
    await watcher.stop();
    writeState(dir, { state: 'bb' });
    const final = await watcher.flush();
    expect(final?.manifest.seq).toBe(2);
    expect(await watcher.flush()).toBeUndefined(); // nothing changed since
  });
});

describe('checkpoint archives', () => {
  it('keeps a relative symlink as a link, and refuses to upload one leading outside the directory', async () => {
    const store = new FsObjectStore(join(tmp, 'store'));
    const src = join(tmp, 'src');
    writeState(src, { 'ckpt-0005.pt': 'weights', 'sub/notes': 'n' });
    symlinkSync('ckpt-0005.pt', join(src, 'latest.pt'));
    symlinkSync('../ckpt-0005.pt', join(src, 'sub', 'up'));
    const { manifest } = await uploadCheckpoint(store, REF, src, 1);
    expect(manifest.files).toEqual(['ckpt-0005.pt', 'latest.pt', 'sub/notes', 'sub/up']);
    const dst = join(tmp, 'dst');
    expect((await restoreLatestCheckpoint(store, REF, dst)).manifest?.seq).toBe(1);
    expect(readlinkSync(join(dst, 'latest.pt'))).toBe('ckpt-0005.pt');
    expect(readFileSync(join(dst, 'sub', 'up'), 'utf8')).toBe('weights');

    symlinkSync('/etc/passwd', join(src, 'passwd'));
    await expect(uploadCheckpoint(store, REF, src, 2)).rejects.toThrow(
      /"passwd" is a symlink to \/etc\/passwd, outside the checkpoint directory/,
    );
    rmSync(join(src, 'passwd'));
    // Each inside by itself, out together: `l/..` is the directory's parent once l is the directory.
    symlinkSync('.', join(src, 'l'));
    symlinkSync('l/..', join(src, 'm'));
    await expect(uploadCheckpoint(store, REF, src, 2)).rejects.toThrow(
      /"m" is a symlink to l\/\.\., which leads outside the checkpoint directory through its other links/,
    );
    expect(await listCheckpoints(store, REF)).toEqual([{ seq: 1, complete: true }]);
    // Links through links that stay inside are fine, and so is a loop (it leads nowhere).
    rmSync(join(src, 'm'));
    symlinkSync('l/sub/../ckpt-0005.pt', join(src, 'via'));
    symlinkSync('loop-b', join(src, 'loop-a'));
    symlinkSync('loop-a', join(src, 'loop-b'));
    await uploadCheckpoint(store, REF, src, 2);
    expect((await restoreLatestCheckpoint(store, REF, join(tmp, 'dst2'))).manifest?.seq).toBe(2);
    expect(readFileSync(join(tmp, 'dst2', 'via'), 'utf8')).toBe('weights');
  });

  it('restores what GNU tar wrote before (./ names, hard links, GNU long names), modes and mtimes included', async () => {
    const store = new FsObjectStore(join(tmp, 'store'));
    const src = join(tmp, 'src');
    const long = `${'l'.repeat(120)}/${'m'.repeat(120)}.bin`;
    writeState(src, { run: '#!/bin/sh\n', [long]: 'deep', a: 'shared' });
    linkSync(join(src, 'a'), join(src, 'b'));
    execFileSync('chmod', ['0750', join(src, 'run')]);
    execFileSync('touch', ['-d', '2024-01-02T03:04:05Z', join(src, 'run')]);
    // What the worker ran before checkpoints were packed in-process.
    const files = ['a', 'b', long, 'run'];
    const tar = execFileSync('tar', ['-c', '-f', '-', '-C', src, '--', ...files.map((f) => `./${f}`)]);
    await putCheckpoint(store, 1, tar, files);
    const dst = join(tmp, 'dst');
    const restored = await restoreLatestCheckpoint(store, REF, dst);
    expect(restored.skipped).toEqual([]);
    expect(readFileSync(join(dst, long), 'utf8')).toBe('deep');
    expect(readFileSync(join(dst, 'b'), 'utf8')).toBe('shared');
    expect(statSync(join(dst, 'run')).mode & 0o777).toBe(0o750);
    expect(statSync(join(dst, 'run')).mtime.toISOString()).toBe('2024-01-02T03:04:05.000Z');
  });

  it('refuses entries that would land outside the directory or write through a link, for the previous checkpoint', async () => {
    const store = new FsObjectStore(join(tmp, 'store'));
    const src = join(tmp, 'src');
    writeState(src, { counter: 'good\n' });
    await uploadCheckpoint(store, REF, src, 1);
    const outside = join(tmp, 'outside');
    mkdirSync(outside);
    const hostile: [string, Parameters<typeof craftTar>[0], RegExp][] = [
      [
        'dot-dot',
        [{ name: '../outside/evil', content: 'x' }],
        /"\.\.\/outside\/evil" has a `\.\.` path segment/,
      ],
      ['absolute', [{ name: join(outside, 'evil'), content: 'x' }], /has an absolute path/],
      [
        'symlink out',
        [{ name: 'out', type: 'symlink', linkname: outside }],
        /"out" is a symlink to .*outside the directory/,
      ],
      [
        'symlink up',
        [{ name: 'up', type: 'symlink', linkname: '../outside' }],
        /"up" is a symlink to \.\.\/outside/,
      ],
      [
        // Each link stays inside by itself; followed one after the other they lead out (d/up is the directory itself).
        'write through a symlink',
        [
          { name: 'd/', type: 'directory' },
          { name: 'd/up', type: 'symlink', linkname: '..' },
          { name: 'e', type: 'symlink', linkname: 'd/up/..' },
          { name: 'e/outside/evil', content: 'x' },
        ],
        /"e\/outside\/evil" goes through e, not a directory/,
      ],
      [
        // Each link points inside by itself; m through l is the directory's parent.
        'symlink out through another',
        [
          { name: 'l', type: 'symlink', linkname: '.' },
          { name: 'm', type: 'symlink', linkname: 'l/..' },
        ],
        /"m" is a symlink to l\/\.\., which leads outside the directory through the archive's other links/,
      ],
      [
        // The link that makes a leads out comes after it.
        'symlink out through a later one',
        [
          { name: 'a', type: 'symlink', linkname: 'x/m/..' },
          { name: 'x/', type: 'directory' },
          { name: 'x/m', type: 'symlink', linkname: '..' },
        ],
        /"a" is a symlink to x\/m\/\.\., which leads outside/,
      ],
      [
        'replace a link',
        [
          { name: 'l', type: 'symlink', linkname: 'f' },
          { name: 'l', content: 'x' },
        ],
        /"l" appears twice/,
      ],
      [
        'hard link out',
        [{ name: 'h', type: 'link', linkname: '../outside/secret' }],
        /has a `\.\.` path segment/,
      ],
    ];
    writeFileSync(join(outside, 'secret'), 's');
    for (const [index, [, entries]] of hostile.entries())
      await putCheckpoint(store, index + 2, await craftTar(entries), []);
    const dst = join(tmp, 'ck', 'dir');
    const restored = await restoreLatestCheckpoint(store, REF, dst);
    expect(restored.manifest?.seq).toBe(1);
    expect(readdirSync(dst)).toEqual(['counter']);
    expect(readdirSync(outside)).toEqual(['secret']);
    expect(lstatSync(join(tmp, 'ck')).isDirectory()).toBe(true);
    const reasons = [...restored.skipped].reverse();
    hostile.forEach(([what, , reason], i) => {
      expect(reasons[i]?.reason, what).toMatch(/^unreadable: entry /);
      expect(reasons[i]?.reason, what).toMatch(reason);
    });
  });
});

describeWithMoto('checkpoints on S3 (moto)', (moto) => {
  let client: S3Client | undefined;
  checkpointContract(
    async () => {
      client ??= createS3Client(moto.clientOptions);
      await client.send(new CreateBucketCommand({ Bucket: 'fw-checkpoints' }));
      return new S3ObjectStore(client, 'fw-checkpoints', 'cluster/');
    },
    6 * 1024 * 1024,
  ); // > one 5 MiB part: a multipart upload
});
