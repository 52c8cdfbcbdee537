import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/controller/clock.js';
import { MemoryStateStore } from '../../src/controller/memory-state-store.js';
import type { TaskReport } from '../../src/protocol/worker-protocol.js';
import { CPU_SMALL, jobSpec, rig, workerTaskControlFor } from './controller-fixtures.js';

/**
 * A checkpoint a worker reports in its heartbeat: recorded on the task, with one `task.checkpoint` event naming the
 * instance that uploaded it. A long job checkpoints every few minutes for weeks, and those events are most of what a
 * controller's state keeps.
 */

const token = (instanceId: string): string => `worker-token-${instanceId}-0123456789abcdef`;

describe('checkpoints reported in heartbeats', () => {
  it('are recorded once each, with one event naming the reporting instance; a repeated report adds nothing', async () => {
    const clock = new ManualClock();
    const store = new MemoryStateStore({ nowSeconds: () => clock.nowSeconds() });
    const workers = workerTaskControlFor(store, clock, {
      objectStoreLocation: '/tmp/fleetwise-checkpoint-report-objects',
    });
    const r = rig({}, { store, clock, tasks: workers, workers });
    const job = r.controller.submit(jobSpec('solo', CPU_SMALL), 'research');
    await r.controller.runRound();
    await r.controller.reconcile();
    for (const i of store.listInstances({ states: ['running'] })) store.setWorkerToken(i.id, token(i.id));
    await r.controller.reconcile();
    const task = store.listTasks({ jobId: job.id })[0];
    const instanceId = task?.instanceId;
    if (task === undefined || instanceId === undefined) throw new Error('the task was not placed');

    const report = (key: string): TaskReport => ({
      taskId: task.id,
      state: 'running',
      attempt: 1,
      checkpoint: { key, atSeconds: clock.nowSeconds() },
    });
    workers.heartbeat(token(instanceId), { tasks: [report('ckpt/1')] });
    workers.heartbeat(token(instanceId), { tasks: [report('ckpt/1')] });
    clock.advance(60);
    workers.heartbeat(token(instanceId), { tasks: [report('ckpt/2')] });

    expect(store.getTask(task.id)?.lastCheckpointKey).toBe('ckpt/2');
    const events = store.listEvents({ kind: 'task.checkpoint', jobId: job.id });
    expect(events.map((e) => [e.taskId, e.instanceId, (e.data as { key: string }).key])).toEqual([
      [task.id, instanceId, 'ckpt/1'],
      [task.id, instanceId, 'ckpt/2'],
    ]);
  });
});
