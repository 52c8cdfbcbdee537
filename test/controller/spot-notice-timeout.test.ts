import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/controller/clock.js';
import { MemoryStateStore } from '../../src/controller/memory-state-store.js';
import type { JobSpec } from '../../src/controller/job-spec/spec.js';
import type { TaskReport } from '../../src/protocol/worker-protocol.js';
import { CPU_SMALL, jobSpec, rig, workerTaskControlFor } from './controller-fixtures.js';

/**
 * A checkpoint-stop on an instance with a spot interruption notice the controller learned of (here from the
 * interruption queue, the worker never having seen it) gets no more than the time left before EC2 acts, less the
 * margin the worker keeps for its last heartbeat: a job's 300 s timeout would run past the reclaim.
 */

const token = (instanceId: string): string => `worker-token-${instanceId}-0123456789abcdef`;

async function running(spec: JobSpec) {
  const clock = new ManualClock();
  const store = new MemoryStateStore({ nowSeconds: () => clock.nowSeconds() });
  const workers = workerTaskControlFor(store, clock, {
    objectStoreLocation: '/tmp/fleetwise-notice-objects',
  });
  const r = rig({}, { store, clock, tasks: workers, workers });
  const job = r.controller.submit(spec, 'research');
  await r.controller.runRound();
  await r.controller.reconcile();
  for (const i of store.listInstances({ states: ['running'] })) store.setWorkerToken(i.id, token(i.id));
  await r.controller.reconcile();
  const task = store.listTasks({ jobId: job.id })[0];
  const inst = task?.instanceId === undefined ? undefined : store.getInstance(task.instanceId);
  if (task === undefined || inst?.cloudId === undefined) throw new Error('the task was not placed');
  const report: TaskReport = { taskId: task.id, state: 'running', attempt: 1 };
  const stopTimeout = (): number | undefined => {
    const answer = workers.heartbeat(token(inst.id), { tasks: [report] });
    const desired = answer.tasks.find((t) => t.taskId === task.id);
    return desired?.action === 'checkpoint-stop' ? desired.checkpoint.timeoutSeconds : undefined;
  };
  stopTimeout();
  return { r, clock, store, inst, cloudId: inst.cloudId, stopTimeout };
}

const slowCheckpoint = (): JobSpec => {
  const spec = jobSpec('slow-checkpoint', CPU_SMALL);
  return { ...spec, checkpoint: { ...spec.checkpoint, timeoutSeconds: 300 } };
};

describe('a checkpoint-stop under a spot interruption notice', () => {
  it('is capped at the time left before EC2 acts less the margin, and at least a second', async () => {
    const { r, clock, cloudId, stopTimeout } = await running(slowCheckpoint());
    // EC2 acts two minutes from now.
    const at = new Date((clock.nowSeconds() + 120) * 1000).toISOString();
    expect(r.controller.interruptionFromQueue(cloudId, { kind: 'spot-interruption', time: at })).toBe(true);
    await r.controller.runRound();
    await r.controller.reconcile();
    expect(stopTimeout()).toBe(110);
    clock.advance(60);
    expect(stopTimeout()).toBe(50);
    clock.advance(100);
    expect(stopTimeout()).toBe(1);
  });

  it('counts a notice whose time cannot be read (a record from before times were checked) as two minutes from when it came', async () => {
    const { r, clock, cloudId, stopTimeout } = await running(slowCheckpoint());
    expect(r.controller.interruptionFromQueue(cloudId, { kind: 'spot-interruption', time: 'soon' })).toBe(
      true,
    );
    await r.controller.runRound();
    await r.controller.reconcile();
    expect(stopTimeout()).toBe(110);
    clock.advance(60);
    expect(stopTimeout()).toBe(50);
  });

  it("keeps the job's timeout without a notice, or under a notice that leaves more", async () => {
    const drained = await running(slowCheckpoint());
    drained.r.controller.drain(drained.inst.id);
    await drained.r.controller.runRound();
    await drained.r.controller.reconcile();
    // A drain waits for the new instance's worker before stopping (make before break): register it.
    for (const i of drained.store.listInstances({ states: ['running'] }))
      if (i.id !== drained.inst.id) drained.store.setWorkerToken(i.id, token(i.id));
    await drained.r.controller.reconcile();
    expect(drained.stopTimeout()).toBe(300);

    const quick = await running(jobSpec('quick-checkpoint', CPU_SMALL));
    const at = new Date((quick.clock.nowSeconds() + 120) * 1000).toISOString();
    quick.r.controller.interruptionFromQueue(quick.cloudId, { kind: 'spot-interruption', time: at });
    await quick.r.controller.runRound();
    await quick.r.controller.reconcile();
    expect(quick.stopTimeout()).toBe(60);
  });
});
