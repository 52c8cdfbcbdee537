import { describe, expect, it } from 'vitest';
import type { Catalog } from '../../src/core/catalog.js';
import { SpotBaseline } from '../../src/scheduler/baselines/spot-baseline.js';
import { noticeHandlingOf } from '../../src/sim/run-request.js';
import { runSimulation } from '../../src/sim/run-simulation.js';
import { constantPairwise } from '../../src/world/ground-truth.js';
import { testCatalog, testSpotMarket, trace, traceJob } from './sim-fixtures.js';

/**
 * A spot run that cannot finish because its job keeps losing its work (bursts empty its only pool about once an hour,
 * and it never checkpoints) says so, rather than asking whether the scheduler places the job: it was placed, again
 * and again.
 */
function catalog(): Catalog {
  return {
    ...testCatalog(),
    spot: testSpotMarket({ typeName: 'small.x', zone: 'testa', pricePerHour: 1.08, interruption: '>20%' }),
  };
}

describe('a spot run stopped at its time limit by interruptions', () => {
  it('names the interruptions, the work they cost, and the missing checkpoints', () => {
    const run = (): void => {
      runSimulation({
        trace: trace(traceJob('J', { iterations: 200_000 })),
        scheduler: new SpotBaseline(catalog(), 'skypilot-spot'),
        catalog: catalog(),
        groundTruth: constantPairwise(1),
        checkpointIntervalSeconds: 0,
        spot: { seed: 3, burstsPerPoolPerMonth: 720, noticeHandling: noticeHandlingOf('skypilot-spot') },
        maxSimulatedSeconds: 100_000,
      });
    };
    expect(run).toThrow(
      /did not finish by 100000 s: 1 jobs unfinished \(e\.g\. J\); 1 of them ran and lost their work to spot interruptions \d+ times \([\d.]+ job-hours\); 1 never checkpoint \(--checkpoint-minutes 0\), so each interruption sends them back to the start: interruptions come faster than they finish/,
    );
  });
});
