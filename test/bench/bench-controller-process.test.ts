import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BenchController } from '../../src/bench/bench-controller-process.js';
import { CLI, ensureBuiltCli } from '../helpers/built-cli.js';
import { processesUnder, processesUnderAfter } from '../helpers/processes-under.js';

/** The benchmark's controller process when it does not start, or dies, and `bench controller` around it. */

describe("the benchmark's controller process", () => {
  let tmp: string;
  beforeAll(() => {
    ensureBuiltCli();
    tmp = mkdtempSync(join(tmpdir(), 'fw-bench-controller-process-'));
  }, 300_000);
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));

  it('is stopped when its API does not answer in time, and the error points at its log', async () => {
    // Loaded before the CLI: the controller blocks before it listens, as one stuck at start does.
    const stall = join(tmp, 'stall.mjs');
    writeFileSync(stall, 'Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 60_000);\n');
    const stateDir = join(tmp, 'stalled');
    await expect(
      BenchController.start(stateDir, ['cluster: bench-stall'], ['--import', stall], {
        startTimeoutMs: 1_000,
      }),
    ).rejects.toThrow(
      `the benchmark's controller did not start its API within 1 s and was stopped; see ${stateDir}/controller.log`,
    );
    expect(processesUnder(stateDir)).toEqual([]);
  }, 20_000);

  it('that dies mid-run is reported as exited, with its log, rather than as a failed request', async () => {
    const stateDir = join(tmp, 'killed');
    const controller = await BenchController.start(stateDir, ['cluster: bench-killed']);
    try {
      expect((await controller.api('GET', '/v1/jobs')).status).toBe(200);
      process.kill(controller.pid, 'SIGKILL');
      const why = `the benchmark's controller exited (signal SIGKILL); see ${stateDir}/controller.log`;
      await expect(controller.api('GET', '/v1/jobs')).rejects.toThrow(why);
      await expect(controller.metrics()).rejects.toThrow(why);
      expect(() => controller.cpuSeconds()).toThrow(why);
    } finally {
      await controller.stop(1_000);
    }
  }, 30_000);
});

describe('fleetwise bench controller, stopped or failing', () => {
  /** The CLI benchmarking under `dir` (its TMPDIR), once it is submitting. */
  async function submitting(dir: string) {
    ensureBuiltCli();
    const child = spawn(process.execPath, [CLI, 'bench', 'controller', '--json', '--submissions', '100000'], {
      env: { ...process.env, TMPDIR: dir },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      child.once('exit', (code, signal) => resolve({ code, signal })),
    );
    const deadline = Date.now() + 60_000;
    while (!/submitting 100000 jobs/.test(stderr) && Date.now() < deadline) await sleep(50);
    expect(stderr).toMatch(/submitting 100000 jobs/);
    return { child, exited, stderr: () => stderr };
  }

  it('a second SIGINT while it stops changes nothing: it still stops its controller and removes its state', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fw-bench-controller-sigint-'));
    try {
      const run = await submitting(dir);
      run.child.kill('SIGINT');
      await sleep(50); // the first signal's handler has run: the second arrives while the controller stops
      run.child.kill('SIGINT');
      expect(await run.exited).toEqual({ code: 130, signal: null });
      expect(run.stderr()).toMatch(/stopped by SIGINT/);
      expect(readdirSync(dir)).toEqual([]);
      expect(await processesUnderAfter(dir, 5_000)).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);

  it('when its controller dies, says so and keeps the controller.log it points at', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fw-bench-controller-crash-'));
    try {
      const run = await submitting(dir);
      const [pid] = processesUnder(dir);
      process.kill(pid as number, 'SIGKILL');
      expect((await run.exited).code).toBe(1);
      const log = /exited \(signal SIGKILL\); see (\S+controller\.log)/.exec(run.stderr())?.[1];
      expect(log, run.stderr()).toBeDefined();
      expect(existsSync(log as string)).toBe(true);
      expect(run.stderr()).toMatch(/state directories \(controller\.log\) kept in /);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
});
