/**
 * `bench arms --cap-share` with an arm at other prices than the `--common` flags (its own `--price-overrides`): the
 * arm is capped at the share of the uncapped peak at its own prices, as an arm on another catalog is at its catalog's.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ArmsReport } from '../../src/bench/arms-report.js';
import { BUNDLED_CATALOG_PATH, PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import { ensureBuiltCli, runCli } from '../helpers/built-cli.js';

const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-arms-prices-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const COMMON = '--format synthetic --jobs 14 --multi-task 0.5 --scheduler eva --no-predict';
const SHARE = 0.8;
const SAVINGS_PLAN = join(PROJECT_ROOT, 'examples', 'prices', 'savings-plan.yaml');

interface JsonRun {
  readonly totalCost: number;
  readonly peakCostPerHour: number;
}

async function simulateRun(args: readonly string[]): Promise<JsonRun> {
  const r = await runCli(['simulate', ...COMMON.split(' '), ...args, '--json']);
  expect(r.code, r.stderr).toBe(0);
  return (JSON.parse(r.stdout) as { runs: JsonRun[] }).runs[0] as JsonRun;
}

beforeAll(() => {
  ensureBuiltCli(['cli/main.ts', 'sim/run-worker.ts']);
});

describe('bench arms with an arm at its own prices', () => {
  it('caps the arm at the share of the uncapped peak at its prices', async () => {
    const out = join(scratch, 'out');
    const args = ['bench', 'arms', '--seeds', '5-6', '--common', COMMON, '--cap-share', String(SHARE)];
    const arms = ['--arm', 'a=', '--arm', `b=--price-overrides ${SAVINGS_PLAN}`];
    const r = await runCli([...args, ...arms, '--out', out]);
    expect(r.code, r.stderr).toBe(0);
    const report = JSON.parse(readFileSync(join(out, 'arms.json'), 'utf8')) as ArmsReport;
    for (const [i, seed] of report.seeds.entries()) {
      const listPrices = await simulateRun(['--seed', String(seed)]);
      const ownPrices = await simulateRun(['--seed', String(seed), '--price-overrides', SAVINGS_PLAN]);
      expect(ownPrices.peakCostPerHour).toBeLessThan(0.9 * listPrices.peakCostPerHour);
      // Each arm at the share of the uncapped peak at its own prices.
      expect(report.capBySeedByArm['a']?.[i]).toBe(SHARE * listPrices.peakCostPerHour);
      const capB = SHARE * ownPrices.peakCostPerHour;
      expect(report.capBySeedByArm['b']?.[i]).toBe(capB);
      // A reference at each price: the --common flags alone, as simulate runs them.
      const priced = report.referenceByArm?.['b'] as string;
      expect(report.referenceByArm).toEqual({ a: BUNDLED_CATALOG_PATH, b: priced });
      expect(priced).toMatch(/ with price overrides \{"discountPercent":28,/);
      expect(report.uncappedPeakByCatalog[BUNDLED_CATALOG_PATH]?.[i]).toBe(listPrices.peakCostPerHour);
      expect(report.uncappedPeakByCatalog[priced]?.[i]).toBe(ownPrices.peakCostPerHour);
      const b = await simulateRun([
        '--seed',
        String(seed),
        '--price-overrides',
        SAVINGS_PLAN,
        '--cap-dollars-per-hour',
        String(capB),
      ]);
      expect(report.runs['b']?.[i]?.totalCost).toBe(b.totalCost);
      expect(b.peakCostPerHour).toBeLessThanOrEqual(capB + 1e-9);
    }
    // The progress names the reference at b's prices; the tables give each arm's caps a column.
    expect(r.stderr).toContain('bench arms: seed 5 uncapped at b’s prices done; ');
    expect(r.stdout).toMatch(/^seed\s+cap \$\/h a\s+cap \$\/h b\s+cost a\s+cost b\s+Δ cost/m);

    // --peaks-from that report: the same caps, without a reference run at either price.
    const again = await runCli([...args, ...arms, '--peaks-from', join(out, 'arms.json'), '--json']);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stderr).not.toContain('uncapped');
    expect((JSON.parse(again.stdout) as ArmsReport).capBySeedByArm).toEqual(report.capBySeedByArm);
    // But not at prices it measured no peak at: refused before any run, naming the arm and the prices.
    const tenOff = join(scratch, 'ten-off.yaml');
    writeFileSync(tenOff, 'discountPercent: 10\n');
    const other = await runCli([
      ...args,
      ...arms,
      '--arm',
      `c=--price-overrides ${tenOff}`,
      '--peaks-from',
      join(out, 'arms.json'),
    ]);
    expect(other.code).toBe(2);
    expect(other.stderr).toContain(
      `${join(out, 'arms.json')} has no uncapped peaks on the bundled catalog with price overrides ` +
        '{"discountPercent":10}, the catalog and prices arm c runs: leave out --peaks-from to run the uncapped ' +
        'references again',
    );
    expect(other.stderr).not.toContain('bench arms: seed');
  }, 240_000);
});
