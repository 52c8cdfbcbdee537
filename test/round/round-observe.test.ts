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

describe('the round lets the scheduler learn from the fleet as it ran', () => {
  it('shows the observed snapshot with the jobs it preempts: they ran beside the others when those were measured', () => {
    const running: ClusterSnapshot = {
      ...snapshot,
      jobs: snapshot.jobs.map((j) => ({ ...j, runningSinceSeconds: 0 })),
      tasks: snapshot.tasks.map((t) => ({ ...t, instanceId: 'i-1' })),
      instances: [{ id: 'i-1', typeName: 'c.x', state: 'running', taskIds: ['a.0', 'b.0'] }],
    };
    /** Admission that preempts b, as a class under its share would have it. */
    class PreemptingB extends Admission {
      override victims() {
        return [{ jobId: 'b', classId: 'all', forClassId: 'other', reason: 'test' }];
      }
    }
    let observed: ClusterSnapshot | undefined;
    let planned: ClusterSnapshot | undefined;
    const inner = new NoPackingScheduler(catalog);
    const scheduler: Scheduler = {
      name: inner.name,
      plan: (s) => {
        planned = s;
        return inner.plan(s);
      },
      observe: (s: ClusterSnapshot) => {
        observed = s;
      },
    };
    runRound({
      snapshot: running,
      jobInfo: () => ({}),
      admission: new PreemptingB(catalog, { caps: {} }),
      scheduler,
      observations: [],
      catalog,
      carriedOut: true,
    });
    // b's task was beside a's: learning sees both on i-1 ...
    expect(observed?.jobs.map((j) => j.id)).toEqual(['a', 'b']);
    expect(observed?.instances.find((i) => i.id === 'i-1')?.taskIds).toEqual(['a.0', 'b.0']);
    // ... while the plan is made without the job it sends back to the queue.
    expect(planned?.jobs.map((j) => j.id)).toEqual(['a']);
  });
});
