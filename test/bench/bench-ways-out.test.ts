import { spawn, type ChildProcessByStdio } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI, ensureBuiltCli } from '../helpers/built-cli.js';
import { processesUnder, processesUnderAfter } from '../helpers/processes-under.js';

/**
 * `bench controller` and `bench costs` ended otherwise than by finishing or by Ctrl-C: the reader of their progress
 * gone (`2>&1 | head -2`), a hang-up, an uncaught error. However they end, no controller of theirs runs on and their
 * temporary state is gone.
 */

/** A controller bench small enough to finish in seconds (controller-bench.test.ts). */
const TINY_CONTROLLER = [
  ...['--submissions', '12', '--waiting', '6', '--running', '3', '--workers', '4'],
  ...['--finished', '5', '--rounds', '2', '--heartbeat-seconds', '1'],
];

let scratch: string;
/** Loaded before the CLI (`--import`): an uncaught error on SIGUSR2, as any bug in the bench could throw. */
let throwOnUsr2: string;
beforeAll(() => {
  ensureBuiltCli();
  scratch = mkdtempSync(join(tmpdir(), 'fw-bench-ways-out-'));
  throwOnUsr2 = join(scratch, 'throw-on-usr2.mjs');
  writeFileSync(
    throwOnUsr2,
    "process.on('SIGUSR2', () => { throw new Error('an uncaught error in the bench'); });\n",
  );
}, 300_000);
afterAll(() => {
  // A bench that failed these tests may have left a controller running: not past this file.
  for (const pid of processesUnder(scratch))
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone meanwhile
    }
  rmSync(scratch, { recursive: true, force: true });
});

interface BenchRun {
  readonly child: ChildProcessByStdio<null, Readable, Readable>;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  stdout(): string;
  stderr(): string;
}

/** The built CLI's `bench …` with its temporary files under `dir` (its TMPDIR). */
function bench(dir: string, args: readonly string[], nodeArgs: readonly string[] = []): BenchRun {
  const child = spawn(process.execPath, [...nodeArgs, CLI, 'bench', ...args], {
    env: { ...process.env, TMPDIR: dir },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  return { child, exited, stdout: () => stdout, stderr: () => stderr };
}

async function until(done: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (!done() && Date.now() < deadline) await sleep(50);
  expect(done(), what).toBe(true);
}

/** A fresh TMPDIR for one bench, removed after `body`. */
async function inTmp(prefix: string, body: (dir: string) => Promise<void>): Promise<void> {
  const dir = mkdtempSync(join(scratch, prefix));
  try {
    await body(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('fleetwise bench controller, ended otherwise', () => {
  it('finishes when the reader of its progress has gone, and leaves no controller and no state', async () => {
    await inTmp('stderr-closed-', async (dir) => {
      const run = bench(dir, ['controller', '--json', ...TINY_CONTROLLER]);
      // The reader goes after the first line, as `2>&1 | head -1` does: every later progress line meets EPIPE.
      await new Promise<void>((resolve) => run.child.stderr.once('data', () => resolve()));
      run.child.stderr.destroy();
      expect(await run.exited).toEqual({ code: 0, signal: null });
      const result = JSON.parse(run.stdout()) as { submissions: number };
      expect(result.submissions).toBe(12);
      expect(await processesUnderAfter(dir, 5_000)).toEqual([]);
      expect(readdirSync(dir)).toEqual([]);
    });
  }, 180_000);

  it('on SIGHUP, stops its controller, removes its state and exits 129', async () => {
    await inTmp('sighup-', async (dir) => {
      const run = bench(dir, ['controller', '--json', '--submissions', '100000']);
      await until(() => /submitting 100000 jobs/.test(run.stderr()), 'submitting');
      expect(processesUnder(dir).length).toBeGreaterThan(0);
      run.child.kill('SIGHUP');
      expect(await run.exited).toEqual({ code: 129, signal: null });
      expect(run.stderr()).toMatch(/stopped by SIGHUP/);
      expect(readdirSync(dir)).toEqual([]);
      expect(await processesUnderAfter(dir, 5_000)).toEqual([]);
    });
  }, 120_000);

  it('ended by an uncaught error, takes its controller with it and removes its state', async () => {
    await inTmp('uncaught-', async (dir) => {
      const run = bench(dir, ['controller', '--json', '--submissions', '100000'], ['--import', throwOnUsr2]);
      await until(() => /submitting 100000 jobs/.test(run.stderr()), 'submitting');
      expect(processesUnder(dir).length).toBeGreaterThan(0);
      run.child.kill('SIGUSR2');
      expect(await run.exited).toEqual({ code: 1, signal: null });
      expect(run.stderr()).toMatch(/an uncaught error in the bench/);
      expect(await processesUnderAfter(dir, 5_000)).toEqual([]);
      expect(readdirSync(dir)).toEqual([]);
    });
  }, 120_000);
});

describe('fleetwise bench costs, ended otherwise', () => {
  const costStates = (dir: string): string[] =>
    readdirSync(dir).filter((f) => f.startsWith('fleetwise-cost-bench-'));

  it('finishes when the reader of its progress has gone, and removes its states', async () => {
    await inTmp('stderr-closed-', async (dir) => {
      const run = bench(dir, ['costs', '--jobs', '1000,1000', '--repeats', '1', '--json']);
      await new Promise<void>((resolve) => run.child.stderr.once('data', () => resolve()));
      run.child.stderr.destroy();
      expect(await run.exited).toEqual({ code: 0, signal: null });
      const { results } = JSON.parse(run.stdout()) as { results: { jobs: number }[] };
      expect(results.map((r) => r.jobs)).toEqual([1000, 1000]);
      expect(readdirSync(dir)).toEqual([]);
    });
  }, 180_000);

  it('on SIGHUP, removes the state it was building and exits 129', async () => {
    await inTmp('sighup-', async (dir) => {
      // Large enough to be still building its state when the signal comes.
      const run = bench(dir, ['costs', '--jobs', '200000', '--repeats', '1']);
      await until(() => costStates(dir).length === 1, 'the state being built');
      run.child.kill('SIGHUP');
      expect(await run.exited).toEqual({ code: 129, signal: null });
      expect(run.stderr()).toMatch(/bench costs: stopped by SIGHUP/);
      expect(readdirSync(dir)).toEqual([]);
    });
  }, 120_000);

  it('ended by an uncaught error, removes the state it was building', async () => {
    await inTmp('uncaught-', async (dir) => {
      const run = bench(dir, ['costs', '--jobs', '200000', '--repeats', '1'], ['--import', throwOnUsr2]);
      await until(() => costStates(dir).length === 1, 'the state being built');
      run.child.kill('SIGUSR2');
      expect(await run.exited).toEqual({ code: 1, signal: null });
      expect(run.stderr()).toMatch(/an uncaught error in the bench/);
      expect(readdirSync(dir)).toEqual([]);
    });
  }, 120_000);
});
