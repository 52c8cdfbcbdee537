import { describe, expect, it } from 'vitest';
import { Admission } from '../../src/queue/admission.js';
import type { Action } from '../../src/scheduler/actions.js';
import { CommandIssuer } from '../../src/world/commands.js';
import { handleEffect } from '../../src/world/effects.js';
import type { SimJob } from '../../src/world/entities.js';
import { buildSimJobs } from '../../src/world/trace-jobs.js';
import { WorldState, type SimEvent } from '../../src/world/world-state.js';
import { EventLog, testCatalog, trace, traceJob, traceTask } from '../sim/sim-fixtures.js';

/** A 2-task job B, each task a whole small.x (1 of its 1 GPU), started with co-start. */
function world() {
  const catalog = testCatalog();
  const log = new EventLog();
  const state = new WorldState(
    buildSimJobs(trace(traceJob('B', { tasks: [traceTask('node0'), traceTask('node1')] })), catalog),
    log.record,
  );
  const job = state.jobs[0] as SimJob;
  state.enqueue(job);
  const commands = new CommandIssuer(state, catalog, new Admission(catalog, { caps: {} }), true);
  const starts = (n0: string, n1: string): Action[] => [
    {
      kind: 'start-task',
      jobId: 'B',
      taskId: 'B/node0',
      instanceId: n0,
      instanceIsNew: true,
      afterStopOf: [],
      capacityFrom: [],
    },
    {
      kind: 'start-task',
      jobId: 'B',
      taskId: 'B/node1',
      instanceId: n1,
      instanceIsNew: true,
      afterStopOf: [],
      capacityFrom: [],
    },
  ];
  /** The world's effects until nothing is left to happen, the gated commands issued after each second. */
  const runEffects = (): void => {
    for (let t = state.queue.peekTime(); t !== undefined; t = state.queue.peekTime()) {
      state.advanceTo(t);
      while (state.queue.peekTime() === t) {
        const e = state.queue.pop() as SimEvent;
        if (e.kind === 'co-start-wake') continue;
        handleEffect(state, e as Parameters<typeof handleEffect>[1]);
      }
      commands.issueGated();
    }
  };
  return { state, job, commands, starts, runEffects, log };
}

describe('the engine’s commands', () => {
  it('keeps one pending start per task when a called-off start is planned again before the gates are issued', () => {
    const { state, job, commands, starts, runEffects, log } = world();
    commands.apply([
      { kind: 'launch-instance', instanceId: 'p1', typeName: 'small.x' },
      { kind: 'launch-instance', instanceId: 'p2', typeName: 'small.x' },
      ...starts('p1', 'p2'),
    ]);
    // A spot notice drains i-2 and calls B's start off; the round it asks for, in the same second, plans B again on
    // the same instance and a new one, before the gated commands are next issued.
    const i2 = state.instances.get('i-2');
    expect(i2).toBeDefined();
    expect(commands.callOffStart(job, i2 as NonNullable<typeof i2>)).toBe(true);
    commands.requestTermination(i2 as NonNullable<typeof i2>);
    commands.apply([
      { kind: 'launch-instance', instanceId: 'p3', typeName: 'small.x' },
      ...starts('i-1', 'p3'),
    ]);
    expect(state.pendingStarts.map((t) => t.id).sort()).toEqual(['B/node0', 'B/node1']);
    commands.issueGated();
    runEffects();
    // Both tasks start once their instances are ready (each fills its small.x: counted twice, a task never fits).
    expect(log.times('start-issued', { taskId: 'B/node0' })).toHaveLength(1);
    expect(log.times('start-issued', { taskId: 'B/node1' })).toHaveLength(1);
    expect(job.tasks.map((t) => t.occupying?.id)).toEqual(['i-1', 'i-3']);
    expect(state.pendingStarts).toEqual([]);
  });
});
