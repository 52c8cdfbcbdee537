import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { COST_FIELDS, SUMMARY_FIELDS } from '../../src/sim/report/normalize.js';
import { CLI, ensureBuiltCli, runCli, type CliResult } from '../helpers/built-cli.js';
import type { RunSummary } from '../../src/world/run-result.js';

/**
 * `fleetwise simulate` as users run it: `node dist/cli/main.js` in a subprocess, so the worker-thread entry is
 * the compiled dist/sim/run-worker.js. `npm test` builds first; when run alone (`npx vitest run test/cli`) and
 * a module the CLI loads is missing from dist/ or older than its source, this builds once.
 */
const TINY = ['simulate', '--format', 'synthetic', '--jobs', '6', '--seed', '3'];

const cli = (args: readonly string[]): Promise<CliResult> => runCli(args);

function parseRuns(stdout: string): RunSummary[] {
  const parsed = JSON.parse(stdout) as { runs: RunSummary[] };
  return parsed.runs;
}

/** Everything but the wall time, which differs from run to run. */
function withoutWallTime(runs: readonly RunSummary[]): Omit<RunSummary, 'wallSeconds'>[] {
  return runs.map(({ wallSeconds: _wall, ...rest }) => rest);
}

describe('fleetwise simulate (CLI subprocess)', () => {
  let outDir = '';
  let first: CliResult;

  beforeAll(async () => {
    ensureBuiltCli(['cli/main.ts', 'sim/run-worker.ts']);
    expect(existsSync(CLI), `${CLI} is missing: run npm run build`).toBe(true);
    outDir = mkdtempSync(join(tmpdir(), 'fleetwise-simulate-'));
    first = await cli([...TINY, '--scheduler', 'no-packing,eva', '--json', '--out', outDir]);
  }, 180_000);

  afterAll(() => {
    if (outDir !== '') rmSync(outDir, { recursive: true, force: true });
  });

  it('--json prints exactly one JSON object with one summary per scheduler', () => {
    expect(first.stderr).not.toMatch(/Error|fleetwise:/);
    expect(first.code).toBe(0);
    expect(first.stdout.trimEnd().split('\n')).toHaveLength(1);
    const parsed = JSON.parse(first.stdout) as Record<string, unknown>;
    expect(Object.keys(parsed)).toEqual(['runs']);
    const runs = parseRuns(first.stdout);
    expect(runs.map((r) => r.scheduler)).toEqual(['no-packing', 'eva']);
    for (const run of runs) {
      expect(Object.keys(run)).toEqual([...SUMMARY_FIELDS, ...COST_FIELDS]);
      expect(run.jobs).toBe(6);
      expect(run.totalCost).toBeGreaterThan(0);
      expect(run.meanJctHours).toBeGreaterThan(0);
      expect(run.medianJctHours).toBeLessThanOrEqual(run.p95JctHours);
      expect(run.instancesLaunched).toBeGreaterThan(0);
      expect(run.wallSeconds).toBeGreaterThan(0);
    }
  });

  it('normalizes costs to no-packing, which is 1', () => {
    const [noPacking, eva] = parseRuns(first.stdout);
    expect(noPacking?.normalizedCost).toBe(1);
    expect(noPacking?.migrationsPerJob).toBe(0);
    expect(eva?.normalizedCost).toBeCloseTo((eva?.totalCost ?? 0) / (noPacking?.totalCost ?? 1), 12);
  });

  it('--out writes report.json, runs.csv and a self-contained report.html', () => {
    const report = JSON.parse(readFileSync(join(outDir, 'report.json'), 'utf8')) as {
      runs: RunSummary[];
      details: Record<string, unknown>;
      bounds: { workBound: number; timedBound: number };
    };
    expect(withoutWallTime(report.runs)).toEqual(withoutWallTime(parseRuns(first.stdout)));
    // The trace's lower bounds: positive, and below what every scheduler paid.
    expect(report.bounds.workBound).toBeGreaterThan(0);
    expect(report.bounds.timedBound).toBeGreaterThanOrEqual(report.bounds.workBound - 1e-9);
    for (const r of report.runs) expect(r.totalCost).toBeGreaterThan(report.bounds.workBound);
    expect(Object.keys(report.details)).toEqual(['no-packing', 'eva']);
    const csv = readFileSync(join(outDir, 'runs.csv'), 'utf8').trimEnd().split('\n');
    expect(csv).toHaveLength(3);
    expect(csv[1]?.startsWith('no-packing,6,')).toBe(true);
    const html = readFileSync(join(outDir, 'report.html'), 'utf8');
    // Cost over time, where the money went, instances, allocation, JCT, cost against JCT, migrations.
    expect(html.match(/<svg /g)).toHaveLength(7);
    expect(html).toContain('id="chart-cost-breakdown"');
    expect(html).toContain('<p id="bounds"');
    expect(html).toContain('<p class="lead" id="lead">');
    // Self-contained: the only scripts are inline (the chart library and the charts' options).
    const markup = html.replace(/(<script\b[^>]*>)[\s\S]*?(<\/script>)/g, '$1$2');
    expect(markup).not.toMatch(/https?:\/\/(?!www\.w3\.org)|\ssrc=|<link/);
  });

  it('gives the same numbers one worker at a time (runs share no state)', async () => {
    const serial = await cli([...TINY, '--scheduler', 'eva,no-packing', '--json', '--parallel', '1']);
    expect(serial.code).toBe(0);
    const [eva, noPacking] = withoutWallTime(parseRuns(serial.stdout));
    const [noPackingFirst, evaFirst] = withoutWallTime(parseRuns(first.stdout));
    expect(eva).toEqual(evaFirst);
    expect(noPacking).toEqual(noPackingFirst);
  });

  it('prints a table without --json, and normalizedCost is absent without no-packing', async () => {
    const table = await cli([...TINY, '--scheduler', 'karpenter', '--pairwise-interference', '0.9']);
    expect(table.code).toBe(0);
    const lines = table.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/6 jobs$/);
    expect(lines[2]).toBe('Cost and completion time');
    expect(lines[3]).toMatch(/^scheduler +jobs +total cost \$ +norm\. cost/);
    expect(lines[5]).toMatch(/^karpenter +6 +[\d,]+\.\d\d +–/);
    // The fleet's figures in a table of their own, after a blank line.
    expect(lines.slice(6, 9)).toEqual([
      '',
      'Fleet',
      expect.stringMatching(/^scheduler +migr\.\/job +instances/),
    ]);
  });

  it('rejects an unknown scheduler with the list of valid ones and a non-zero exit', async () => {
    const bad = await cli([...TINY, '--scheduler', 'no-packing,nope', '--json']);
    expect(bad.code).toBe(2);
    expect(bad.stdout).toBe('');
    // With --json the error is one JSON object on stderr, naming the flag.
    const error = JSON.parse(bad.stderr) as { error: string; details: string[] };
    expect(error.error).toBe('invalid input: --scheduler');
    expect(error.details[0]).toContain('unknown scheduler "nope"; valid: eva, eva-full-only');
    expect(error.details[0]).toContain('karpenter-balanced');
  });

  it('names the flag and the reason for a bad option value', async () => {
    const bad = await cli([...TINY, '--scheduler', 'eva', '--parallel', '0', '--eva-default-rate', '1.5']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--parallel: must be ≥ 1');
    expect(bad.stderr).toContain('--eva-default-rate: must be ≤ 1');
  });

  it('refuses a simulated period too short to end and a generated trace too large to make', async () => {
    // A round or poll every millisecond of weeks of simulated time never ends; a billion jobs cannot be allocated.
    const bad = await cli([
      'simulate',
      '--format',
      'synthetic',
      '--jobs',
      '1e9',
      '--scheduler',
      'eva',
      '--round-seconds',
      '0.001',
      '--runtime',
      'controller',
      '--poll-seconds',
      '0.5',
    ]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--jobs: must be ≤ 1000000');
    expect(bad.stderr).toContain('--round-seconds: at least 1 s (a simulation spans weeks)');
    expect(bad.stderr).toContain('--poll-seconds: at least 1 s (a simulation spans weeks)');
  });

  it("checks Eva's price options and runs with standalone prices on request", async () => {
    const bad = await cli([
      ...TINY,
      '--scheduler',
      'eva',
      '--eva-prices',
      'cheap',
      '--eva-packing-efficiency',
      '0',
    ]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--eva-prices');
    expect(bad.stderr).toContain('--eva-packing-efficiency: must be > 0');
    const margin = await cli([...TINY, '--scheduler', 'eva', '--eva-payback-margin', '0.5']);
    expect(margin.code).toBe(2);
    expect(margin.stderr).toContain('--eva-payback-margin: must be ≥ 1');
    const ok = await cli([
      ...TINY,
      '--scheduler',
      'eva',
      '--eva-prices',
      'standalone',
      '--eva-payback-margin',
      '1',
      '--json',
    ]);
    expect(ok.code).toBe(0);
    expect(JSON.parse(ok.stdout).runs[0].scheduler).toBe('eva');
  });

  it('--early-rounds places arriving jobs without waiting for the next period', async () => {
    const args = [...TINY, '--scheduler', 'no-packing', '--json', '--round-seconds', '3600'];
    const periodic = parseRuns((await cli(args)).stdout)[0] as RunSummary;
    const early = parseRuns((await cli([...args, '--early-rounds'])).stdout)[0] as RunSummary;
    // With hourly rounds a job waits up to an hour for its first round; planned on arrival, it waits for none.
    expect(early.meanJctHours).toBeLessThan(periodic.meanJctHours - 0.1);
  });

  it('--arrival-rate-scale makes the same jobs arrive that much faster and is recorded in report.json', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fleetwise-arrivals-'));
    try {
      const args = [...TINY, '--scheduler', 'no-packing', '--json'];
      const fast = await cli([...args, '--arrival-rate-scale', '4', '--out', dir]);
      expect(fast.code, fast.stderr).toBe(0);
      const report = JSON.parse(readFileSync(join(dir, 'report.json'), 'utf8')) as {
        settings: Record<string, unknown>;
        details: Record<string, { jobs: { id: string; arrivalSeconds: number }[] }>;
      };
      expect(report.settings.arrivalRateScale).toBe(4);
      const base = JSON.parse(readFileSync(join(outDir, 'report.json'), 'utf8')) as typeof report;
      expect(base.settings.arrivalRateScale).toBe(1);
      const arrivals = (r: typeof report) =>
        new Map((r.details['no-packing']?.jobs ?? []).map((j) => [j.id, j.arrivalSeconds]));
      const before = arrivals(base);
      const after = arrivals(report);
      expect(after.size).toBe(6);
      // Generated arrivals are whole seconds, so the scaled ones are within a second of a quarter of the originals.
      for (const [id, t] of after)
        expect(Math.abs(t - (before.get(id) as number) / 4)).toBeLessThanOrEqual(1);
      expect(Math.max(...after.values())).toBeLessThan(Math.max(...before.values()) / 3);

      // A thousand times slower at most: far slower, arrivals land centuries out and the run never ends.
      const bad = await cli([...args, '--arrival-rate-scale', '0']);
      expect(bad.code).toBe(2);
      expect(bad.stderr).toContain('--arrival-rate-scale: must be ≥ 0.001');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
