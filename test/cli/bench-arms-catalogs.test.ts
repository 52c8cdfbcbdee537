/**
 * `bench arms` with an arm on another catalog than the baseline (here a `--config` naming one): the reports name both
 * catalogs, `--cap-share` caps each arm at the share of its own catalog's uncapped peak, and `--peaks-from` takes an
 * earlier report's peaks only for the catalogs it measured them on.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ArmsReport } from '../../src/bench/arms-report.js';
import { BUNDLED_CATALOG_PATH } from '../../src/cloud/catalog-file.js';
import { ensureBuiltCli, runCli } from '../helpers/built-cli.js';
import { writeScaledBundledCatalog } from '../helpers/catalogs.js';

const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-arms-catalogs-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** The bundled catalog at twice its prices, and a copy of it under another name. */
const DOUBLED = join(scratch, 'doubled.json');
const OTHER = join(scratch, 'other.json');
writeScaledBundledCatalog(DOUBLED, 2);
writeScaledBundledCatalog(OTHER, 2);
/** A controller config naming the doubled catalog, relative to its own directory as users write it. */
const CONFIG = join(scratch, 'fleetwise.yaml');
writeFileSync(CONFIG, 'cluster: c\nstateDir: state\ncatalog: doubled.json\n');

const COMMON = '--format synthetic --jobs 14 --multi-task 0.5 --scheduler eva --no-predict';
const SHARE = 0.8;

interface JsonRun {
  readonly totalCost: number;
  readonly peakCostPerHour: number;
}

async function simulateRun(args: readonly string[]): Promise<JsonRun> {
  const r = await runCli(['simulate', ...COMMON.split(' '), ...args, '--json'], process.env, {
    cwd: scratch,
  });
  expect(r.code, r.stderr).toBe(0);
  return (JSON.parse(r.stdout) as { runs: JsonRun[] }).runs[0] as JsonRun;
}

beforeAll(() => {
  ensureBuiltCli(['cli/main.ts', 'sim/run-worker.ts']);
});

describe('bench arms with an arm on another catalog', () => {
  it('names each arm’s catalog and caps each arm at the share of its own catalog’s uncapped peak', async () => {
    const out = join(scratch, 'out');
    const args = ['bench', 'arms', '--seeds', '5-6', '--common', COMMON, '--cap-share', String(SHARE)];
    const arms = ['--arm', 'a=', '--arm', `b=--config ${CONFIG}`];
    const r = await runCli([...args, ...arms, '--out', out], process.env, { cwd: scratch });
    expect(r.code, r.stderr).toBe(0);
    const report = JSON.parse(readFileSync(join(out, 'arms.json'), 'utf8')) as ArmsReport;
    expect(report.catalogs).toEqual({ a: BUNDLED_CATALOG_PATH, b: DOUBLED });
    expect(report.referenceCatalog).toBe(BUNDLED_CATALOG_PATH);
    for (const [i, seed] of report.seeds.entries()) {
      // Each catalog's peak is simulate's of the --common flags alone on it, uncapped.
      const bundled = await simulateRun(['--seed', String(seed)]);
      const doubled = await simulateRun(['--seed', String(seed), '--catalog', DOUBLED]);
      expect(report.uncappedPeakBySeed[i]).toBe(bundled.peakCostPerHour);
      expect(report.uncappedPeakByCatalog[BUNDLED_CATALOG_PATH]?.[i]).toBe(bundled.peakCostPerHour);
      expect(report.uncappedPeakByCatalog[DOUBLED]?.[i]).toBe(doubled.peakCostPerHour);
      expect(doubled.peakCostPerHour).toBeGreaterThan(1.5 * bundled.peakCostPerHour);
      // Each arm under the share of its own catalog's peak.
      expect(report.capBySeedByArm['a']?.[i]).toBe(SHARE * bundled.peakCostPerHour);
      expect(report.capBySeed[i]).toBe(SHARE * bundled.peakCostPerHour);
      expect(report.capBySeedByArm['b']?.[i]).toBe(SHARE * doubled.peakCostPerHour);
    }
    // b's figures are simulate's of its config under its own cap.
    const capB = report.capBySeedByArm['b']?.[0] as number;
    const b = await simulateRun(['--seed', '5', '--config', CONFIG, '--cap-dollars-per-hour', String(capB)]);
    expect(report.runs['b']?.[0]?.totalCost).toBe(b.totalCost);
    expect(b.peakCostPerHour).toBeLessThanOrEqual(capB + 1e-9);

    // The text: the comparison names both catalogs, and each arm's caps have a column.
    expect(r.stdout).toContain(
      `b against a: --config ${CONFIG}\ncatalogs: b runs ${DOUBLED}, a the bundled catalog: the differences hold ` +
        `the catalogs' prices too; each is capped at ${SHARE} × its own catalog’s uncapped peak\n`,
    );
    expect(r.stdout).toMatch(/^seed\s+cap \$\/h a\s+cap \$\/h b\s+cost a\s+cost b\s+Δ cost/m);
    // The page names each arm's catalog.
    const html = readFileSync(join(out, 'arms.html'), 'utf8');
    expect(html).toContain(`--config ${CONFIG} (on ${DOUBLED})`);
    expect(html).toContain('(on the bundled catalog)');

    // --peaks-from that report: the same caps, without a reference run on either catalog.
    const again = await runCli(
      [...args, ...arms, '--peaks-from', join(out, 'arms.json'), '--json'],
      process.env,
      {
        cwd: scratch,
      },
    );
    expect(again.code, again.stderr).toBe(0);
    expect(again.stderr).not.toContain('uncapped');
    const reused = JSON.parse(again.stdout) as ArmsReport;
    expect(reused.capBySeedByArm).toEqual(report.capBySeedByArm);
    expect(reused.runs['b']?.map((run) => run.totalCost)).toEqual(
      report.runs['b']?.map((run) => run.totalCost),
    );
    // But not for a catalog it measured no peak on: refused before any run, naming the arm and the catalog.
    const other = await runCli(
      [...args, ...arms, '--arm', `c=--catalog ${OTHER}`, '--peaks-from', join(out, 'arms.json')],
      process.env,
      { cwd: scratch },
    );
    expect(other.code).toBe(2);
    expect(other.stderr).toContain(
      `--peaks-from\n  - ${join(out, 'arms.json')} has no uncapped peaks on ${OTHER}, the catalog arm c runs: ` +
        'leave out --peaks-from to run the uncapped references again',
    );
    expect(other.stderr).not.toContain('bench arms: seed');
  }, 240_000);
});
