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
    const [small] = await benchCostReport(catalog, { jobs: [40], checkpointsPerJob: 3, repeats: 2 });
    expect(small).toBeDefined();
    const r = small as NonNullable<typeof small>;
    // 42 jobs in all (two more between the incremental reports), two to an instance: 21 c7i.2xlarge, each from its
    // launch through two jobs of 5 + 3 × 60 + 30 s (and the 90 s boot of the first).
    expect(r.jobs).toBe(40);
    const perInstanceSeconds = 90 + 2 * (5 + 3 * 60 + 30);
    expect(r.totalCost).toBeCloseTo((21 * perInstanceSeconds * priceOf('c7i.2xlarge')) / 3_600, 6);
    // Per job: submitted, 3 job and 3 task moves, 3 checkpoints; per instance: created and 3 moves.
    expect(r.events).toBe(42 * 10 + 21 * 4);
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
    const table = await runCli(['bench', 'costs', '--jobs', '10', '--repeats', '1']);
    expect(table.code, table.stderr).toBe(0);
    expect(table.stdout).toMatch(/full replay ms/);
    const bad = await runCli(['bench', 'costs', '--jobs', '0']);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toMatch(/jobs.*between 1 and 1,000,000/);
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
