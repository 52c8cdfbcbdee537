import { describe, expect, it } from 'vitest';
import { loadCatalogFile } from '../../src/cloud/catalog-file.js';
import { EvaScheduler, type EvaVariant } from '../../src/scheduler/eva.js';
import { runSimulation } from '../../src/sim/run-simulation.js';
import { constantPairwise, memoized, type GroundTruth } from '../../src/world/ground-truth.js';
import { loadContentionMatrix, loadTrace } from '../../src/sim/traces/load.js';
import type { Trace } from '../../src/world/trace.js';

const catalog = loadCatalogFile();
const SEEDS = [10, 11, 12];

function run(trace: Trace, variant: EvaVariant, truth: GroundTruth) {
  return runSimulation({
    trace,
    scheduler: new EvaScheduler(catalog, { variant }),
    catalog,
    groundTruth: truth,
  }).summary;
}

describe('Eva ablation directions on simulated traces', () => {
  it('considering multi-task interdependence lowers both cost and JCT (Eva Table 6 direction)', () => {
    // Eva §6.7's micro-benchmark: 100 jobs of 4 identical tasks, Eva's measured interference.
    const matrix = loadContentionMatrix();
    const truth = memoized((t, o) => matrix.rate(t, o));
    for (const seed of SEEDS) {
      const trace = loadTrace(undefined, { format: 'synthetic', jobs: 100, seed, tasksPerJob: 4 });
      const aware = run(trace, 'eva', truth);
      const single = run(trace, 'eva-single', truth);
      expect(aware.totalCost, `seed ${seed} cost`).toBeLessThan(single.totalCost);
      expect(aware.meanJctHours, `seed ${seed} JCT`).toBeLessThan(single.meanJctHours);
    }
  });

  it('at pairwise throughput 0.85, throughput-aware Eva costs less than Eva-RP (§6.4 direction)', () => {
    let tnrp = 0;
    let rp = 0;
    for (const seed of SEEDS) {
      const trace = loadTrace(undefined, { format: 'alibaba', jobs: 200, seed });
      tnrp += run(trace, 'eva', constantPairwise(0.85)).totalCost;
      rp += run(trace, 'eva-rp', constantPairwise(0.85)).totalCost;
    }
    expect(tnrp).toBeLessThan(rp * 0.95);
  });
});
