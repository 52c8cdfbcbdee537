import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  COST_FIELDS,
  CROSS_ZONE_COST_FIELD,
  NETWORK_FIELDS,
  SUMMARY_FIELDS,
} from '../../src/sim/report/normalize.js';
import { ensureBuiltCli, runCli } from '../helpers/built-cli.js';

/** `fleetwise simulate --latency-sensitive / --latency-config` as users run them (the built CLI in a subprocess). */
const TINY = ['simulate', '--format', 'synthetic', '--jobs', '12', '--seed', '5', '--multi-task', '1'];

interface JsonRun {
  readonly scheduler: string;
  readonly appPerformanceMean: number | null;
  readonly crossZoneCost: number;
  readonly latencySensitiveJobs: number;
}

let dir = '';
beforeAll(() => {
  ensureBuiltCli(['cli/main.ts', 'sim/run-worker.ts']);
  dir = mkdtempSync(join(tmpdir(), 'fleetwise-latency-'));
});
afterAll(() => {
  if (dir !== '') rmSync(dir, { recursive: true, force: true });
});

describe('fleetwise simulate with a network', () => {
  it('reports application performance and cross-zone cost per run, and draws P_job in report.html', async () => {
    const out = join(dir, 'report');
    const r = await runCli([
      ...TINY,
      '--latency-sensitive',
      '1',
      '--latency-config',
      'examples/latency/congestion.yaml',
      '--scheduler',
      'eva,eva-latency-blind',
      '--json',
      '--out',
      out,
    ]);
    expect(r.code, r.stderr).toBe(0);
    const runs = (JSON.parse(r.stdout) as { runs: JsonRun[] }).runs;
    for (const run of runs) {
      expect(Object.keys(run)).toEqual([
        ...SUMMARY_FIELDS,
        ...NETWORK_FIELDS,
        ...COST_FIELDS,
        CROSS_ZONE_COST_FIELD,
      ]);
      expect(run.latencySensitiveJobs).toBe(12);
      expect(run.appPerformanceMean).toBeGreaterThan(0);
      expect(run.appPerformanceMean).toBeLessThanOrEqual(1);
    }
    const [eva, blind] = runs;
    expect(eva?.appPerformanceMean).toBeGreaterThan(blind?.appPerformanceMean ?? 1);
    expect(readFileSync(join(out, 'report.html'), 'utf8')).toContain('chart-app-performance');
    expect(readFileSync(join(out, 'runs.csv'), 'utf8').split('\n')[0]).toContain('appPerformanceMean');
  }, 180_000);

  it('names the flag or the file and field of a bad value, and keeps the network to the engine runtime', async () => {
    const share = await runCli([...TINY, '--latency-sensitive', '1.5', '--scheduler', 'eva']);
    expect(share.code).not.toBe(0);
    expect(share.stderr).toContain('--latency-sensitive: must be ≤ 1');

    const bad = join(dir, 'bad.yaml');
    writeFileSync(bad, 'episodes:\n  factor: [3, 2]\n');
    const config = await runCli([...TINY, '--latency-config', bad, '--scheduler', 'eva']);
    expect(config.code).not.toBe(0);
    expect(config.stderr).toContain(
      `invalid input: ${bad}\n  - episodes.factor (line 2): low must not exceed high\n`,
    );
    // A misspelled key is named with its line and the field it likely meant.
    const typo = join(dir, 'typo.yaml');
    writeFileSync(typo, 'zones: 3\ndomainRttMicroseconds:\n  crosszone: 900\n');
    const misspelled = await runCli([...TINY, '--latency-config', typo, '--scheduler', 'eva']);
    expect(misspelled.code).toBe(2);
    expect(misspelled.stderr).toContain(
      `invalid input: ${typo}\n  - domainRttMicroseconds.crosszone (line 3): unknown field, did you mean cross-zone?\n`,
    );

    const controller = await runCli([
      ...TINY,
      '--latency-sensitive',
      '0.5',
      '--runtime',
      'controller',
      '--scheduler',
      'eva',
    ]);
    expect(controller.code).not.toBe(0);
    expect(controller.stderr).toContain('--runtime');
    expect(controller.stderr).toMatch(/the simulated network .* runs in the engine runtime only/);
  }, 180_000);
});
