import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BUNDLED_CATALOG_PATH, loadCatalogFile, PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import { NoPackingScheduler } from '../../src/scheduler/baselines/no-packing.js';
import { runSimulation } from '../../src/sim/run-simulation.js';
import { parseContentionMatrix } from '../../src/sim/traces/contention-matrix.js';
import { parseEvaTrace } from '../../src/sim/traces/eva-json.js';

/**
 * Calibration against Eva's own simulator (research digest §6, setting C: pai_200, the vCPU catalog for both
 * scheduler and simulator): No-Packing costs $20,736.38 over 200 instances, mean JCT 17.67 h, and the last
 * instance goes at 678,301 s. No-Packing never co-locates, so interference plays no part: the figures check
 * the timing model and billing alone.
 */
describe('calibration: No-Packing on pai_200 against the Eva reference', () => {
  const dataDir = join(PROJECT_ROOT, 'data', 'eva-reference');
  const catalog = loadCatalogFile(BUNDLED_CATALOG_PATH);
  const pai = parseEvaTrace(readFileSync(join(dataDir, 'pai_200.json'), 'utf8'), 'pai_200.json');
  const matrix = parseContentionMatrix(readFileSync(join(dataDir, 'contention_matrix.csv'), 'utf8'));
  const run = () =>
    runSimulation({
      trace: pai,
      scheduler: new NoPackingScheduler(catalog),
      catalog,
      groundTruth: (target, others) => matrix.rate(target, others),
    });
  const result = run();

  it('totals within ±3% of the reference $20,736.38 (we match it to the cent)', () => {
    expect(result.summary.totalCost).toBeGreaterThan(20736.38 * 0.97);
    expect(result.summary.totalCost).toBeLessThan(20736.38 * 1.03);
    expect(result.summary.totalCost).toBeCloseTo(20736.38, 2);
  });

  it('launches one instance per job, never migrates, and ends when the reference does', () => {
    expect(result.summary.jobs).toBe(200);
    expect(result.summary.instancesLaunched).toBe(200);
    expect(result.summary.migrationsPerJob).toBe(0);
    expect(result.summary.fullReconfigFraction).toBe(0);
    expect(result.series.timeSeconds.at(-1)).toBe(678_301);
    expect(result.summary.meanJctHours).toBeCloseTo(17.67, 1);
    expect(result.series.timeSeconds.length).toBeLessThanOrEqual(2000);
  });

  it('gives an identical result on a second run (no state shared between runs)', () => {
    const again = run();
    expect({ ...again, summary: { ...again.summary, wallSeconds: 0 } }).toEqual({
      ...result,
      summary: { ...result.summary, wallSeconds: 0 },
    });
  });
});
