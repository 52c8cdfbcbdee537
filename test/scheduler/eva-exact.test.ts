import { describe, expect, it } from 'vitest';
import { loadCatalogFile } from '../../src/cloud/catalog-file.js';
import type { ClusterSnapshot } from '../../src/core/model.js';
import type { Resources } from '../../src/core/resources.js';
import { EvaScheduler } from '../../src/scheduler/eva.js';
import { loadIlpSolver } from '../../src/scheduler/ilp.js';
import { table3Catalog, TABLE3_TASKS } from '../helpers/catalogs.js';
import { spotInstance } from '../helpers/spot-instances.js';

function coldStart(tasks: readonly { id: string; demand: { any: Resources } }[]): ClusterSnapshot {
  return {
    nowSeconds: 1000,
    jobs: tasks.map((t) => ({
      id: `j-${t.id}`,
      taskIds: [t.id],
      reconfigurable: true,
      arrivalSeconds: 0,
      migrationDelaySeconds: 30,
    })),
    tasks: tasks.map((t) => ({ id: t.id, jobId: `j-${t.id}`, key: t.id, demand: t.demand })),
    instances: [],
  };
}

describe('EvaScheduler with the exact ILP as an extra candidate (small problems)', () => {
  it('offers the ILP optimum ($12.80/h on Table 3) and takes it only through the decision rule', async () => {
    const solver = await loadIlpSolver();
    const eva = new EvaScheduler(table3Catalog(), { exact: { solver, maxTasks: 10 }, defaultRate: 1 });
    const plan = eva.plan(coldStart(TABLE3_TASKS));
    const cost = (name: string) => plan.decision.candidates.find((c) => c.name === name)?.costPerHour;
    expect(cost('exact')).toBeCloseTo(12.8, 9);
    // Packed prices (t1 $7.50, t2 $3, t4 $0.40 on the $12 a.x) miss the packing efficiency: t1 goes alone.
    expect(cost('full')).toBeCloseTo(16.2, 9);
    // Eva's own Full Reconfiguration at standalone prices is a candidate on small problems and finds the optimum.
    expect(cost('full-standalone')).toBeCloseTo(12.8, 9);
    // Equal value: the rule keeps the earlier candidate, never a tie-break in favour of a move.
    expect(plan.decision.chosen).toBe('full-standalone');
    const placed = plan.configuration.instances.flatMap((i) => i.taskIds).sort();
    expect(placed).toEqual(['t1', 't2', 't3', 't4']);
  });

  it('is not computed above maxTasks', async () => {
    const solver = await loadIlpSolver();
    const eva = new EvaScheduler(table3Catalog(), { exact: { solver, maxTasks: 3 } });
    const plan = eva.plan(coldStart(TABLE3_TASKS));
    expect(plan.decision.candidates.map((c) => c.name)).toEqual([
      'stay',
      'partial',
      'full',
      'full-standalone',
    ]);
  });
});

describe('the exact candidate next to an instance EC2 recommended rebalancing', () => {
  it('prices an existing instance it keeps as the other candidates do: with its risk premium', async () => {
    const solver = await loadIlpSolver();
    // Job a on a spot c7i.xlarge flagged for rebalancing; its work since the start is at risk there.
    const plan = new EvaScheduler(loadCatalogFile(), {
      spot: true,
      valueOfTimePerJobHour: 0,
      exact: { solver, maxTasks: 10 },
    }).plan({
      nowSeconds: 7200,
      jobs: [
        {
          id: 'a',
          taskIds: ['a-t0'],
          reconfigurable: true,
          arrivalSeconds: 0,
          migrationDelaySeconds: 60,
          lastCheckpointSeconds: 0,
          checkpointIntervalSeconds: 0,
          expectedRemainingSeconds: 100_000,
        },
      ],
      tasks: [{ id: 'a-t0', jobId: 'a', key: 'a', demand: { any: [0, 4, 8] }, instanceId: 'i-1' }],
      instances: [spotInstance('i-1', ['a-t0'])],
    });
    const summary = (name: string) => plan.decision.candidates.find((c) => c.name === name);
    // The ILP keeps a where it is, which is the stay plan, premium and all: no phantom saving over moving a off.
    expect(summary('exact')?.movedJobs).toEqual([]);
    expect(summary('exact')?.costPerHour).toBe(summary('stay')?.costPerHour);
    expect(plan.decision.chosen).not.toBe('exact');
  });
});

describe('multi-task and migration-cost details', () => {
  it("a straggler slows the whole job: r' = max(0, 1 − (1 − r)·n) (Eva §4.4)", async () => {
    const { multiTaskRate } = await import('../../src/scheduler/reservation-price.js');
    expect(multiTaskRate(0.9, 1)).toBe(0.9);
    expect(multiTaskRate(0.9, 4)).toBeCloseTo(0.6, 12);
    expect(multiTaskRate(0.7, 4)).toBe(0);
  });

  it('charges the work lost since the last checkpoint in a move (beyond the paper)', () => {
    const catalog = table3Catalog();
    // t2 alone on an A instance ($12/h, RP $3/h) is inefficient: Partial Reconfiguration would move it to B.
    const snapshot = (lastCheckpointSeconds: number): ClusterSnapshot => ({
      nowSeconds: 100_000,
      jobs: [
        {
          id: 'j',
          taskIds: ['t2'],
          reconfigurable: true,
          arrivalSeconds: 0,
          migrationDelaySeconds: 60,
          lastCheckpointSeconds,
        },
      ],
      tasks: [{ id: 't2', jobId: 'j', key: 't2', demand: { any: [1, 4, 10] }, instanceId: 'i-a' }],
      instances: [{ id: 'i-a', typeName: 'a.x', state: 'running', taskIds: ['t2'] }],
    });
    const cost = (last: number) =>
      new EvaScheduler(catalog).plan(snapshot(last)).decision.candidates.find((c) => c.name === 'partial')
        ?.migrationCost ?? 0;
    // 3600 s more of lost work at the job's $3/h reservation price adds exactly $3.
    expect(cost(100_000 - 3600) - cost(100_000)).toBeCloseTo(3, 9);
  });
});
