import { describe, expect, it } from 'vitest';
import type { ClusterSnapshot } from '../../src/core/model.js';
import { Admission } from '../../src/queue/admission.js';
import { runRound } from '../../src/round/round.js';
import { NoPackingScheduler } from '../../src/scheduler/baselines/no-packing.js';
import type { Scheduler } from '../../src/scheduler/types.js';
import { table3Catalog } from '../helpers/catalogs.js';

const catalog = table3Catalog();

/** Two waiting one-task jobs of a [0, 4, 12] task (a d.x each, $0.40/h). */
const snapshot: ClusterSnapshot = {
  nowSeconds: 0,
  jobs: ['a', 'b'].map((id) => ({
    id,
    taskIds: [`${id}.0`],
    reconfigurable: true,
    arrivalSeconds: 0,
    migrationDelaySeconds: 0,
  })),
  tasks: ['a', 'b'].map((id) => ({ id: `${id}.0`, jobId: id, key: id, demand: { any: [0, 4, 12] } })),
  instances: [],
};

/** What the scheduler was shown when asked to observe. */
function observedUnder(maxInstances: number): boolean | undefined {
  const inner = new NoPackingScheduler(catalog);
  let seen: boolean | undefined;
  const scheduler: Scheduler = {
    name: inner.name,
    plan: (s) => inner.plan(s),
    observe: (s: ClusterSnapshot) => {
      seen = s.capHoldsJobsBack;
    },
  };
  runRound({
    snapshot,
    jobInfo: () => ({}),
    admission: new Admission(catalog, { caps: { maxInstances } }),
    scheduler,
    observations: [],
    catalog,
    carriedOut: true,
  });
  return seen;
}

describe('the round tells the scheduler when caps hold jobs back', () => {
  it('flags the observed snapshot when admission keeps a job waiting for a cap, and only then', () => {
    expect(observedUnder(1)).toBe(true);
    expect(observedUnder(10)).toBeUndefined();
  });
});
