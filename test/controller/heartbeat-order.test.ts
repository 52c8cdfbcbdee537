import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/controller/clock.js';
import { MemoryStateStore } from '../../src/controller/memory-state-store.js';
import type { TaskRecord } from '../../src/controller/state-store.js';
import type { WorkerTaskControl } from '../../src/controller/worker-task-control.js';
import { heartbeatRequestSchema, type HeartbeatResponse } from '../../src/protocol/worker-protocol.js';
import { CPU_SMALL, jobSpec, rig, workerTaskControlFor } from './controller-fixtures.js';

/**
 * A heartbeat the worker gave up on (its request timed out) may still reach the controller, after the next one: what
 * it reports is older. The worker numbers its heartbeats within its process (`bootId`, `seq`), and the controller
 * ignores the reports of one that is not newer than the last it took from that process; and, numbered or not, it
 * never takes a task's checkpoint older than the one it has.
 */

const OBJECTS = '/tmp/fleetwise-heartbeat-order-objects';
const token = (instanceId: string): string => `worker-token-${instanceId}-0123456789abcdef`;

async function taskRunning() {
  const clock = new ManualClock();
  const store = new MemoryStateStore({ nowSeconds: () => clock.nowSeconds() });
  const workers = workerTaskControlFor(store, clock, { objectStoreLocation: OBJECTS });
  const r = rig({}, { store, clock, tasks: workers, workers });
  const job = r.controller.submit({ ...jobSpec('j', CPU_SMALL), totalIterations: 1000 }, 'research');
  await r.controller.runRound();
  await r.controller.reconcile();
  for (const i of store.listInstances({ states: ['running'] })) store.setWorkerToken(i.id, token(i.id));
  await r.controller.reconcile();
  const task = store.listTasks({ jobId: job.id })[0] as TaskRecord;
  expect(task).toMatchObject({ state: 'running', instanceId: expect.any(String) });
  const checkpointKey = (seq: number): string =>
    `checkpoints/${job.id}/${task.id}/${String(seq).padStart(8, '0')}/manifest.json`;
  /**
   * A heartbeat reporting the task at `done` iterations with checkpoint `seq`, written at `writtenAt` by the worker
   * host's clock (by default 1000 + 10·seq).
   */
  const beat = (
    order: { bootId?: string; seq?: number },
    done: number,
    seq: number,
    control: WorkerTaskControl = workers,
    writtenAt = 1000 + 10 * seq,
  ): HeartbeatResponse =>
    control.heartbeat(
      token(task.instanceId as string),
      heartbeatRequestSchema.parse({
        ...order,
        tasks: [
          {
            taskId: task.id,
            attempt: 1,
            state: 'running',
            completedIterations: done,
            checkpoint: { key: checkpointKey(seq), atSeconds: writtenAt },
          },
        ],
      }),
    );
  const progress = (control: WorkerTaskControl = workers): number | undefined => {
    control.flushProgress();
    return store.getJob(job.id)?.completedIterations;
  };
  const checkpoint = (): string | undefined => store.getTask(task.id)?.lastCheckpointKey;
  return { clock, store, workers, task, beat, progress, checkpoint, checkpointKey };
}

describe('heartbeats arriving out of order', () => {
  it('a late heartbeat of the same worker process moves neither progress nor the checkpoint back, and is answered', async () => {
    const { task, beat, progress, checkpoint, checkpointKey } = await taskRunning();
    beat({ bootId: 'boot-a', seq: 1 }, 10, 1);
    beat({ bootId: 'boot-a', seq: 3 }, 30, 3);
    expect([progress(), checkpoint()]).toEqual([30, checkpointKey(3)]);
    // Heartbeat 2 timed out at the worker and reaches the controller only now; a copy of 3 comes again.
    const answer = beat({ bootId: 'boot-a', seq: 2 }, 20, 2);
    beat({ bootId: 'boot-a', seq: 3 }, 25, 2);
    expect([progress(), checkpoint()]).toEqual([30, checkpointKey(3)]);
    // Answered as any heartbeat: the task is still wanted there.
    expect(answer.tasks.map((d) => [d.taskId, d.action])).toEqual([[task.id, 'run']]);
    beat({ bootId: 'boot-a', seq: 4 }, 40, 4);
    expect([progress(), checkpoint()]).toEqual([40, checkpointKey(4)]);
  });

  it('an older checkpoint is never taken; a restarted worker (new boot id) starts again at 1, as after a controller restart', async () => {
    const { clock, store, beat, progress, checkpoint, checkpointKey } = await taskRunning();
    // An older worker numbers nothing: its reports are taken as they come, but not a checkpoint older than the last.
    beat({}, 30, 3);
    beat({}, 20, 2);
    expect([progress(), checkpoint()]).toEqual([20, checkpointKey(3)]);
    beat({ bootId: 'boot-a', seq: 7 }, 40, 4);
    expect([progress(), checkpoint()]).toEqual([40, checkpointKey(4)]);
    // The worker restarted: its first heartbeat is taken, progress going back included (it resumed from checkpoint 4).
    beat({ bootId: 'boot-b', seq: 1 }, 35, 5);
    expect([progress(), checkpoint()]).toEqual([35, checkpointKey(5)]);
    // The earlier process's late heartbeat is older than anything the new one says.
    beat({ bootId: 'boot-a', seq: 8 }, 45, 4);
    expect([progress(), checkpoint()]).toEqual([35, checkpointKey(5)]);
    // A controller started since knows no order yet: the worker's next heartbeat is taken, whatever its number.
    const again = workerTaskControlFor(store, clock, { objectStoreLocation: OBJECTS });
    beat({ bootId: 'boot-b', seq: 1 }, 36, 6, again);
    expect([progress(again), checkpoint()]).toEqual([36, checkpointKey(6)]);
  });

  it('checkpoint numbers, not the clocks of the hosts that wrote them, tell a newer checkpoint from an older one', async () => {
    const { workers, beat, checkpoint, checkpointKey } = await taskRunning();
    beat({ bootId: 'boot-a', seq: 1 }, 40, 4);
    expect(checkpoint()).toBe(checkpointKey(4));
    // The task resumed from checkpoint 4 under a worker whose host clock runs ten minutes behind the first one's.
    beat({ bootId: 'boot-b', seq: 1 }, 45, 5, workers, 1040 - 600);
    expect(checkpoint()).toBe(checkpointKey(5));
    // And an older number stays refused, however late its host's clock says it was written.
    beat({ bootId: 'boot-c', seq: 1 }, 30, 3, workers, 99_999);
    expect(checkpoint()).toBe(checkpointKey(5));
  });

  it('a heartbeat numbered without its boot id, or the other way round, is refused naming the missing field', () => {
    const missing = (body: unknown): string[] => {
      const parsed = heartbeatRequestSchema.safeParse(body);
      return parsed.success ? [] : parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
    };
    expect(missing({ tasks: [], seq: 3 })).toEqual(['bootId: required with seq']);
    expect(missing({ tasks: [], bootId: 'boot-a' })).toEqual(['seq: required with bootId']);
    expect(missing({ tasks: [], bootId: 'boot a', seq: 0 })).toHaveLength(2);
    expect(missing({ tasks: [], bootId: 'boot-a', seq: 1 })).toEqual([]);
  });
});
