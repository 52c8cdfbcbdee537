import { describe, expect, it } from 'vitest';
import { loadCatalogFile } from '../../src/cloud/catalog-file.js';
import type { ClusterSnapshot, SchedJob } from '../../src/core/model.js';
import { EvaScheduler } from '../../src/scheduler/eva.js';
import type { ThroughputObservation } from '../../src/scheduler/types.js';

const catalog = loadCatalogFile();

/** Single-task jobs a, b, c on one c7i.4xlarge; `running` says which of them run (have a running-since time). */
function sharing(running: Record<string, boolean>): ClusterSnapshot {
  const ids = ['a', 'b', 'c'];
  const jobs: SchedJob[] = ids.map((id) => ({
    id: `j${id}`,
    taskIds: [`t${id}`],
    reconfigurable: true,
    arrivalSeconds: 0,
    migrationDelaySeconds: 60,
    ...(running[id] === false ? {} : { runningSinceSeconds: 10 }),
  }));
  return {
    nowSeconds: 600,
    jobs,
    tasks: ids.map((id) => ({
      id: `t${id}`,
      jobId: `j${id}`,
      key: id,
      demand: { any: [0, 2, 4] },
      instanceId: 'i-1',
    })),
    instances: [{ id: 'i-1', typeName: 'c7i.4xlarge', state: 'running', taskIds: ['ta', 'tb', 'tc'] }],
  };
}

const at = (value: number, ...ids: string[]): ThroughputObservation[] =>
  ids.map((id) => ({ taskId: `t${id}`, normalizedThroughput: value }));

describe('Eva learns co-location only from instances whose running tasks are all observed', () => {
  it('records nothing where a running neighbour has no value, and leaves the prior of unseen pairs', () => {
    const eva = new EvaScheduler(catalog);
    const prior = eva.table.defaultRate;
    // b runs (its workload never seen alone, so no value): a and c slowed by b and each other are not "a next to c".
    eva.observe(sharing({}), at(0.8, 'a', 'c'));
    expect(eva.table.recorded('a', ['c'])).toBeUndefined();
    expect(eva.table.recorded('c', ['a'])).toBeUndefined();
    expect(eva.table.recorded('a', ['b', 'c'])).toBeUndefined();
    expect(eva.table.defaultRate).toBe(prior);
  });

  it('records an instance whose running tasks all have a value', () => {
    const eva = new EvaScheduler(catalog);
    eva.observe(sharing({}), [...at(0.8, 'a', 'c'), ...at(0.7, 'b')]);
    expect(eva.table.recorded('a', ['b', 'c'])).toBeCloseTo(0.8, 12);
    expect(eva.table.recorded('b', ['a', 'c'])).toBeCloseTo(0.7, 12);
  });

  it('does not wait for a task whose job is not running yet (held for its co-start, or being prepared)', () => {
    const eva = new EvaScheduler(catalog);
    eva.observe(sharing({ b: false }), at(0.8, 'a', 'c'));
    expect(eva.table.recorded('a', ['c'])).toBeCloseTo(0.8, 12);
    expect(eva.table.recorded('c', ['a'])).toBeCloseTo(0.8, 12);
    // The pair seen alone together moves the prior: (0.95 + 0.8 + 0.8) / 3.
    expect(eva.table.defaultRate).toBeCloseTo(0.85, 12);
  });
});
