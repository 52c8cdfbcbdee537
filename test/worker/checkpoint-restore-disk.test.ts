import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FsObjectStore } from '../../src/storage/fs-store.js';
import {
  listCheckpoints,
  RestoreDiskError,
  restoreLatestCheckpoint,
  uploadCheckpoint,
} from '../../src/worker/checkpoints.js';

/**
 * Restoring onto a worker disk that fails: a 1 MiB tmpfs stands for a full disk (tests run as root, as the
 * network-namespace tests need), so writes there fail with ENOSPC as a real full disk's do.
 */
let tmp = '';
let small = '';
beforeAll(() => {
  tmp = mkdtempSync(join(tmpdir(), 'fw-restore-disk-'));
  small = join(tmp, 'small');
  mkdirSync(small);
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'fleetwise-small', small]);
});
afterAll(() => {
  execFileSync('umount', [small]);
  rmSync(tmp, { recursive: true, force: true });
});

/** A store holding checkpoint 1 (epoch 1, a few KiB) then checkpoint 2 (epoch 2 with `weightsBytes` of weights). */
async function storeWithTwoCheckpoints(name: string, weightsBytes: number): Promise<FsObjectStore> {
  const store = new FsObjectStore(join(tmp, name, 'store'));
  const src = join(tmp, name, 'src');
  for (const [seq, size] of [
    [1, 10_000],
    [2, weightsBytes],
  ] as const) {
    rmSync(src, { recursive: true, force: true });
    mkdirSync(src, { recursive: true });
    writeFileSync(join(src, 'epoch'), String(seq));
    writeFileSync(join(src, 'weights.bin'), randomBytes(size));
    await uploadCheckpoint(store, { jobId: name, taskId: `${name}.0` }, src, seq);
  }
  return store;
}

describe('restoring onto a failing disk', () => {
  it.each([
    // 1.5 MiB: the downloaded tar does not fit. 700 KiB: the tar fits, its extraction beside it does not.
    ['writing the downloaded tar', 'tar-too-big', 1536 * 1024],
    ['extracting', 'extraction-too-big', 700 * 1024],
  ])(
    'fails the restore when %s fails (ENOSPC), never falling back to the older checkpoint',
    async (_phase, name, weightsBytes) => {
      const store = await storeWithTwoCheckpoints(name, weightsBytes);
      const ref = { jobId: name, taskId: `${name}.0` };
      const dir = join(small, name, 'checkpoint');

      const failed = restoreLatestCheckpoint(store, ref, dir);
      await expect(failed).rejects.toThrow(RestoreDiskError);
      await expect(failed).rejects.toThrow(
        new RegExp(`restoring checkpoint 2 of ${name}\\.0: this worker's disk failed \\(ENOSPC`),
      );
      // The space is given back: no temp tar, no half-extracted state.
      expect(readdirSync(join(small, name))).toEqual(['checkpoint']);
      expect(readdirSync(dir)).toEqual([]);
      // Checkpoint 2 was good all along: still stored, and restored whole where there is room.
      expect(await listCheckpoints(store, ref)).toEqual([
        { seq: 1, complete: true },
        { seq: 2, complete: true },
      ]);
      const roomy = join(tmp, name, 'restored');
      const restored = await restoreLatestCheckpoint(store, ref, roomy);
      expect(restored.manifest?.seq).toBe(2);
      expect(restored.skipped).toEqual([]);
      expect(readFileSync(join(roomy, 'epoch'), 'utf8')).toBe('2');
      rmSync(join(small, name), { recursive: true, force: true });
    },
  );
});
