import { execFileSync } from 'node:child_process';
import {
  chmodSync,
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

/**
 * The files a command writes for its user, on real filesystems that fail: a small tmpfs filled up stands for a full
 * disk, an immutable file (chattr +i) for one that cannot be replaced. Tests run as root, which mount and chattr need.
 */

let tmp = '';
const mounts: string[] = [];

/** A new directory on a tmpfs of `size`, unmounted after the file's tests. */
function smallDisk(name: string, size: string): string {
  const dir = join(tmp, name);
  mkdirSync(dir);
  execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, `fleetwise-${name}`, dir]);
  mounts.push(dir);
  return dir;
}

/** Fill what is left of `dir`'s filesystem: a write there then fails with ENOSPC. */
function fill(dir: string): void {
  try {
    writeFileSync(join(dir, 'filler'), Buffer.alloc(1024 * 1024));
  } catch {
    // ENOSPC: the filler holds every page left
  }
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
  for (const dir of mounts) execFileSync('umount', [dir]);
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
    fill(disk);
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

  it('writes none of a set when one cannot be written', () => {
    const disk = smallDisk('second-full', '8k');
    const roomy = join(tmp, 'roomy');
    mkdirSync(roomy);
    const first = join(roomy, 'trace.json');
    writeFileSync(first, 'old trace\n');
    const second = join(disk, 'table.json');
    writeFileSync(second, 'old table\n');
    fill(disk);
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
});
