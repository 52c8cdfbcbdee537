import { describe, expect, it } from 'vitest';
import type { Catalog } from '../../../src/core/catalog.js';
import { SpotBaseline } from '../../../src/scheduler/baselines/spot-baseline.js';
import { runControllerSimulation } from '../../../src/sim/controller-runtime/run-controller.js';
import { noticeHandlingOf } from '../../../src/sim/run-request.js';
import { runSimulation } from '../../../src/sim/run-simulation.js';
import { withControllerJobIds } from '../../../src/sim/traces/controller-job-ids.js';
import { constantPairwise } from '../../../src/world/ground-truth.js';
import { testCatalog, testSpotMarket, trace, traceJob } from '../sim-fixtures.js';

/**
 * A run that cannot finish: one 200,000 s job that never checkpoints, on a spot pool EC2 empties about every
 * 3.6 hours: it never runs long enough to finish. Both runtimes stop at their time limit (three days here, not the
 * default month, which the controller runtime takes seconds of rounds to reach) and say why: the spot interruptions,
 * and no checkpoint.
 */
function catalog(): Catalog {
  return {
    ...testCatalog(),
    spot: testSpotMarket({ typeName: 'small.x', zone: 'testa', pricePerHour: 1.08, interruption: '<5%' }),
  };
}

const run = () => ({
  trace: withControllerJobIds(trace(traceJob('J', { iterations: 200_000 }))),
  scheduler: new SpotBaseline(catalog(), 'skypilot-spot'),
  catalog: catalog(),
  groundTruth: constantPairwise(1),
  checkpointIntervalSeconds: 0,
  maxSimulatedSeconds: 3 * 86_400,
  spot: { seed: 3, burstsPerPoolPerMonth: 200, noticeHandling: noticeHandlingOf('skypilot-spot') },
});

const WHY =
  /1 of them ran and lost their work to spot interruptions \d+ times .*1 never checkpoint \(--checkpoint-minutes 0\)/;

describe('a run stalled by spot interruptions', () => {
  it('is explained alike by both runtimes', async () => {
    expect(() => runSimulation(run())).toThrow(WHY);
    await expect(runControllerSimulation(run())).rejects.toThrow(WHY);
  });
});
