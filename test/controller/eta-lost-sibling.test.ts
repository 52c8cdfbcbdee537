import { describe, expect, it } from 'vitest';
import { controllerWorld } from '../../src/controller/eta-world.js';
import { readQueueRecord } from '../../src/controller/queue-records.js';
import type { TaskControl, TaskStatus } from '../../src/controller/seams.js';
import { readSnapshotInputs } from '../../src/controller/snapshot.js';
import { catalog, CPU_SMALL, jobSpec, rig } from './controller-fixtures.js';

/** Tasks run until told otherwise and report no progress. */
class RunsOn implements TaskControl {
  readonly name = 'runs-on';
  async start(): Promise<void> {}
  async stop(): Promise<'stopped'> {
    return 'stopped';
  }
  async status(): Promise<TaskStatus> {
    return 'running';
  }
}

const DURATION = 600;

/**
 * A multi-task job that lost one task's instance is back in the queue while its other task still runs: the next round
 * checkpoints that task and places the job anew. Its prediction (the controller's state as a simulator world,
 * eta-world.ts, run forward by the simulator) must see that stop coming: a world waiting for a stop no round will
 * issue never ends the job, and its ETA reads "beyond" the horizon.
 */
describe('the ETA of a multi-task job that lost one of its instances', () => {
  it('sees its surviving task stopped and the job placed anew, and predicts its end within the day', async () => {
    const { controller, store, clock, cloud } = rig({}, { tasks: new RunsOn() });
    const job = controller.submit(
      jobSpec('gang', CPU_SMALL, { replicas: 2, expectedDurationSeconds: DURATION }),
      'research',
    );
    await controller.runRound('submitted');
    await controller.reconcile();
    expect(store.getJob(job.id)?.state).toBe('running');
    const [lostTask, survivor] = store.listTasks({ jobId: job.id });
    expect(lostTask?.instanceId).not.toBe(survivor?.instanceId);
    clock.advance(60);

    // Its instance terminated behind the controller's back: found gone, the job goes back to the queue.
    const lost = store.getInstance(lostTask?.instanceId as string);
    await cloud.terminate([lost?.cloudId as string]);
    await controller.recover();
    expect(store.getJob(job.id)?.state).toBe('queued');
    expect(store.listTasks({ jobId: job.id }).map((t) => t.state)).toEqual(['pending', 'running']);

    // As the next round's prediction sees it: the survivor is to stop (nothing restarts it where it runs yet) and the
    // job goes back to the queue once it has.
    const now = clock.nowSeconds();
    const world = controllerWorld(readSnapshotInputs(store, now), { catalog, firstRoundSeconds: now });
    const inWorld = world.world.jobs.find((j) => j.spec.id === job.id);
    expect(inWorld?.requeueAfterStop).toBe(true);
    expect(inWorld?.tasks[1]).toMatchObject({
      state: 'running',
      occupyingInstanceId: survivor?.instanceId,
      pendingStop: true,
    });
    expect(inWorld?.tasks[1]?.committedInstanceId).toBeUndefined();

    // The controller's own prediction, made at that round: an end, within a day.
    await controller.runRound('period');
    await controller.predictionsSettled();
    const eta = readQueueRecord(store, job.id)?.eta;
    expect(eta?.basis).not.toMatch(/^beyond/);
    expect(eta?.completionSeconds).toEqual(expect.any(Number));
    expect(eta?.completionSeconds as number).toBeGreaterThan(now);
    expect(eta?.completionSeconds as number).toBeLessThan(now + 86_400);
  });
});
