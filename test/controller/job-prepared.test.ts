import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/controller/clock.js';
import { MemoryStateStore } from '../../src/controller/memory-state-store.js';
import { controllerWorld } from '../../src/controller/eta-world.js';
import { buildSnapshot, JOB_PREPARED_EVENT, readSnapshotInputs } from '../../src/controller/snapshot.js';
import type { JobSpec } from '../../src/controller/job-spec/spec.js';
import type { TaskRecord } from '../../src/controller/state-store.js';
import { catalog, CPU_SMALL, jobSpec, rig, workerTaskControlFor } from './controller-fixtures.js';

/**
 * A job is prepared when its worker reports its tasks running, not while it reports them still being prepared
 * (`starting`: the image pulled or built, the checkpoint downloaded): until then the round pins it where it is, as the
 * simulator's engine pins a job until every task has been prepared.
 */
/**
 * One job of `spec` started on a fresh instance whose worker (its token set) has not reported yet: what its worker then
 * reports of its task (`report`), and the store and clock.
 */
async function startedJob(spec: JobSpec) {
  const clock = new ManualClock();
  const store = new MemoryStateStore({ nowSeconds: () => clock.nowSeconds() });
  const workers = workerTaskControlFor(store, clock, {
    objectStoreLocation: '/tmp/fleetwise-prepared-objects',
  });
  const r = rig({}, { store, clock, tasks: workers, workers });
  const job = r.controller.submit(spec, 'research');
  await r.controller.runRound();
  await r.controller.reconcile();
  const token = 'worker-token-prepared-0123456789abcdef';
  for (const i of store.listInstances({ states: ['running'] })) store.setWorkerToken(i.id, token);
  await r.controller.reconcile();
  const [task] = store.listTasks({ jobId: job.id });
  expect(task?.state).toBe('running');
  const report = (state: 'starting' | 'running') =>
    workers.heartbeat(token, { tasks: [{ taskId: task?.id as string, state, attempt: 1 }] });
  return { clock, store, r, job, task: task as TaskRecord, report };
}

describe('a job whose worker still prepares its task', () => {
  it('is prepared only once the worker reports the task running', async () => {
    const { clock, store, r, job, report } = await startedJob(jobSpec('one', CPU_SMALL));
    const prepared = () => store.listEvents({ jobId: job.id, kind: JOB_PREPARED_EVENT });
    const reconfigurable = () =>
      buildSnapshot(readSnapshotInputs(store, clock.nowSeconds())).jobs.find((j) => j.id === job.id)
        ?.reconfigurable;

    report('starting');
    clock.advance(30);
    await r.controller.reconcile();
    expect(prepared()).toEqual([]);
    expect(reconfigurable()).toBe(false);

    report('running');
    clock.advance(5);
    await r.controller.reconcile();
    expect(prepared()).toHaveLength(1);
    expect(reconfigurable()).toBe(true);
  });

  it('is still being started in the predictions’ world until then, and makes progress from then on', async () => {
    const { clock, store, r, job, task, report } = await startedJob({
      ...jobSpec('one', CPU_SMALL, { expectedDurationSeconds: 3600 }),
      checkpoint: { signal: 'SIGTERM', timeoutSeconds: 60, restoreDelaySeconds: 30, initDelaySeconds: 20 },
    });
    const startedAt = task.updatedAtSeconds;
    const worldJob = () =>
      controllerWorld(readSnapshotInputs(store, clock.nowSeconds()), {
        catalog,
        firstRoundSeconds: clock.nowSeconds(),
      }).world.jobs.find((j) => j.spec.id === job.id);

    // Ten minutes of pulling its image: no progress, its start still ahead (after the checkpoint fetch).
    report('starting');
    clock.advance(600);
    await r.controller.reconcile();
    expect(worldJob()).toMatchObject({ status: 'migrating', active: false, completedIterations: 0 });
    expect(worldJob()?.tasks[0]).toMatchObject({ state: 'launching' });

    report('running');
    await r.controller.reconcile();
    const preparedAt = clock.nowSeconds();
    expect(preparedAt).toBeGreaterThan(startedAt + 600 - 1);
    clock.advance(100);
    // Working for 100 s since it was prepared, 20 of them initializing: 80 s of its 3600 done.
    expect(worldJob()).toMatchObject({
      status: 'executing',
      active: true,
      activeSinceSeconds: preparedAt + 20,
    });
    expect(worldJob()?.completedIterations).toBeCloseTo(80, 6);
  });
});
