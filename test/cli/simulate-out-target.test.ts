import { execFile } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
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

/** Nobody's ids, for a run that root's permissions would not stop. */
const NOBODY = { uid: 65534, gid: 65534 };

/** The built CLI, optionally as another user; killed if it outlives the refusal's deadline. */
function run(
  args: readonly string[],
  as: { readonly uid?: number; readonly gid?: number } = {},
): Promise<Refusal> {
  const started = Date.now();
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [CLI, ...args],
      { cwd: PROJECT_ROOT, timeout: REFUSED_WITHIN_MS, killSignal: 'SIGKILL', ...as },
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

const canRunAsNobody = process.getuid?.() === 0;

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

  it.skipIf(!canRunAsNobody)(
    'in a directory the user may not write: refused at once, nothing made',
    async () => {
      chmodSync(tmp, 0o755);
      const readOnly = join(tmp, 'read-only');
      mkdirSync(readOnly);
      chmodSync(readOnly, 0o555);
      const out = join(readOnly, 'out');
      expectRefused(await run([...LONG, '--out', out], NOBODY), /read-only is not writable \(EACCES\)/);
      expect(existsSync(out)).toBe(false);
    },
    30_000,
  );
});
