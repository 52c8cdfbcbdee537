import { describe, expect, it } from 'vitest';
import { AttentionClock } from '../../src/controller/attention-clock.js';
import { ManualClock } from '../../src/controller/clock.js';
import { MemoryStateStore } from '../../src/controller/memory-state-store.js';
import { RECONNECT_GRACE_TIMEOUTS } from '../../src/controller/worker-silence.js';
import type { WorkerTaskControl } from '../../src/controller/worker-task-control.js';
import { workerTaskControlFor } from './controller-fixtures.js';

/**
 * When a registered worker counts as silent. A restarted controller first recovers (and, on a loaded host or with a
 * large state, that takes a while) and only then serves the worker protocol: silence before that is the controller's,
 * not the workers'. Counted from construction, a slow start declared every healthy worker lost at the first pass and
 * replaced all their instances at once.
 */
const WORKER_TOKEN = 'instance-token-0123456789abcdef';

/** One running instance with a registered worker, and the worker control watching it (10 s heartbeat timeout). */
function rig(
  clock: ManualClock,
  attention?: AttentionClock,
): { inst: { id: string }; workers: WorkerTaskControl } {
  const store = new MemoryStateStore({ nowSeconds: () => clock.nowSeconds() });
  const inst = store.createInstance({ typeName: 'c7i.xlarge' });
  store.setInstanceState(inst.id, 'launching', { cloudId: 'local-a' });
  store.setInstanceState(inst.id, 'running');
  store.setWorkerToken(inst.id, WORKER_TOKEN);
  const workers = workerTaskControlFor(store, clock, {
    ...(attention === undefined ? {} : { attention }),
    objectStoreLocation: '/tmp/fleetwise-liveness-objects',
    heartbeatTimeoutSeconds: 10,
  });
  return { inst, workers };
}

describe('worker liveness', () => {
  it("counts a worker's silence from when the protocol is served, with twice the timeout to reconnect", () => {
    const clock = new ManualClock();
    const { inst, workers } = rig(clock);

    // A minute of recovery: nobody could heartbeat, nobody is silent.
    clock.advance(60);
    expect(workers.staleInstances()).toEqual([]);
    workers.serving();
    // Every worker reconnects at once after a restart: one not heard yet has RECONNECT_GRACE_TIMEOUTS timeouts.
    clock.advance(11);
    expect(workers.staleInstances()).toEqual([]);
    clock.advance(RECONNECT_GRACE_TIMEOUTS * 10 - 11 + 1);
    expect(workers.staleInstances().map((i) => i.id)).toEqual([inst.id]);
    // Serving again (a second call) does not restart the count.
    workers.serving();
    expect(workers.staleInstances().map((i) => i.id)).toEqual([inst.id]);
  });

  it('once a worker was heard, its silence counts from its last heartbeat, against one timeout', () => {
    const clock = new ManualClock();
    const { inst, workers } = rig(clock);
    workers.serving();
    clock.advance(5);
    workers.heartbeat(WORKER_TOKEN, { tasks: [] });
    clock.advance(9);
    expect(workers.staleInstances()).toEqual([]);
    clock.advance(2);
    expect(workers.staleInstances().map((i) => i.id)).toEqual([inst.id]);
  });

  it("does not count a stall of the controller's own loop as its workers' silence", () => {
    const clock = new ManualClock();
    let wallMs = 0;
    const attention = new AttentionClock(200, () => wallMs);
    const { inst, workers } = rig(clock, attention);
    workers.serving();
    workers.heartbeat(WORKER_TOKEN, { tasks: [] });
    // The loop is held up for 30 s (nothing samples the clock): the worker's beats wait unread in the socket.
    wallMs += 30_000;
    expect(workers.staleInstances()).toEqual([]);
    // The loop runs again, ticking; the worker stays silent: after its timeout of attention it is lost.
    for (let i = 0; i < 45; i++) {
      wallMs += 200;
      attention.sample();
    }
    expect(workers.staleInstances()).toEqual([]);
    for (let i = 0; i < 10; i++) {
      wallMs += 200;
      attention.sample();
    }
    expect(workers.staleInstances().map((i) => i.id)).toEqual([inst.id]);
  });
});
