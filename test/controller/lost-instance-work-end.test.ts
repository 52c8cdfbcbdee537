import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/controller/clock.js';
import { JOB_RAN_UNTIL_EVENT } from '../../src/controller/job-transitions.js';
import { CloudOnlyTaskControl, silentLogger } from '../../src/controller/seams.js';
import { SqliteStateStore } from '../../src/controller/state/sqlite-state-store.js';
import { recordStoppedWithController } from '../../src/controller/stopped-with-controller.js';
import {
  replaceSilentWorkers,
  WORKER_LOST_EVENT,
  type WorkerFleet,
} from '../../src/controller/worker-liveness.js';
import { readSqliteStateHistory } from '../../src/sim/controller-runtime/read-state-history.js';
import { historyEvents, runningSeconds } from '../../src/sim/controller-runtime/state-history.js';
import { CPU_SMALL, handPlan, jobSpec, reconcilerFor, rig } from './controller-fixtures.js';

/**
 * A job's work on an instance lost unseen (terminated with the controller's stop, ended by EC2 while the controller was
 * down, its worker gone silent) ended before its return to the queue is written: the controller records when, and
 * `export-trace` ends the job's running stretch there.
 */
const tmp = mkdtempSync(join(tmpdir(), 'fleetwise-lost-work-'));
const stores: SqliteStateStore[] = [];
afterAll(() => {
  for (const store of stores) store.close();
  rmSync(tmp, { recursive: true, force: true });
});

/** One job running on one c7i.xlarge, in a SQLite state (the file `export-trace` reads) under a manual clock. */
async function oneJobRunning(name: string) {
  const clock = new ManualClock();
  const path = join(tmp, `${name}.db`);
  const store = new SqliteStateStore(path, { nowSeconds: () => clock.nowSeconds() });
  stores.push(store);
  const r = rig({}, { clock, store });
  const job = r.controller.submit(jobSpec('work', CPU_SMALL), 'research');
  const control = new CloudOnlyTaskControl();
  const reconciler = reconcilerFor(r, control);
  const { plan, diff } = handPlan(r, {
    instances: [{ id: 'new-1', typeName: 'c7i.xlarge', isNew: true, taskIds: [`${job.id}.0`] }],
  });
  reconciler.applyPlan(plan, diff);
  await reconciler.progress();
  expect(r.store.getJob(job.id)?.state).toBe('running');
  const inst = r.store.listInstances()[0];
  const cloud = r.cloud.live()[0];
  if (inst === undefined || cloud === undefined) throw new Error('nothing launched');
  /** What export-trace measures of the job's work, read from the state file as it reads it. */
  const exported = (): number | undefined =>
    runningSeconds(historyEvents(readSqliteStateHistory(path))).get(job.id);
  return { r, job, inst, cloud, control, reconciler, exported, started: clock.nowSeconds() };
}

describe("the end of a lost instance's work", () => {
  it('is when the controller stopped it, not when the restarted controller noticed', async () => {
    const { r, job, inst, cloud, control, exported, started } = await oneJobRunning('stopped');
    r.clock.advance(600);
    // The controller's clean stop terminates its (local) instance and writes down when; it is down for an hour.
    recordStoppedWithController(r.store, [{ cloudId: cloud.id, atSeconds: r.clock.nowSeconds() }]);
    cloud.state = 'terminated';
    r.clock.advance(3600);
    await reconcilerFor(r, control).syncWithCloud();
    expect(r.store.getJob(job.id)?.state).toBe('queued');
    expect(
      r.store.listEvents({ jobId: job.id, kind: JOB_RAN_UNTIL_EVENT }).map((e) => [e.instanceId, e.data]),
    ).toEqual([[inst.id, { ranUntilSeconds: started + 600 }]]);
    expect(exported()).toBe(600);
  });

  it('is when EC2 says the instance ended; unknown, it is when the sync saw it gone', async () => {
    const known = await oneJobRunning('reclaimed');
    known.r.clock.advance(1200);
    known.cloud.state = 'terminated';
    known.cloud.endedAt = new Date(known.r.clock.nowSeconds() * 1000);
    known.r.clock.advance(300);
    await known.reconciler.syncWithCloud();
    expect(known.r.store.getJob(known.job.id)?.state).toBe('queued');
    expect(known.exported()).toBe(1200);

    const unknown = await oneJobRunning('vanished');
    unknown.r.clock.advance(1200);
    unknown.cloud.state = 'terminated';
    unknown.r.clock.advance(300);
    await unknown.reconciler.syncWithCloud();
    expect(unknown.r.store.getJob(unknown.job.id)?.state).toBe('queued');
    expect(unknown.r.store.listEvents({ kind: JOB_RAN_UNTIL_EVENT })).toEqual([]);
    expect(unknown.exported()).toBe(1500);
  });

  it("is its worker's last heartbeat when the worker fell silent", async () => {
    const { r, job, inst, reconciler, exported } = await oneJobRunning('silent');
    r.clock.advance(145);
    // The worker was last heard 45 s ago (on the controller's attention clock): its instance is given up now.
    const workers: WorkerFleet = {
      takeObservations: () => [],
      staleInstances: () => [r.store.getInstance(inst.id) ?? inst],
      markLost: () => {},
      secondsSinceHeartbeat: () => 45,
    };
    replaceSilentWorkers({ workers, store: r.store, log: silentLogger, reconciler });
    expect(r.store.getJob(job.id)?.state).toBe('queued');
    expect(r.store.listEvents({ instanceId: inst.id, kind: WORKER_LOST_EVENT }).map((e) => e.data)).toEqual([
      { silentSeconds: 45 },
    ]);
    expect(exported()).toBe(100);
  });
});
