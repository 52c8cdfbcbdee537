import { describe, expect, it } from 'vitest';
import { startApiServer } from '../../src/controller/api/server.js';
import { ManualClock } from '../../src/controller/clock.js';
import { MemoryStateStore } from '../../src/controller/memory-state-store.js';
import { launchIntentKey } from '../../src/controller/state-store.js';
import { JOB_PREPARED_EVENT } from '../../src/controller/snapshot.js';
import { runningTaskCheckpoints, workAtRisk } from '../../src/controller/work-at-risk.js';
import { catalog, CPU_SMALL, jobSpec, rig } from './controller-fixtures.js';

const ADMIN = 'risk-admin-token-0123456789abcdef';

describe('work at risk', () => {
  it('is the time since each running task’s newest checkpoint, or since its run began when that is later', () => {
    // By hand at t = 1000: a spot task checkpointed at 900 (100 s at risk); a spot task restored from a checkpoint
    // of 600 and running again since 700 (300 s: the restore put it back at the checkpoint); an on-demand task that
    // never checkpointed, running since 950 (50 s).
    const figures = workAtRisk(1000, [
      { market: 'spot', runningSinceSeconds: 400, lastCheckpointAtSeconds: 900 },
      { market: 'spot', runningSinceSeconds: 700, lastCheckpointAtSeconds: 600 },
      { market: 'on-demand', runningSinceSeconds: 950 },
    ]);
    expect(figures).toEqual([
      { market: 'on-demand', runningTasks: 1, totalSeconds: 50, maxSeconds: 50 },
      { market: 'spot', runningTasks: 2, totalSeconds: 400, maxSeconds: 300 },
    ]);
    expect(workAtRisk(1000, [])).toEqual([
      { market: 'on-demand', runningTasks: 0, totalSeconds: 0, maxSeconds: 0 },
      { market: 'spot', runningTasks: 0, totalSeconds: 0, maxSeconds: 0 },
    ]);
  });

  it('counts only running tasks of running jobs, each on its instance’s market (a job neither running nor moving, none)', () => {
    const tasks = runningTaskCheckpoints({
      tasks: [
        { jobId: 'job-1', state: 'running', instanceId: 'inst-1', lastCheckpointAtSeconds: 50 },
        { jobId: 'job-1', state: 'running', instanceId: 'inst-2' },
        { jobId: 'job-2', state: 'starting', instanceId: 'inst-2' },
        { jobId: 'job-3', state: 'running', instanceId: 'inst-3' },
      ],
      runningSince: new Map([
        ['job-1', 10],
        ['job-2', 20],
      ]),
      spotInstances: new Set(['inst-2']),
    });
    expect(tasks).toEqual([
      { market: 'on-demand', runningSinceSeconds: 10, lastCheckpointAtSeconds: 50 },
      { market: 'spot', runningSinceSeconds: 10, lastCheckpointAtSeconds: undefined },
    ]);
  });

  it('counts a running job’s tasks from when they were all prepared, none while one is being prepared', () => {
    const tasks = runningTaskCheckpoints({
      tasks: [
        { jobId: 'job-1', state: 'running', instanceId: 'inst-1' },
        { jobId: 'job-2', state: 'running', instanceId: 'inst-2', lastCheckpointAtSeconds: 5 },
      ],
      runningSince: new Map([
        ['job-1', 10],
        ['job-2', 20],
      ]),
      // job-1's image is still being fetched; job-2 was prepared at 80.
      preparedSince: new Map([['job-2', 80]]),
    });
    expect(tasks).toEqual([{ market: 'on-demand', runningSinceSeconds: 80, lastCheckpointAtSeconds: 5 }]);
  });

  it('counts the tasks a move leaves running where they were, from the run they go on with', () => {
    const tasks = runningTaskCheckpoints({
      tasks: [
        // Migrating, still running on its draining instance (a move waiting for its new instances).
        { jobId: 'job-1', state: 'running', instanceId: 'inst-1', lastCheckpointAtSeconds: 40 },
        // Migrating and checkpointing: it stopped working, nothing more to lose.
        { jobId: 'job-2', state: 'checkpointing', instanceId: 'inst-2' },
      ],
      runningSince: new Map(),
      migratingSince: new Map([
        ['job-1', 10],
        ['job-2', 20],
      ]),
      spotInstances: new Set(['inst-1']),
    });
    expect(tasks).toEqual([{ market: 'spot', runningSinceSeconds: 10, lastCheckpointAtSeconds: 40 }]);
  });

  it('keeps a migrating job’s task running on its draining spot instance in the figures, at its market', () => {
    const clock = new ManualClock(10_000);
    const store = new MemoryStateStore({ nowSeconds: () => clock.nowSeconds() });
    const job = store.submitJob(jobSpec('moving', CPU_SMALL));
    const spot = store.createInstance({ typeName: 'c7i.xlarge' });
    store.recordIntent(
      {
        kind: 'launch',
        payload: {
          instanceId: spot.id,
          typeName: 'c7i.xlarge',
          launchToken: spot.launchToken,
          market: 'spot',
        },
      },
      { key: launchIntentKey(spot.id) },
    );
    store.setInstanceState(spot.id, 'launching', { cloudId: 'c-1' });
    store.setInstanceState(spot.id, 'running');
    store.setTaskState(`${job.id}.0`, 'running', spot.id);
    store.setJobState(job.id, 'starting');
    store.setJobState(job.id, 'running');
    clock.advance(300);
    // Drained (a spot notice, or by hand): the job moves, its task working on where it is until its new instance is up.
    store.setInstanceState(spot.id, 'draining');
    store.setJobState(job.id, 'migrating');
    clock.advance(60);
    const { controller } = rig({}, { clock, store });
    // The 360 s since the run began are lost with the instance, as they were a minute ago.
    expect(controller.workAtRisk()).toEqual([
      { market: 'on-demand', runningTasks: 0, totalSeconds: 0, maxSeconds: 0 },
      { market: 'spot', runningTasks: 1, totalSeconds: 360, maxSeconds: 360 },
    ]);
  });

  it('is on /metrics by market, from the controller’s state', async () => {
    const clock = new ManualClock(10_000);
    const store = new MemoryStateStore({ nowSeconds: () => clock.nowSeconds() });
    const first = store.submitJob(jobSpec('checkpointing', CPU_SMALL));
    const second = store.submitJob(jobSpec('silent', CPU_SMALL));
    const inst = store.createInstance({ typeName: 'c7i.xlarge' });
    store.setInstanceState(inst.id, 'launching', { cloudId: 'c-1' });
    store.setInstanceState(inst.id, 'running');
    store.setTaskState(`${first.id}.0`, 'running', inst.id);
    store.setJobState(first.id, 'starting');
    store.setJobState(first.id, 'running');
    // Its worker reported the task running at once (nothing is at risk before a job is prepared).
    store.appendEvent({ kind: JOB_PREPARED_EVENT, jobId: first.id, message: 'prepared' });
    clock.advance(100);
    // The second on a spot instance, as a plan records one (its launch intent says the market).
    const spot = store.createInstance({ typeName: 'c7i.xlarge' });
    store.recordIntent(
      {
        kind: 'launch',
        payload: {
          instanceId: spot.id,
          typeName: 'c7i.xlarge',
          launchToken: spot.launchToken,
          market: 'spot',
        },
      },
      { key: launchIntentKey(spot.id) },
    );
    store.setInstanceState(spot.id, 'launching', { cloudId: 'c-2' });
    store.setInstanceState(spot.id, 'running');
    store.setTaskState(`${second.id}.0`, 'running', spot.id);
    store.setJobState(second.id, 'starting');
    store.setJobState(second.id, 'running');
    store.appendEvent({ kind: JOB_PREPARED_EVENT, jobId: second.id, message: 'prepared' });
    expect([store.getJob(first.id)?.state, store.getJob(second.id)?.state]).toEqual(['running', 'running']);
    clock.advance(500);
    store.recordCheckpoint(`${first.id}.0`, 'ck/1');
    clock.advance(120);
    const { controller } = rig({}, { clock, store });
    // The first task checkpointed 120 s ago; the second, on spot, has run 620 s with none.
    expect(controller.workAtRisk()).toEqual([
      { market: 'on-demand', runningTasks: 1, totalSeconds: 120, maxSeconds: 120 },
      { market: 'spot', runningTasks: 1, totalSeconds: 620, maxSeconds: 620 },
    ]);
    const server = await startApiServer(controller, { listen: '127.0.0.1:0', adminToken: ADMIN, catalog });
    try {
      const text = await (await fetch(`${server.url}/metrics`)).text();
      expect(text).toMatch(/^fleetwise_work_at_risk_seconds\{market="on-demand"\} 120$/m);
      expect(text).toMatch(/^fleetwise_work_at_risk_seconds\{market="spot"\} 620$/m);
      expect(text).toMatch(/^fleetwise_work_at_risk_max_seconds\{market="spot"\} 620$/m);
      // A minute on, without a checkpoint: both grow by it.
      clock.advance(60);
      const later = await (await fetch(`${server.url}/metrics`)).text();
      expect(later).toMatch(/^fleetwise_work_at_risk_seconds\{market="on-demand"\} 180$/m);
      expect(later).toMatch(/^fleetwise_work_at_risk_seconds\{market="spot"\} 680$/m);
      expect(text).toMatch(
        /^# HELP fleetwise_work_at_risk_seconds .*what losing those instances now would redo$/m,
      );
    } finally {
      await server.close();
    }
  });
});
