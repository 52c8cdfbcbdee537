import { describe, expect, it } from 'vitest';
import { loadCatalogFile } from '../../src/cloud/catalog-file.js';
import type { ClusterSnapshot } from '../../src/core/model.js';
import { Admission } from '../../src/queue/admission.js';
import { runRound } from '../../src/round/round.js';
import { diffConfiguration, InvalidPlanError } from '../../src/scheduler/actions.js';
import { createScheduler, NO_INTERFERENCE, SCHEDULER_NAMES } from '../../src/scheduler/registry.js';

/**
 * A pinned job (being launched or moved) with a task committed nowhere: a gang job going back to the queue whose
 * first task stopped while its sibling still checkpoints. No plan can keep that task where it is, and a pinned job is
 * never started, so the diff sets a placement of it aside instead of refusing the round, which would place no job.
 */

const catalog = loadCatalogFile();

/** Job a: a/0 still on i-0 (checkpointing), a/1 stopped; job b waits to be placed. */
const snapshot: ClusterSnapshot = {
  nowSeconds: 600,
  jobs: [
    {
      id: 'a',
      taskIds: ['a/0', 'a/1'],
      reconfigurable: false,
      arrivalSeconds: 0,
      migrationDelaySeconds: 60,
      expectedRemainingSeconds: 3600,
    },
    {
      id: 'b',
      taskIds: ['b/0'],
      reconfigurable: true,
      arrivalSeconds: 10,
      migrationDelaySeconds: 60,
      expectedRemainingSeconds: 3600,
    },
  ],
  tasks: [
    { id: 'a/0', jobId: 'a', key: 'a', demand: { any: [0, 2, 4] }, instanceId: 'i-0' },
    { id: 'a/1', jobId: 'a', key: 'a', demand: { any: [0, 2, 4] } },
    { id: 'b/0', jobId: 'b', key: 'b', demand: { any: [0, 2, 4] } },
  ],
  instances: [{ id: 'i-0', typeName: 'c7i.xlarge', state: 'running', taskIds: ['a/0'] }],
};

describe('a pinned job with a task committed nowhere', () => {
  it('the diff sets aside a placement of that task: no start, no room counted, the others carried out', () => {
    // a/1 on the new c7i.large beside b/0 would not fit (2 vCPUs): counted, that would be a capacity problem.
    const diff = diffConfiguration(
      snapshot,
      {
        instances: [
          { id: 'i-0', typeName: 'c7i.xlarge', isNew: false, taskIds: ['a/0'] },
          { id: 'new-1', typeName: 'c7i.large', isNew: true, taskIds: ['a/1', 'b/0'] },
        ],
      },
      catalog,
    );
    expect(diff.actions.map((a) => `${a.kind} ${'taskId' in a ? a.taskId : a.instanceId}`)).toEqual([
      'launch-instance new-1',
      'start-task b/0',
    ]);
    expect(diff.startedJobIds).toEqual(['b']);
  });

  it('a pinned task that is placed somewhere still may not move', () => {
    const plan = {
      instances: [{ id: 'new-1', typeName: 'c7i.xlarge', isNew: true, taskIds: ['a/0', 'b/0'] }],
    };
    expect(() => diffConfiguration(snapshot, plan, catalog)).toThrow(InvalidPlanError);
    expect(() => diffConfiguration(snapshot, plan, catalog)).toThrow(/job a is being launched or migrated/);
  });

  it('every scheduler: the round goes on, places b, and leaves a where it is', () => {
    for (const name of SCHEDULER_NAMES) {
      const scheduler = createScheduler(name, { catalog, interferenceProfile: NO_INTERFERENCE });
      const out = runRound({
        snapshot,
        jobInfo: () => ({}),
        admission: new Admission(catalog, { caps: {} }),
        scheduler,
        observations: [],
        catalog,
        carriedOut: true,
      });
      const actions = out.planned?.diff.actions ?? [];
      expect(
        actions.filter((a) => 'jobId' in a && a.jobId === 'a'),
        name,
      ).toEqual([]);
      expect(out.planned?.diff.startedJobIds, name).toEqual(['b']);
      // i-0 stays for a/0, whatever the plan lists.
      expect(
        actions.filter((a) => a.kind === 'terminate-instance' && a.instanceId === 'i-0'),
        name,
      ).toEqual([]);
    }
  });
});
