import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OutputFileError, writeFilesAtomically } from '../../src/cli/atomic-file.js';
import { asNobody, NOBODY } from '../helpers/as-nobody.js';
import { fillDisk, SmallDisks } from '../helpers/small-disks.js';

/**
 * The files a command writes for its user, on real filesystems that fail: a small tmpfs filled up stands for a full
 * disk, an immutable file (chattr +i) for one that cannot be replaced, an immutable directory or a read-only mount for
 * one where no file can be created. Tests run as root, which mount and chattr need; the user nobody meets a shared
 * directory root owns.
 */

let tmp = '';
const disks = new SmallDisks();

/** A new directory on a tmpfs of `size`, unmounted after the file's tests. */
const smallDisk = (name: string, size: string): string => disks.make(tmp, name, size);

/** A new directory of `mode` owned by `uid`, under the test's own, which every user may search. */
function directoryOf(name: string, uid: number, mode: number): string {
  chmodSync(tmp, 0o755);
  const dir = join(tmp, name);
  mkdirSync(dir);
  chownSync(dir, uid, uid);
  chmodSync(dir, mode);
  return dir;
}

/** A file of `text` owned by `uid` with `mode`. */
function fileOf(path: string, text: string, uid: number, mode: number): void {
  writeFileSync(path, text);
  chownSync(path, uid, uid);
  chmodSync(path, mode);
}

/** The OutputFileError `write` throws. */
function failureOf(write: () => void): OutputFileError {
  try {
    write();
  } catch (e) {
    if (e instanceof OutputFileError) return e;
    throw e;
  }
  throw new Error('the write did not fail');
}

beforeAll(() => {
  tmp = mkdtempSync(join(tmpdir(), 'fw-atomic-file-'));
});
afterAll(() => {
  disks.unmountAll();
  rmSync(tmp, { recursive: true, force: true });
});

describe('writeFilesAtomically', () => {
  it('replaces a file whole, keeping its mode, and writes through a symlink, which stays one', () => {
    const dir = join(tmp, 'plain');
    mkdirSync(dir);
    const file = join(dir, 'trace.json');
    writeFileSync(file, 'old\n');
    chmodSync(file, 0o640);
    const real = join(dir, 'real.json');
    writeFileSync(real, 'old\n');
    symlinkSync(real, join(dir, 'link.json'));
    writeFilesAtomically([
      { path: file, text: 'new\n', flag: '--out' },
      { path: join(dir, 'link.json'), text: 'linked\n', flag: '--table' },
      { path: join(dir, 'fresh.json'), text: 'fresh\n', flag: '--other' },
    ]);
    expect(readFileSync(file, 'utf8')).toBe('new\n');
    expect(statSync(file).mode & 0o777).toBe(0o640);
    expect(lstatSync(join(dir, 'link.json')).isSymbolicLink()).toBe(true);
    expect(readFileSync(real, 'utf8')).toBe('linked\n');
    expect(readFileSync(join(dir, 'fresh.json'), 'utf8')).toBe('fresh\n');
    expect(readdirSync(dir).sort()).toEqual(['fresh.json', 'link.json', 'real.json', 'trace.json']);
  });

  it('on a full disk leaves the file as it was and nothing beside it, naming the flag and the path', () => {
    const disk = smallDisk('full', '8k');
    const file = join(disk, 'trace.json');
    writeFileSync(file, 'old\n');
    fillDisk(disk);
    const e = failureOf(() =>
      writeFilesAtomically([{ path: file, text: 'x'.repeat(10_000), flag: '--out' }]),
    );
    expect(e.message).toBe(
      `--out: cannot write ${file}: ENOSPC: no space left on device; nothing was written`,
    );
    expect(e).toMatchObject({ flag: '--out', path: file });
    expect(readFileSync(file, 'utf8')).toBe('old\n');
    expect(readdirSync(disk).sort()).toEqual(['filler', 'trace.json']);
  });

  it('refuses two files of a set with one target (a link to the other included), writing neither', () => {
    const dir = join(tmp, 'same-target');
    mkdirSync(dir);
    const file = join(dir, 'report.json');
    writeFileSync(file, 'old\n');
    symlinkSync(file, join(dir, 'alias.json'));
    const e = failureOf(() =>
      writeFilesAtomically([
        { path: file, text: 'report\n', flag: '--out' },
        { path: join(dir, 'alias.json'), text: 'table\n', flag: '--save-colocation-table' },
      ]),
    );
    expect(e.message).toBe(
      `--save-colocation-table: cannot write ${join(dir, 'alias.json')}: it is also --out's file ${file}: give ` +
        'each file its own path; none of the files was written',
    );
    expect(readFileSync(file, 'utf8')).toBe('old\n');
    expect(readdirSync(dir).sort()).toEqual(['alias.json', 'report.json']);
  });

  it('writes none of a set when one cannot be written', () => {
    const disk = smallDisk('second-full', '8k');
    const roomy = join(tmp, 'roomy');
    mkdirSync(roomy);
    const first = join(roomy, 'trace.json');
    writeFileSync(first, 'old trace\n');
    const second = join(disk, 'table.json');
    writeFileSync(second, 'old table\n');
    fillDisk(disk);
    const e = failureOf(() =>
      writeFilesAtomically([
        { path: first, text: 'new trace\n', flag: '--out' },
        { path: join(roomy, 'new.json'), text: 'new\n', flag: '--new' },
        { path: second, text: 'new table\n', flag: '--table' },
      ]),
    );
    expect(e.message).toBe(
      `--table: cannot write ${second}: ENOSPC: no space left on device; none of the files was written`,
    );
    expect(readFileSync(first, 'utf8')).toBe('old trace\n');
    expect(readFileSync(second, 'utf8')).toBe('old table\n');
    expect(readdirSync(roomy)).toEqual(['trace.json']);
    expect(readdirSync(disk).sort()).toEqual(['filler', 'table.json']);
  });

  it('puts back the files already renamed when a later one cannot be replaced', () => {
    const dir = join(tmp, 'undo');
    mkdirSync(dir);
    const first = join(dir, 'trace.json');
    writeFileSync(first, 'old trace\n');
    chmodSync(first, 0o600);
    const locked = join(dir, 'table.json');
    writeFileSync(locked, 'old table\n');
    execFileSync('chattr', ['+i', locked]);
    try {
      const e = failureOf(() =>
        writeFilesAtomically([
          { path: first, text: 'new trace\n', flag: '--out' },
          { path: join(dir, 'new.json'), text: 'new\n', flag: '--new' },
          { path: locked, text: 'new table\n', flag: '--table' },
        ]),
      );
      expect(e.message).toBe(
        `--table: cannot write ${locked}: EPERM: operation not permitted; none of the files was written`,
      );
    } finally {
      execFileSync('chattr', ['-i', locked]);
    }
    expect(readFileSync(first, 'utf8')).toBe('old trace\n');
    expect(statSync(first).mode & 0o777).toBe(0o600);
    expect(readFileSync(locked, 'utf8')).toBe('old table\n');
    expect(readdirSync(dir).sort()).toEqual(['table.json', 'trace.json']);
  });

  it('writes in place what a rename cannot replace: a device, and a file mounted over', () => {
    const dir = join(tmp, 'in-place');
    mkdirSync(dir);
    const source = join(dir, 'host.json');
    writeFileSync(source, 'old\n');
    const mounted = join(dir, 'mounted.json');
    writeFileSync(mounted, '');
    execFileSync('mount', ['--bind', source, mounted]);
    try {
      writeFilesAtomically([
        { path: '/dev/null', text: 'gone\n', flag: '--out' },
        { path: mounted, text: 'new\n', flag: '--table' },
      ]);
    } finally {
      execFileSync('umount', [mounted]);
    }
    expect(statSync('/dev/null').isCharacterDevice()).toBe(true);
    expect(readFileSync(source, 'utf8')).toBe('new\n');
    expect(readdirSync(dir).sort()).toEqual(['host.json', 'mounted.json']);
  });

  it('writes in place, after the files it renames, a file its user may write in a directory where they may not create one', async () => {
    const shared = directoryOf('shared', 0, 0o755);
    const trace = join(shared, 'trace.json');
    fileOf(trace, 'old trace\n', NOBODY, 0o640);
    const mine = directoryOf('mine', NOBODY, 0o755);
    const table = join(mine, 'table.json');
    fileOf(table, 'old table\n', NOBODY, 0o644);
    await asNobody(async () => {
      writeFilesAtomically([
        { path: trace, text: 'new trace\n', flag: '--out' },
        { path: table, text: 'new table\n', flag: '--table' },
      ]);
    });
    expect(readFileSync(trace, 'utf8')).toBe('new trace\n');
    expect(statSync(trace).uid).toBe(NOBODY);
    expect(statSync(trace).mode & 0o777).toBe(0o640);
    expect(readFileSync(table, 'utf8')).toBe('new table\n');
    expect(readdirSync(shared)).toEqual(['trace.json']);
    expect(readdirSync(mine)).toEqual(['table.json']);
  });

  it('names the directory when its user may create no file there and the file is not theirs to write', async () => {
    const shared = directoryOf('shared-closed', 0, 0o755);
    const kept = join(shared, 'kept.json');
    fileOf(kept, 'old\n', 0, 0o644);
    const fresh = join(shared, 'fresh.json');
    const [keptFailure, freshFailure] = await asNobody(async () => [
      failureOf(() => writeFilesAtomically([{ path: kept, text: 'new\n', flag: '--out' }])),
      failureOf(() => writeFilesAtomically([{ path: fresh, text: 'new\n', flag: '--table' }])),
    ]);
    expect(keptFailure.message).toBe(
      `--out: cannot create a file in ${shared}: EACCES: permission denied; nothing was written`,
    );
    expect(keptFailure).toMatchObject({ flag: '--out', path: kept });
    expect(freshFailure.message).toBe(
      `--table: cannot create a file in ${shared}: EACCES: permission denied; nothing was written`,
    );
    expect(readFileSync(kept, 'utf8')).toBe('old\n');
    expect(readdirSync(shared)).toEqual(['kept.json']);
  });

  it('names the directory on a read-only mount, where even root may create no file', () => {
    const source = join(tmp, 'writable-source');
    mkdirSync(source);
    writeFileSync(join(source, 'trace.json'), 'old\n');
    const readOnly = join(tmp, 'read-only');
    mkdirSync(readOnly);
    execFileSync('mount', ['--bind', source, readOnly]);
    disks.track(readOnly);
    execFileSync('mount', ['-o', 'remount,bind,ro', readOnly]);
    const file = join(readOnly, 'trace.json');
    const e = failureOf(() => writeFilesAtomically([{ path: file, text: 'new\n', flag: '--out' }]));
    expect(e.message).toBe(
      `--out: cannot create a file in ${readOnly}: EROFS: read-only file system; nothing was written`,
    );
    expect(readFileSync(file, 'utf8')).toBe('old\n');
  });

  it('leaves a file it would write in place as it was when a file renamed before it cannot be replaced', () => {
    const frozen = join(tmp, 'frozen');
    mkdirSync(frozen);
    const inPlace = join(frozen, 'trace.json');
    writeFileSync(inPlace, 'old trace\n');
    const dir = join(tmp, 'undo-before-in-place');
    mkdirSync(dir);
    const locked = join(dir, 'table.json');
    writeFileSync(locked, 'old table\n');
    // An immutable directory takes no new file, even root's; the files already in it stay writable.
    execFileSync('chattr', ['+i', frozen]);
    execFileSync('chattr', ['+i', locked]);
    try {
      const e = failureOf(() =>
        writeFilesAtomically([
          { path: inPlace, text: 'new trace\n', flag: '--out' },
          { path: join(dir, 'new.json'), text: 'new\n', flag: '--new' },
          { path: locked, text: 'new table\n', flag: '--table' },
        ]),
      );
      expect(e.message).toBe(
        `--table: cannot write ${locked}: EPERM: operation not permitted; none of the files was written`,
      );
    } finally {
      execFileSync('chattr', ['-i', frozen]);
      execFileSync('chattr', ['-i', locked]);
    }
    expect(readFileSync(inPlace, 'utf8')).toBe('old trace\n');
    expect(readdirSync(frozen)).toEqual(['trace.json']);
    expect(readdirSync(dir)).toEqual(['table.json']);
    // With every rename possible, the same set is written whole, the immutable directory's file in place.
    execFileSync('chattr', ['+i', frozen]);
    try {
      writeFilesAtomically([
        { path: inPlace, text: 'new trace\n', flag: '--out' },
        { path: locked, text: 'new table\n', flag: '--table' },
      ]);
    } finally {
      execFileSync('chattr', ['-i', frozen]);
    }
    expect(readFileSync(inPlace, 'utf8')).toBe('new trace\n');
    expect(readFileSync(locked, 'utf8')).toBe('new table\n');
  });

  it('leaves a file mounted over as it was when a file after it cannot be replaced', () => {
    const dir = join(tmp, 'mounted-then-locked');
    mkdirSync(dir);
    const source = join(dir, 'host.json');
    writeFileSync(source, 'old\n');
    const mounted = join(dir, 'mounted.json');
    writeFileSync(mounted, '');
    const locked = join(dir, 'table.json');
    writeFileSync(locked, 'old table\n');
    execFileSync('mount', ['--bind', source, mounted]);
    execFileSync('chattr', ['+i', locked]);
    let e: OutputFileError;
    try {
      e = failureOf(() =>
        writeFilesAtomically([
          { path: mounted, text: 'new\n', flag: '--out' },
          { path: locked, text: 'new table\n', flag: '--table' },
        ]),
      );
    } finally {
      execFileSync('chattr', ['-i', locked]);
      execFileSync('umount', [mounted]);
    }
    expect(e.message).toBe(
      `--table: cannot write ${locked}: EPERM: operation not permitted; none of the files was written`,
    );
    expect(readFileSync(source, 'utf8')).toBe('old\n');
    expect(readdirSync(dir).sort()).toEqual(['host.json', 'mounted.json', 'table.json']);
  });

  it('puts back the files it renamed when a write in place fails after them', () => {
    const dir = join(tmp, 'undo-after-in-place');
    mkdirSync(dir);
    const first = join(dir, 'trace.json');
    writeFileSync(first, 'old trace\n');
    const e = failureOf(() =>
      writeFilesAtomically([
        { path: '/dev/full', text: 'new\n', flag: '--table' },
        { path: first, text: 'new trace\n', flag: '--out' },
        { path: join(dir, 'new.json'), text: 'new\n', flag: '--new' },
      ]),
    );
    expect(e.message).toBe(
      '--table: cannot write /dev/full: ENOSPC: no space left on device; /dev/full is written in place and may be cut short',
    );
    expect(readFileSync(first, 'utf8')).toBe('old trace\n');
    expect(readdirSync(dir)).toEqual(['trace.json']);
  });
});
