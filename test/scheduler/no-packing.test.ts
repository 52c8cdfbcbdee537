import { describe, expect, it } from 'vitest';
import type { ClusterSnapshot, SchedJob, SchedTask } from '../../src/core/model.js';
import { NoPackingScheduler } from '../../src/scheduler/baselines/no-packing.js';
import { diffConfiguration } from '../../src/scheduler/actions.js';
import { TABLE3_TASKS, table3Catalog } from '../helpers/catalogs.js';

function job(id: string, taskIds: string[], reconfigurable = true): SchedJob {
  return { id, taskIds, reconfigurable, arrivalSeconds: 0, migrationDelaySeconds: 10 };
}

describe('NoPackingScheduler', () => {
  const catalog = table3Catalog(); // A $12 [4,16,244], B $3 [1,4,61], C $0.8 [0,8,32], D $0.4 [0,4,16]

  it('puts each new task alone on its cheapest feasible type (Eva Table 3: t1→A, t2→B, t3→C, t4→D)', () => {
    const tasks: SchedTask[] = TABLE3_TASKS.map((t) => ({
      id: t.id,
      jobId: `j-${t.id}`,
      key: t.id,
      demand: t.demand,
    }));
    const snapshot: ClusterSnapshot = {
      nowSeconds: 300,
      jobs: tasks.map((t) => job(t.jobId, [t.id])),
      tasks,
      instances: [],
    };
    const plan = new NoPackingScheduler(catalog).plan(snapshot);
    expect(plan.configuration.instances).toEqual([
      { id: 'new-1', typeName: 'a.x', isNew: true, taskIds: ['t1'] },
      { id: 'new-2', typeName: 'b.x', isNew: true, taskIds: ['t2'] },
      { id: 'new-3', typeName: 'c.x', isNew: true, taskIds: ['t3'] },
      { id: 'new-4', typeName: 'd.x', isNew: true, taskIds: ['t4'] },
    ]);
    expect(plan.decision).toMatchObject({ scheduler: 'no-packing', chosen: 'baseline', nowSeconds: 300 });
  });

  it('never moves placed tasks, keeps pinned ones, gives each task of a multi-task job its own instance, and drops empty instances', () => {
    const snapshot: ClusterSnapshot = {
      nowSeconds: 600,
      jobs: [job('run', ['run/0']), job('pin', ['pin/0'], false), job('gang', ['gang/0', 'gang/1'])],
      tasks: [
        { id: 'run/0', jobId: 'run', key: 'r', demand: { any: [0, 2, 4] }, instanceId: 'i-1' },
        { id: 'pin/0', jobId: 'pin', key: 'p', demand: { any: [1, 4, 10] }, instanceId: 'i-2' },
        { id: 'gang/0', jobId: 'gang', key: 'g0', demand: { any: [0, 4, 16] } },
        { id: 'gang/1', jobId: 'gang', key: 'g1', demand: { any: [0, 4, 16] } },
      ],
      instances: [
        { id: 'i-1', typeName: 'a.x', state: 'running', taskIds: ['run/0'] }, // oversized, but No-Packing never moves
        { id: 'i-2', typeName: 'b.x', state: 'launching', taskIds: ['pin/0'] },
        { id: 'i-3', typeName: 'c.x', state: 'running', taskIds: [] },
      ],
    };
    const plan = new NoPackingScheduler(catalog).plan(snapshot);
    expect(plan.configuration.instances).toEqual([
      { id: 'i-1', typeName: 'a.x', isNew: false, taskIds: ['run/0'] },
      { id: 'i-2', typeName: 'b.x', isNew: false, taskIds: ['pin/0'] },
      { id: 'new-1', typeName: 'd.x', isNew: true, taskIds: ['gang/0'] },
      { id: 'new-2', typeName: 'd.x', isNew: true, taskIds: ['gang/1'] },
    ]);
    // The plan is valid and its only effects are two launches, two starts and i-3's termination.
    const diff = diffConfiguration(snapshot, plan.configuration, catalog, { scheduler: 'no-packing' });
    expect(diff.actions.map((a) => a.kind)).toEqual([
      'launch-instance',
      'launch-instance',
      'start-task',
      'start-task',
      'terminate-instance',
    ]);
    expect(diff.movedJobIds).toEqual([]);
  });

  it('fails clearly on a task no type can host', () => {
    const snapshot: ClusterSnapshot = {
      nowSeconds: 0,
      jobs: [job('huge', ['huge/0'])],
      tasks: [{ id: 'huge/0', jobId: 'huge', key: 'h', demand: { any: [16, 4, 4] } }],
      instances: [],
    };
    expect(() => new NoPackingScheduler(catalog).plan(snapshot)).toThrow(
      /no instance type can host task huge\/0/,
    );
  });
});
