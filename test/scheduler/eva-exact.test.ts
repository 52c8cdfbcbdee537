import { describe, expect, it } from 'vitest';
import type { ClusterSnapshot } from '../../src/core/model.js';
import type { Resources } from '../../src/core/resources.js';
import { EvaScheduler } from '../../src/scheduler/eva.js';
import { loadIlpSolver } from '../../src/scheduler/ilp.js';
import { table3Catalog, TABLE3_TASKS } from '../helpers/catalogs.js';

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
    const exact = plan.decision.candidates.find((c) => c.name === 'exact');
    const full = plan.decision.candidates.find((c) => c.name === 'full');
    expect(exact?.costPerHour).toBeCloseTo(12.8, 9);
    expect(full?.costPerHour).toBeCloseTo(12.8, 9);
    // Equal value: the rule keeps the earlier candidate, never a tie-break in favour of a move.
    expect(plan.decision.chosen).not.toBe('exact');
    const placed = plan.configuration.instances.flatMap((i) => i.taskIds).sort();
    expect(placed).toEqual(['t1', 't2', 't3', 't4']);
  });

  it('is not computed above maxTasks', async () => {
    const solver = await loadIlpSolver();
    const eva = new EvaScheduler(table3Catalog(), { exact: { solver, maxTasks: 3 } });
    const plan = eva.plan(coldStart(TABLE3_TASKS));
    expect(plan.decision.candidates.map((c) => c.name)).toEqual(['stay', 'partial', 'full']);
  });
});
