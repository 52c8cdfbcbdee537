import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Small tmpfs mounts for tests of a full disk (tests run as root, which mount needs), and the other mounts a test
 * makes, all unmounted by `unmountAll` (in the test file's afterAll).
 */
export class SmallDisks {
  private readonly mounts: string[] = [];

  /** A new directory `name` under `parent` on a tmpfs of `size`. */
  make(parent: string, name: string, size = '8k'): string {
    const dir = join(parent, name);
    mkdirSync(dir);
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, `fleetwise-${name}`, dir]);
    this.mounts.push(dir);
    return dir;
  }

  /** A mount the test made itself, to unmount with the rest. */
  track(dir: string): void {
    this.mounts.push(dir);
  }

  unmountAll(): void {
    for (const dir of this.mounts.splice(0)) execFileSync('umount', [dir]);
  }
}

/** Fill what is left of `dir`'s filesystem: a write there then fails with ENOSPC. */
export function fillDisk(dir: string): void {
  try {
    writeFileSync(join(dir, 'filler'), Buffer.alloc(1024 * 1024));
  } catch {
    // ENOSPC: the filler holds every page left
  }
}
