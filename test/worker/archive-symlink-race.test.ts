import { execFileSync } from 'node:child_process';
import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FsObjectStore } from '../../src/storage/fs-store.js';
import type { ObjectStore } from '../../src/storage/object-store.js';
import { packCheckpoint, UnsafeArchiveEntry } from '../../src/worker/archives.js';
import { listCheckpoints, uploadCheckpoint } from '../../src/worker/checkpoints.js';

/**
 * The task keeps running while its checkpoint directory is packed, and the worker reads it as root. The tests swap
 * something after packCheckpoint listed (lstat'ed) the files and before it reads them: a 1 MiB first file holds the
 * stream back (nothing reads it yet) until the swap is done, so the race is decided the same way every time.
 */
const SECRET = 'WORKER_TOKEN=s3cr3t-host-only\n';

let tmp = '';
let dir = '';
let secret = '';
beforeEach(() => {
  tmp = mkdtempSync(join(tmpdir(), 'fw-pack-race-'));
  dir = join(tmp, 'checkpoint');
  mkdirSync(dir);
  secret = join(tmp, 'host-secret');
  writeFileSync(secret, SECRET);
  writeFileSync(join(dir, 'a-model.bin'), Buffer.alloc(1 << 20));
  // The same size as the host file, so the swap is not given away by the size.
  writeFileSync(join(dir, 'b-state'), Buffer.alloc(SECRET.length, 'x'));
});
afterEach(() => rmSync(tmp, { recursive: true, force: true }));

/** Read `tar` to its end: the bytes it gave and how it ended. */
async function drain(tar: Readable): Promise<{ bytes: Buffer; error: Error | undefined }> {
  const chunks: Buffer[] = [];
  try {
    for await (const chunk of tar) chunks.push(chunk as Buffer);
    return { bytes: Buffer.concat(chunks), error: undefined };
  } catch (e) {
    return { bytes: Buffer.concat(chunks), error: e as Error };
  }
}

describe('packCheckpoint while the task swaps its files', () => {
  it('refuses a file swapped for a symlink to a host file, never reading the host file', async () => {
    const { tar } = await packCheckpoint(dir, ['a-model.bin', 'b-state']);
    rmSync(join(dir, 'b-state'));
    symlinkSync(secret, join(dir, 'b-state'));
    const { bytes, error } = await drain(tar);
    expect(error).toBeInstanceOf(UnsafeArchiveEntry);
    expect(error?.message).toBe('entry "b-state" changed after it was listed (now a symlink): not packed');
    expect(bytes.includes(SECRET)).toBe(false);
  });

  it('refuses a file replaced by another one (renamed over it), reading only the one listed', async () => {
    const { tar } = await packCheckpoint(dir, ['a-model.bin', 'b-state']);
    writeFileSync(join(dir, 'b-state.new'), SECRET);
    renameSync(join(dir, 'b-state.new'), join(dir, 'b-state'));
    const { bytes, error } = await drain(tar);
    expect(error?.message).toBe(
      'entry "b-state" changed after it was listed (now a different file): not packed',
    );
    expect(bytes.includes(SECRET)).toBe(false);
  });

  it('refuses a FIFO swapped in, without waiting on it', async () => {
    const { tar } = await packCheckpoint(dir, ['a-model.bin', 'b-state']);
    rmSync(join(dir, 'b-state'));
    execFileSync('mkfifo', [join(dir, 'b-state')]);
    const { error } = await drain(tar);
    expect(error?.message).toBe(
      'entry "b-state" changed after it was listed (no longer a regular file): not packed',
    );
  }, 5_000);

  it('refuses a file listed under a directory that became a symlink to a host directory', async () => {
    // The listing saw sub/ as a directory; by the time the files are looked at, sub leads to the host's directory,
    // and lstat (which follows the directories above the file) sees the host's file as a regular file.
    const host = join(tmp, 'host-dir');
    mkdirSync(host);
    writeFileSync(join(host, 'b-state'), SECRET);
    symlinkSync(host, join(dir, 'sub'));
    const { tar } = await packCheckpoint(dir, ['a-model.bin', 'sub/b-state']);
    const { bytes, error } = await drain(tar);
    expect(error).toBeInstanceOf(UnsafeArchiveEntry);
    expect(error?.message).toBe(
      `entry "sub/b-state" changed after it was listed (opened ${join(host, 'b-state')}, outside the checkpoint directory): not packed`,
    );
    expect(bytes.includes(SECRET)).toBe(false);
  });

  it('an upload whose file was swapped for a symlink fails, leaving nothing in the store', async () => {
    const inner = new FsObjectStore(join(tmp, 'store'));
    // The store gets the tar's stream only once every file was listed: the task swaps b-state just then.
    const store: ObjectStore = Object.create(inner) as ObjectStore;
    store.put = async (key, body, options) => {
      if (key.endsWith('data.tar')) {
        rmSync(join(dir, 'b-state'));
        symlinkSync(secret, join(dir, 'b-state'));
      }
      return inner.put(key, body, options);
    };
    const ref = { jobId: 'job-1', taskId: 'job-1.0' };
    await expect(uploadCheckpoint(store, ref, dir, 1)).rejects.toThrow(
      'checkpoint 1 of job-1.0: entry "b-state" changed after it was listed (now a symlink): not packed',
    );
    expect(await listCheckpoints(inner, ref)).toEqual([]);
    // The host file is untouched and nothing of it was written anywhere in the store.
    expect(statSync(secret).size).toBe(SECRET.length);
    expect(
      readdirSync(join(tmp, 'store'), { recursive: true }).filter((p) => String(p).endsWith('.tar')),
    ).toEqual([]);
  });
});
