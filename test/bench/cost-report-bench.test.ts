import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { benchCostReport } from '../../src/bench/cost-report-bench.js';
import { CLI, ensureBuiltCli, runCli } from '../helpers/built-cli.js';
import { catalog, priceOf } from '../controller/controller-fixtures.js';

describe('fleetwise bench costs', () => {
  it('times both reports on the same history and finds them equal', async () => {
    const told: string[] = [];
    const [small] = await benchCostReport(
      catalog,
      { jobs: [40], checkpointsPerJob: 3, repeats: 2 },
      undefined,
      (message) => told.push(message),
    );
    // Each phase as it starts.
    expect(told).toEqual([
      '40 jobs: building the history',
      '40 jobs: timing the full replay (2×)',
      '40 jobs: timing the incremental report (first, then 2× after one more job)',
    ]);
    expect(small).toBeDefined();
    const r = small as NonNullable<typeof small>;
    // The row's figures are the 40-job history's, not the 42 jobs run by the end (two more between the incremental
    // reports). Two jobs to an instance: 20 c7i.2xlarge, each from its launch through two jobs of 5 + 3 × 60 + 30 s
    // (and the 90 s boot of the first).
    expect(r.jobs).toBe(40);
    const perInstanceSeconds = 90 + 2 * (5 + 3 * 60 + 30);
    expect(r.totalCost).toBeCloseTo((20 * perInstanceSeconds * priceOf('c7i.2xlarge')) / 3_600, 6);
    // Per job: submitted, 3 job and 3 task moves, 3 checkpoints; per instance: created and 3 moves.
    expect(r.events).toBe(40 * 10 + 20 * 4);
    expect(r.maxRelativeDifference).toBeLessThan(1e-9);
    for (const ms of [r.fullReplayMs, r.incrementalFirstMs, r.incrementalNextMs])
      expect(ms).toBeGreaterThan(0);
  });

  it('prints one JSON object with --json, and names the bad option', async () => {
    ensureBuiltCli();
    const ok = await runCli([
      'bench',
      'costs',
      '--jobs',
      '10,20',
      '--checkpoints',
      '1',
      '--repeats',
      '1',
      '--json',
    ]);
    expect(ok.code, ok.stderr).toBe(0);
    const lines = ok.stdout.trim().split('\n');
    expect(lines).toHaveLength(1);
    const out = JSON.parse(lines[0] as string) as {
      results: { jobs: number; maxRelativeDifference: number }[];
    };
    expect(out.results.map((x) => x.jobs)).toEqual([10, 20]);
    for (const x of out.results) expect(x.maxRelativeDifference).toBeLessThan(1e-9);
    // Progress on stderr: each size's phases.
    for (const n of [10, 20])
      for (const phase of ['building the history', 'timing the full replay', 'timing the incremental report'])
        expect(ok.stderr).toMatch(new RegExp(`^bench costs \\[\\d+\\.\\d s\\]: ${n} jobs: ${phase}`, 'm'));
    const table = await runCli(['bench', 'costs', '--jobs', '10', '--repeats', '1']);
    expect(table.code, table.stderr).toBe(0);
    expect(table.stdout).toMatch(/full replay ms/);
    // Bad input names the flag, exit 2.
    const cases: [string[], RegExp][] = [
      [['--jobs', '0'], /- --jobs: each count must be between 1 and 1,000,000/],
      [['--repeats', '0'], /- --repeats: must be ≥ 1/],
      [['--checkpoints', 'x'], /- --checkpoints: must be a number/],
      [['--checkpoints', '2.5'], /- --checkpoints: must be an integer/],
    ];
    for (const [args, message] of cases) {
      const bad = await runCli(['bench', 'costs', ...args]);
      expect(bad.code, args.join(' ')).toBe(2);
      expect(bad.stderr).toMatch(message);
    }
  });

  it('stopped by SIGINT while it builds a state, removes that state and exits 130', async () => {
    ensureBuiltCli();
    const dir = mkdtempSync(join(tmpdir(), 'fw-bench-costs-sigint-'));
    try {
      // Large enough to be still building its state when the signal comes.
      const child = spawn(process.execPath, [CLI, 'bench', 'costs', '--jobs', '200000', '--repeats', '1'], {
        env: { ...process.env, TMPDIR: dir },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stderr = '';
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
        child.once('exit', (code, signal) => resolve({ code, signal })),
      );
      const deadline = Date.now() + 60_000;
      while (readdirSync(dir).length === 0 && Date.now() < deadline) await sleep(50);
      expect(readdirSync(dir)[0]).toMatch(/^fleetwise-cost-bench-/);
      child.kill('SIGINT');
      expect(await exited).toEqual({ code: 130, signal: null });
      expect(stderr).toMatch(/bench costs: stopped by SIGINT/);
      expect(readdirSync(dir)).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
});
