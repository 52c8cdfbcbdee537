import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import { COST_FIELDS, SPOT_FIELDS, SUMMARY_FIELDS } from '../../src/sim/report/normalize.js';
import { ensureBuiltCli, runCli } from '../helpers/built-cli.js';

/** `fleetwise simulate --spot on|off` as users run it (the built CLI in a subprocess). */
const TINY = ['simulate', '--format', 'synthetic', '--jobs', '12', '--seed', '5', '--parallel', '1'];
/** Spot on, with pool-wide reclaims each preceded by a recommendation: every spot path is taken. */
const SPOT_STRESS = ['--spot', 'on', '--spot-bursts', '30', '--spot-rebalance', '1'];

interface JsonRun {
  readonly scheduler: string;
  readonly totalCost: number;
  readonly interruptions?: number;
  readonly lostWorkHours?: number;
  readonly spotShare?: number;
  readonly rebalanceRecommendations?: number;
}

let dir = '';
beforeAll(() => {
  ensureBuiltCli(['cli/main.ts', 'sim/run-worker.ts']);
  dir = mkdtempSync(join(tmpdir(), 'fleetwise-spot-'));
});
afterAll(() => {
  if (dir !== '') rmSync(dir, { recursive: true, force: true });
});

describe('fleetwise simulate --spot', () => {
  it('reports interruptions, lost work and spot share per run with spot on, in JSON, runs.csv and report.html', async () => {
    const out = join(dir, 'report');
    const args = [...TINY, '--scheduler', 'eva,karpenter-spot,skypilot-spot', '--json'];
    const on = await runCli([...args, ...SPOT_STRESS, '--out', out]);
    expect(on.code, on.stderr).toBe(0);
    const runs = (JSON.parse(on.stdout) as { runs: JsonRun[] }).runs;
    for (const run of runs) {
      expect(Object.keys(run)).toEqual([...SUMMARY_FIELDS, ...SPOT_FIELDS, ...COST_FIELDS]);
      expect(run.spotShare, run.scheduler).toBeGreaterThan(0.5);
      expect(run.lostWorkHours).toBeGreaterThanOrEqual(0);
      // Every reclaim is preceded by a recommendation (bursts' come with their notice).
      expect(run.rebalanceRecommendations, run.scheduler).toBeGreaterThanOrEqual(run.interruptions ?? 0);
    }
    expect(readFileSync(join(out, 'runs.csv'), 'utf8').split('\n')[0]).toContain('lostWorkHours');
    expect(readFileSync(join(out, 'report.html'), 'utf8')).toContain('spot share');
    // The report names the spot snapshot the runs bought from, and its lower bounds are at spot prices: no run is
    // below them (at on-demand prices every spot run would be).
    const report = JSON.parse(readFileSync(join(out, 'report.json'), 'utf8')) as {
      settings: { spot: string };
      bounds: { workBound: number; timedBound: number };
    };
    expect(report.settings.spot).toMatch(/^on \(catalog spot snapshot \d{4}-\d{2}-\d{2};/);
    for (const run of runs)
      expect(run.totalCost, run.scheduler).toBeGreaterThanOrEqual(report.bounds.workBound);

    const offOut = join(dir, 'report-off');
    // On demand, eva alone: the spot baselines are refused without --spot on.
    const off = await runCli([...TINY, '--scheduler', 'eva', '--json', '--spot', 'off', '--out', offOut]);
    expect(off.code, off.stderr).toBe(0);
    const offReport = JSON.parse(readFileSync(join(offOut, 'report.json'), 'utf8')) as typeof report;
    expect(offReport.settings.spot).toBe('off (on demand only)');
    expect(offReport.bounds.workBound).toBeGreaterThan(report.bounds.workBound);
    const onDemand = (JSON.parse(off.stdout) as { runs: JsonRun[] }).runs;
    for (const [i, run] of onDemand.entries()) {
      expect(Object.keys(run)).toEqual([...SUMMARY_FIELDS, ...COST_FIELDS]);
      expect(run.totalCost).toBeGreaterThan((runs[i] as JsonRun).totalCost);
    }
  }, 180_000);

  it('runs the real controller on spot with --runtime controller, reclaims and recommendations included', async () => {
    const args = [...TINY, '--scheduler', 'eva,skypilot-spot', ...SPOT_STRESS, '--json'];
    const [engine, controller] = await Promise.all([
      runCli(args),
      runCli([...args, '--runtime', 'controller']),
    ]);
    expect(controller.code, controller.stderr).toBe(0);
    expect(engine.code, engine.stderr).toBe(0);
    const byRuntime = [engine, controller].map((r) => (JSON.parse(r.stdout) as { runs: JsonRun[] }).runs);
    for (const runs of byRuntime)
      for (const run of runs) {
        expect(Object.keys(run)).toEqual([...SUMMARY_FIELDS, ...SPOT_FIELDS, ...COST_FIELDS]);
        expect(run.spotShare, run.scheduler).toBeGreaterThan(0.5);
        // Every reclaim is preceded by a recommendation (bursts' come with their notice).
        expect(run.rebalanceRecommendations, run.scheduler).toBeGreaterThanOrEqual(run.interruptions ?? 0);
      }
    // The same plans at the same spot prices: the runtimes' bills agree within the reclaims' differences.
    for (const [i, run] of (byRuntime[1] as JsonRun[]).entries())
      expect(run.totalCost / ((byRuntime[0] as JsonRun[])[i] as JsonRun).totalCost).toBeCloseTo(1, 1);
  }, 180_000);

  it("keeps a spec directory's spot: never job off spot, in both runtimes (the declaration reaches the trace)", async () => {
    const specs = join(dir, 'never');
    mkdirSync(specs);
    const resnet = readFileSync(join(PROJECT_ROOT, 'examples', 'jobs', 'resnet.yaml'), 'utf8');
    writeFileSync(join(specs, 'allowed.yaml'), resnet.replace('name: resnet18-cifar10', 'name: allowed'));
    writeFileSync(
      join(specs, 'never.yaml'),
      `${resnet.replace('name: resnet18-cifar10', 'name: never')}\nspot: never\n`,
    );
    for (const runtime of ['engine', 'controller']) {
      const result = await runCli([
        'simulate',
        '--trace',
        specs,
        '--format',
        'specs',
        '--scheduler',
        'eva',
        '--spot',
        'on',
        '--runtime',
        runtime,
        '--no-predict',
        '--json',
      ]);
      expect(result.code, result.stderr).toBe(0);
      const [run] = (JSON.parse(result.stdout) as { runs: JsonRun[] }).runs;
      // Two identical jobs, one of them never on spot: the other's instance-hours, half of them, are spot.
      expect(run?.spotShare, runtime).toBeGreaterThan(0);
      expect(run?.spotShare, runtime).toBeLessThanOrEqual(0.5 + 1e-9);
    }
  });

  it('names the flag of a bad value', async () => {
    const bad = await runCli([...TINY, '--scheduler', 'eva', '--spot', 'maybe']);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain('--spot: must be off or on');
    const bursts = await runCli([...TINY, '--scheduler', 'eva', '--spot-bursts', '2']);
    expect(bursts.code).not.toBe(0);
    expect(bursts.stderr).toMatch(/--spot-bursts\n\s+- needs --spot on/);
    const share = await runCli([...TINY, '--scheduler', 'eva', '--spot', 'on', '--spot-rebalance', '1.5']);
    expect(share.code).not.toBe(0);
    expect(share.stderr).toContain('--spot-rebalance: must be in [0, 1]');
    const rebalance = await runCli([...TINY, '--scheduler', 'eva', '--spot-rebalance', '0.5']);
    expect(rebalance.code).not.toBe(0);
    expect(rebalance.stderr).toMatch(/--spot-rebalance\n\s+- needs --spot on/);
    const falseRate = await runCli([
      ...TINY,
      '--scheduler',
      'eva',
      '--spot',
      'on',
      '--spot-false-rebalances',
      '-1',
    ]);
    expect(falseRate.code).not.toBe(0);
    expect(falseRate.stderr).toContain('--spot-false-rebalances: must be ≥ 0');
    const falseOff = await runCli([...TINY, '--scheduler', 'eva', '--spot-false-rebalances', '1']);
    expect(falseOff.code).not.toBe(0);
    expect(falseOff.stderr).toMatch(/--spot-false-rebalances\n\s+- needs --spot on/);
    const minutes = await runCli([...TINY, '--scheduler', 'eva', '--checkpoint-minutes', '-1']);
    expect(minutes.stderr).toContain('--checkpoint-minutes: must be ≥ 0');
  }, 60_000);
});
