import { execFile, execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import { CLI, ensureBuiltCli } from '../helpers/built-cli.js';

/**
 * `simulate --out DIR` where no report can be written is refused before any run, naming --out, rather than failing
 * (or, under /proc, hanging in mkdir) after minutes of simulation.
 */

// Half a minute of simulation: a refusal within seconds cannot have run it.
const LONG = ['simulate', '--format', 'alibaba', '--jobs', '3000', '--scheduler', 'eva,no-packing'];
const REFUSED_WITHIN_MS = 10_000;

const tmp = mkdtempSync(join(tmpdir(), 'fleetwise-out-target-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

interface Refusal {
  readonly code: number | string | null;
  readonly stdout: string;
  readonly stderr: string;
  readonly ms: number;
}

/** The built CLI; killed if it outlives the refusal's deadline. */
function run(args: readonly string[]): Promise<Refusal> {
  const started = Date.now();
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [CLI, ...args],
      { cwd: PROJECT_ROOT, timeout: REFUSED_WITHIN_MS, killSignal: 'SIGKILL' },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : (error.code ?? error.signal ?? null);
        resolve({ code, stdout, stderr, ms: Date.now() - started });
      },
    );
  });
}

function expectRefused(r: Refusal, why: RegExp): void {
  expect(r.ms).toBeLessThan(REFUSED_WITHIN_MS);
  expect(r.code).toBe(2);
  expect(r.stdout).toBe('');
  expect(r.stderr).toMatch(/--out/);
  expect(r.stderr).toMatch(why);
  expect(r.stderr).not.toMatch(/done in/);
}

describe('simulate --out where no report can be written', () => {
  beforeAll(() => ensureBuiltCli(['cli/main.ts', 'sim/run-worker.ts']), 180_000);

  it('under /proc: refused at once (mkdir there would spin for ever)', async () => {
    expectRefused(await run([...LONG, '--out', '/proc/nope/out']), /\/proc is on procfs/);
  }, 30_000);

  it('under a regular file: refused at once', async () => {
    const file = join(tmp, 'a-file');
    writeFileSync(file, 'x');
    expectRefused(await run([...LONG, '--out', join(file, 'out')]), /a-file is a file: cannot make/);
  }, 30_000);

  it('on a read-only mount: refused at once, nothing made', async () => {
    // A read-only tmpfs (tests run as root, as the network-namespace tests need): root's permissions do not get past
    // a read-only mount, so this is the one unwritable place root meets.
    const readOnly = join(tmp, 'read-only');
    mkdirSync(readOnly);
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'ro,size=1m', 'fleetwise-ro', readOnly]);
    try {
      const out = join(readOnly, 'out');
      expectRefused(await run([...LONG, '--out', out]), /read-only is not writable \(EROFS\)/);
      expect(existsSync(out)).toBe(false);
    } finally {
      execFileSync('umount', [readOnly]);
    }
  }, 30_000);
});
