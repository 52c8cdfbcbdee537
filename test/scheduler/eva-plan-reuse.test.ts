import { describe, expect, it } from 'vitest';
import type { ClusterSnapshot } from '../../src/core/model.js';
import { unchangedPlan } from '../../src/scheduler/eva-plan-reuse.js';
import type { Configuration, Plan } from '../../src/scheduler/types.js';

/** Job a on i-1 and job b on i-2, both c7i.2xlarge. */
const snapshot: ClusterSnapshot = {
  nowSeconds: 600,
  jobs: ['a', 'b'].map((id) => ({
    id,
    taskIds: [`${id}-t0`],
    reconfigurable: true,
    arrivalSeconds: 0,
    migrationDelaySeconds: 60,
  })),
  tasks: [
    { id: 'a-t0', jobId: 'a', key: 'a', demand: { any: [0, 4, 8] }, instanceId: 'i-1' },
    { id: 'b-t0', jobId: 'b', key: 'b', demand: { any: [0, 4, 8] }, instanceId: 'i-2' },
  ],
  instances: [
    { id: 'i-1', typeName: 'c7i.2xlarge', state: 'running', taskIds: ['a-t0'] },
    { id: 'i-2', typeName: 'c7i.2xlarge', state: 'running', taskIds: ['b-t0'] },
  ],
};

function fullPlan(configuration: Configuration): Plan {
  return {
    configuration,
    decision: {
      scheduler: 'eva',
      nowSeconds: 300,
      candidates: [],
      chosen: 'full',
      reason: 'chose full',
      waiting: [],
      pinned: [],
    },
  };
}

describe('a plan reused because the round inputs did not change', () => {
  it('keeps its name while it still moves jobs (a dry run or a refused round did not carry it out)', () => {
    const moves = fullPlan({
      instances: [{ id: 'i-2', typeName: 'c7i.2xlarge', isNew: false, taskIds: ['a-t0', 'b-t0'] }],
    });
    const reused = unchangedPlan(moves, snapshot);
    expect(reused.decision.chosen).toBe('full');
    expect(reused.decision.nowSeconds).toBe(600);
    expect(reused.decision.reason).toContain('inputs unchanged since t=300 s');
    const launches = fullPlan({
      instances: [{ id: 'new-1', typeName: 'c7i.4xlarge', isNew: true, taskIds: ['a-t0', 'b-t0'] }],
    });
    expect(unchangedPlan(launches, snapshot).decision.chosen).toBe('full');
  });

  it('is recorded as stay once the cluster is what it plans: this round moves nothing', () => {
    const current = fullPlan({
      instances: [
        { id: 'i-1', typeName: 'c7i.2xlarge', isNew: false, taskIds: ['a-t0'] },
        { id: 'i-2', typeName: 'c7i.2xlarge', isNew: false, taskIds: ['b-t0'] },
      ],
    });
    expect(unchangedPlan(current, snapshot).decision.chosen).toBe('stay');
  });
});
