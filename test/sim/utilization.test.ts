import { describe, expect, it } from 'vitest';
import { loadCatalogFile } from '../../src/cloud/catalog-file.js';
import { createScheduler, NO_INTERFERENCE } from '../../src/scheduler/registry.js';
import { timeWeightedUtilization } from '../../src/sim/report/series-metrics.js';
import { runSimulation } from '../../src/sim/run-simulation.js';
import { loadTrace } from '../../src/sim/traces/load.js';
import { constantPairwise } from '../../src/world/ground-truth.js';

/**
 * The run's utilization (the report's GPU, vCPU and memory columns) is integrated over every sample by the meter, not
 * over the few a chart keeps: a series downsampled to 20 points keeps each bucket's first, dearest, fullest and last
 * sample, and a utilization computed from it is off by a point or more.
 */
describe('utilization of a run', () => {
  it('is exact whatever the series keeps for the charts', () => {
    const catalog = loadCatalogFile();
    const trace = loadTrace(undefined, { format: 'synthetic', jobs: 60, seed: 7 });
    const run = (maxSeriesPoints: number) =>
      runSimulation({
        trace,
        scheduler: createScheduler(
          'karpenter',
          { catalog, interferenceProfile: NO_INTERFERENCE },
          'scheduler',
        ),
        catalog,
        groundTruth: constantPairwise(1),
        maxSeriesPoints,
      });
    const full = run(1_000_000);
    const coarse = run(20);
    expect(coarse.series.timeSeconds.length).toBeLessThanOrEqual(20 * 4);
    expect(full.series.timeSeconds.length).toBeGreaterThan(200);
    const fromFull = timeWeightedUtilization(
      full.series.timeSeconds,
      full.series.allocatedVcpus,
      full.series.capacityVcpus,
    );
    expect(coarse.utilization?.vcpus).toBeCloseTo(fromFull as number, 12);
    expect(full.utilization?.vcpus).toBeCloseTo(fromFull as number, 12);
    const fromCoarse = timeWeightedUtilization(
      coarse.series.timeSeconds,
      coarse.series.allocatedVcpus,
      coarse.series.capacityVcpus,
    );
    // What the report used to print: another figure.
    expect(Math.abs((fromCoarse as number) - (fromFull as number))).toBeGreaterThan(1e-4);
  });
});
