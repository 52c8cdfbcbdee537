import { describe, expect, it } from 'vitest';
import type { ClusterSnapshot } from '../../src/core/model.js';
import type { DecisionRecord, Plan } from '../../src/scheduler/types.js';
import { NoPackingScheduler } from '../../src/scheduler/baselines/no-packing.js';
import { runSimulation } from '../../src/sim/run-simulation.js';
import { testCatalog, trace, traceJob } from './sim-fixtures.js';

/** No-Packing's placements, recorded as the given candidate every round. */
class ChoosingScheduler extends NoPackingScheduler {
  constructor(private readonly chosen: DecisionRecord['chosen']) {
    super(testCatalog());
  }

  override plan(snapshot: ClusterSnapshot): Plan {
    const plan = super.plan(snapshot);
    return { ...plan, decision: { ...plan.decision, chosen: this.chosen } };
  }
}

describe("a run's fullReconfigFraction", () => {
  const run = (chosen: DecisionRecord['chosen']) =>
    runSimulation({
      trace: trace(traceJob('A', { iterations: 2000 }), traceJob('B', { arrivalSeconds: 600 })),
      scheduler: new ChoosingScheduler(chosen),
      catalog: testCatalog(),
      groundTruth: () => 1,
    }).summary.fullReconfigFraction;

  it('counts a Full Reconfiguration at standalone prices as one, as Eva counts it in p (§4.5)', () => {
    expect(run('full')).toBe(1);
    expect(run('full-standalone')).toBe(1);
    expect(run('partial')).toBe(0);
  });
});
