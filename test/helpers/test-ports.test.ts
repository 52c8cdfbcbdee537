import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { claimPortBlock, freePort, portBlockStarts } from './test-ports.js';

function ephemeralRange(): [number, number] {
  const [low, high] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8')
    .trim()
    .split(/\s+/)
    .map(Number);
  return [low as number, high as number];
}

describe('freePort', () => {
  it('hands out distinct ports outside the ephemeral range, skipping one something listens on', async () => {
    const [low, high] = ephemeralRange();
    const first = await freePort();
    // Something else takes the next port of the block: it is skipped.
    const squatter = createServer();
    await new Promise<void>((resolve) => squatter.listen(first + 1, '127.0.0.1', resolve));
    try {
      const ports = [first, ...(await Promise.all([freePort(), freePort(), freePort()]))];
      expect(new Set(ports).size).toBe(ports.length);
      expect(ports).not.toContain(first + 1);
      for (const port of ports) expect(port < low || port > high, String(port)).toBe(true);
    } finally {
      await new Promise<void>((resolve) => squatter.close(() => resolve()));
    }
  });
});

const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-test-ports-test-'));
const spawned: ChildProcess[] = [];
afterAll(() => {
  for (const child of spawned)
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  rmSync(scratch, { recursive: true, force: true });
});

/** A pid whose process has exited (and been reaped). */
function deadPid(): number {
  const pid = spawnSync(process.execPath, ['-e', '']).pid;
  if (pid === undefined) throw new Error('no pid for the short-lived process');
  return pid;
}

/** A running process that holds nothing: a pid for a claimant in this process. */
function sleeper(): number {
  const child = spawn('sleep', ['600'], { stdio: 'ignore' });
  spawned.push(child);
  if (child.pid === undefined) throw new Error('sleep did not start');
  return child.pid;
}

/**
 * Test processes as vitest workers are: the helper (compiled as it is, it imports only Node's modules) in a plain
 * `node` process, which takes three ports and keeps its block until its standard input ends.
 */
describe('port blocks across processes (child processes)', () => {
  const claimantScript = join(scratch, 'claimant.mjs');
  beforeAll(() => {
    const source = readFileSync(fileURLToPath(new URL('./test-ports.ts', import.meta.url)), 'utf8');
    const compiled = ts.transpileModule(source, {
      compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
    });
    writeFileSync(join(scratch, 'test-ports.mjs'), compiled.outputText);
    writeFileSync(
      claimantScript,
      [
        "import { freePort } from './test-ports.mjs';",
        'const ports = [await freePort(), await freePort(), await freePort()];',
        'console.log(JSON.stringify(ports));',
        'for await (const _ of process.stdin);',
      ].join('\n'),
    );
  });

  interface Claimant {
    readonly child: ChildProcess;
    readonly pid: number;
    readonly ports: number[];
    /** How it ended: its exit code, or the signal that ended it. */
    readonly exited: Promise<number | NodeJS.Signals | null>;
  }

  /** A claimant numbered 1 (as the first worker of every vitest run is), its locks under `tmp`. */
  function claimant(tmp: string): Promise<Claimant> {
    const child = spawn(process.execPath, [claimantScript], {
      env: { ...process.env, TMPDIR: tmp, VITEST_POOL_ID: '1' },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    spawned.push(child);
    const exited = new Promise<number | NodeJS.Signals | null>((resolve) =>
      child.once('exit', (code, signal) => resolve(code ?? signal)),
    );
    let out = '';
    let err = '';
    child.stderr?.on('data', (d: Buffer) => (err += d.toString()));
    return new Promise((resolve, reject) => {
      child.stdout?.on('data', (d: Buffer) => {
        out += d.toString();
        if (out.includes('\n') && child.pid !== undefined)
          resolve({ child, pid: child.pid, ports: JSON.parse(out) as number[], exited });
      });
      void exited.then((code) => reject(new Error(`the claimant exited (${code}) first:\n${err}`)));
    });
  }

  /** The blocks the lock directory under `tmp` records as held, by the pid that holds each. */
  function heldBlocks(tmp: string): Map<number, number> {
    const held = new Map<number, number>();
    for (const name of readdirSync(join(tmp, 'fleetwise-test-ports'))) {
      const [start, pid] = name.split('.').map(Number);
      held.set(pid as number, start as number);
    }
    return held;
  }

  function expectPortsIn(ports: readonly number[], start: number | undefined): void {
    expect(start).toBeDefined();
    for (const port of ports) {
      expect(port).toBeGreaterThanOrEqual(start as number);
      expect(port).toBeLessThan((start as number) + 1_000);
    }
  }

  it('gives two processes of one vitest worker number blocks of their own, freed at exit or SIGTERM', async () => {
    const tmp = mkdtempSync(join(scratch, 'tmp-'));
    const first = await claimant(tmp);
    const second = await claimant(tmp);
    expect(first.ports.filter((port) => second.ports.includes(port))).toEqual([]);
    const held = heldBlocks(tmp);
    expect([...held.keys()].sort()).toEqual([first.pid, second.pid].sort());
    expect(held.get(first.pid)).not.toBe(held.get(second.pid));
    expectPortsIn(first.ports, held.get(first.pid));
    expectPortsIn(second.ports, held.get(second.pid));

    first.child.stdin?.end();
    expect(await first.exited).toBe(0);
    expect([...heldBlocks(tmp).keys()]).toEqual([second.pid]);
    // As vitest ends its workers: the process still ends by the signal, its block released.
    second.child.kill('SIGTERM');
    expect(await second.exited).toBe('SIGTERM');
    expect(heldBlocks(tmp).size).toBe(0);
  });

  it('gives processes that claim at the same moment a block each', async () => {
    const tmp = mkdtempSync(join(scratch, 'tmp-'));
    // As many as one run's workers (vitest.config.ts), which every host the suite runs on has blocks for.
    const count = 3;
    const claimants = await Promise.all(Array.from({ length: count }, () => claimant(tmp)));
    const ports = claimants.flatMap((c) => c.ports);
    expect(new Set(ports).size).toBe(ports.length);
    const held = heldBlocks(tmp);
    expect(new Set(held.values()).size).toBe(count);
    for (const c of claimants) expectPortsIn(c.ports, held.get(c.pid));
    for (const c of claimants) c.child.stdin?.end();
    expect(await Promise.all(claimants.map((c) => c.exited))).toEqual(claimants.map(() => 0));
  });

  it('reclaims a block whose lock names a process that is gone, and removes that lock', async () => {
    const tmp = mkdtempSync(join(scratch, 'tmp-'));
    const lockDir = join(tmp, 'fleetwise-test-ports');
    mkdirSync(lockDir);
    // The first block, which a claimant numbered 1 tries first: below the ephemeral range where it leaves room.
    const [low, high] = ephemeralRange();
    const firstStart = low - 20_000 >= 1_000 ? 20_000 : high + 1;
    const gone = deadPid();
    writeFileSync(join(lockDir, `${firstStart}.${gone}.lock`), `${gone}\n`);

    const taker = await claimant(tmp);
    expect(heldBlocks(tmp)).toEqual(new Map([[taker.pid, firstStart]]));
    expectPortsIn(taker.ports, firstStart);
    taker.child.stdin?.end();
    expect(await taker.exited).toBe(0);
  });
});

describe('claimPortBlock', () => {
  it('passes over a block a running process holds; with every block held, names the lock directory', async () => {
    const lockDir = mkdtempSync(join(scratch, 'locks-'));
    const starts = portBlockStarts();
    writeFileSync(join(lockDir, `${starts[0]}.${process.pid}.lock`), `${process.pid}\n`);
    const block = await claimPortBlock({ lockDir, pid: sleeper(), preferred: 0 });
    expect(block.start).toBe(starts[1]);
    block.release();
    expect(readdirSync(lockDir)).toEqual([`${starts[0]}.${process.pid}.lock`]);

    for (const start of starts)
      writeFileSync(join(lockDir, `${start}.${process.pid}.lock`), `${process.pid}\n`);
    await expect(claimPortBlock({ lockDir, pid: sleeper(), preferred: 0 })).rejects.toThrow(lockDir);
  });
});
