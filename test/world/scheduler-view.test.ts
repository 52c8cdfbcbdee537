import { describe, expect, it } from 'vitest';
import { Admission } from '../../src/queue/admission.js';
import { EvaScheduler } from '../../src/scheduler/eva.js';
import { CommandIssuer } from '../../src/world/commands.js';
import type { SimJob } from '../../src/world/entities.js';
import { buildSnapshot } from '../../src/world/scheduler-view.js';
import { buildSimJobs } from '../../src/world/trace-jobs.js';
import { WorldState } from '../../src/world/world-state.js';
import { testCatalog, trace, traceJob, traceTask } from '../sim/sim-fixtures.js';

describe('the engine’s scheduler view', () => {
  it('keeps the room a starting job holds on a healthy instance when another of its instances is going away', () => {
    // B: 2 tasks, each a whole small.x; C: 1 task as big, queued.
    const catalog = testCatalog();
    const state = new WorldState(
      buildSimJobs(
        trace(
          traceJob('B', { tasks: [traceTask('node0'), traceTask('node1')] }),
          traceJob('C', { arrivalSeconds: 0 }),
        ),
        catalog,
      ),
      () => undefined,
    );
    for (const job of state.jobs) state.enqueue(job as SimJob);
    const commands = new CommandIssuer(state, catalog, new Admission(catalog, { caps: {} }), true);
    const start = (taskId: string, instanceId: string) =>
      ({
        kind: 'start-task',
        jobId: 'B',
        taskId,
        instanceId,
        instanceIsNew: true,
        afterStopOf: [],
        capacityFrom: [],
      }) as const;
    commands.apply([
      { kind: 'launch-instance', instanceId: 'p1', typeName: 'small.x' },
      { kind: 'launch-instance', instanceId: 'p2', typeName: 'small.x' },
      start('B/node0', 'p1'),
      start('B/node1', 'p2'),
    ]);
    // A spot notice drains i-2 while B is still starting (pinned).
    const i2 = state.instances.get('i-2');
    if (i2 === undefined) throw new Error('no i-2');
    commands.requestTermination(i2);

    const snapshot = buildSnapshot(state.now, state.liveJobs.values(), state.assignable.values());
    expect(snapshot.jobs.find((j) => j.id === 'B')).toMatchObject({
      taskIds: ['B/node0'],
      reconfigurable: false,
    });
    expect(snapshot.tasks.filter((t) => t.jobId === 'B')).toMatchObject([
      { id: 'B/node0', instanceId: 'i-1' },
    ]);
    expect(snapshot.instances.map((i) => [i.id, i.taskIds])).toEqual([['i-1', ['B/node0']]]);

    // So Eva plans C elsewhere, not into B's room on i-1.
    const plan = new EvaScheduler(catalog).plan(snapshot);
    expect(plan.configuration.instances.find((i) => i.id === 'i-1')?.taskIds).toEqual(['B/node0']);
    expect(plan.configuration.instances.some((i) => i.taskIds.includes('C/node0'))).toBe(true);
  });
});
