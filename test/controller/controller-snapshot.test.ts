import { describe, expect, it } from 'vitest';
import type { TaskControl, TaskStartRequest, TaskStatus } from '../../src/controller/seams.js';
import { buildSnapshot, JOB_CAPACITY_LOST_EVENT, readSnapshotInputs } from '../../src/controller/snapshot.js';
import {
  launchIntentKey,
  type EventFilter,
  type StateStore,
  type TaskRecord,
} from '../../src/controller/state-store.js';
import { CPU_SMALL, GPU_ONE, handPlan, jobSpec, rig } from './controller-fixtures.js';

/** Tasks whose workers report them still being prepared (image fetched, checkpoint restored) until `prepared`. */
class PreparingTasks implements TaskControl {
  readonly name = 'preparing';
  private readonly preparing = new Set<string>();

  async start({ task }: TaskStartRequest): Promise<void> {
    this.preparing.add(task.id);
  }

  async stop(): Promise<'stopped'> {
    return 'stopped';
  }

  async status(task: TaskRecord): Promise<TaskStatus> {
    return this.preparing.has(task.id) ? 'starting' : 'running';
  }

  prepared(taskId: string): void {
    this.preparing.delete(taskId);
  }
}

/** A spec of `replicas` CPU_SMALL tasks with a 30 s init delay and a 10 s restore. */
function initializingSpec(name: string, replicas = 1, expectedDurationSeconds = 1000) {
  return {
    ...jobSpec(name, CPU_SMALL, { expectedDurationSeconds, replicas }),
    checkpoint: {
      signal: 'SIGTERM' as const,
      timeoutSeconds: 60,
      restoreDelaySeconds: 10,
      initDelaySeconds: 30,
    },
  };
}

describe('snapshot of the store for the scheduler', () => {
  it('maps jobs, tasks and instances, with pinned jobs where they are committed', async () => {
    const r = rig();
    const running = r.controller.submit(initializingSpec('ckpt'), 'research');
    await r.controller.runRound();
    const started = r.store.getJob(running.id)?.startedAtSeconds as number;
    // Initializing (its 30 s init delay after its task was prepared, at once here): its progress is still to begin,
    // none is done, and none is at risk (its last checkpoint is now, not where its progress will begin).
    r.clock.advance(20);
    const initializing = buildSnapshot(readSnapshotInputs(r.store, r.clock.nowSeconds())).jobs[0];
    expect(initializing?.runningSinceSeconds).toBe(started + 30);
    expect(initializing?.expectedRemainingSeconds).toBe(1000);
    expect(initializing?.lastCheckpointSeconds).toBe(started + 20);
    r.clock.advance(380);
    const queued = r.controller.submit(jobSpec('later', CPU_SMALL), 'research');
    const snapshot = buildSnapshot(readSnapshotInputs(r.store, r.clock.nowSeconds()));
    expect(snapshot.instances).toEqual([
      {
        id: 'inst-1',
        typeName: 'c7i.xlarge',
        state: 'running',
        taskIds: [`${running.id}.0`],
        // Where the cloud put it (the fake cloud's first zone; no placement group asked for).
        placement: { zone: 'us-east-1a' },
      },
    ]);
    expect(snapshot.tasks.map((t) => [t.id, t.instanceId, t.key])).toEqual([
      [`${running.id}.0`, 'inst-1', r.store.getTask(`${running.id}.0`)?.workloadKey],
      [`${queued.id}.0`, undefined, r.store.getTask(`${queued.id}.0`)?.workloadKey],
    ]);
    const [a, b] = snapshot.jobs;
    expect(a).toMatchObject({
      id: running.id,
      reconfigurable: true,
      // Out of service during a move: upload ≈ fetch (10 s each) + 30 s init.
      migrationDelaySeconds: 50,
      // Declared 1000 s, started 400 s ago, making progress for the 370 s since its init.
      expectedRemainingSeconds: 630,
      runningSinceSeconds: started + 30,
      // Never checkpointed: everything since it began making progress would be lost by a move.
      lastCheckpointSeconds: started + 30,
    });
    expect(b).toMatchObject({
      id: queued.id,
      reconfigurable: true,
      migrationDelaySeconds: 0,
      lastCheckpointSeconds: undefined,
    });
  });

  it('pins a running job until every task is heard running, and dates its progress from then', async () => {
    const tasks = new PreparingTasks();
    const r = rig({ vanishGraceSeconds: 60 }, { tasks });
    const job = r.controller.submit(initializingSpec('pair', 2, 5000), 'research');
    const [t0, t1] = [`${job.id}.0`, `${job.id}.1`];
    const now = (): number => r.clock.nowSeconds();
    const snapshotJob = () => buildSnapshot(readSnapshotInputs(r.store, now())).jobs[0];
    await r.controller.runRound();
    expect(r.store.getJob(job.id)?.state).toBe('running');
    // Started, its images still being fetched: pinned where it is committed, no progress begun, nothing at risk.
    r.clock.advance(10);
    expect(snapshotJob()).toMatchObject({
      reconfigurable: false,
      runningSinceSeconds: undefined,
      lastCheckpointSeconds: now(),
      expectedRemainingSeconds: 5000,
    });
    expect(
      buildSnapshot(readSnapshotInputs(r.store, now())).tasks.every((t) => t.instanceId !== undefined),
    ).toBe(true);
    // One task prepared, its sibling not: still pinned.
    tasks.prepared(t0);
    r.clock.advance(10);
    await r.controller.reconcile();
    expect(snapshotJob()).toMatchObject({ reconfigurable: false, runningSinceSeconds: undefined });
    // Both heard running: movable, its progress beginning its 30 s init after the pass that heard them.
    tasks.prepared(t1);
    r.clock.advance(10);
    await r.controller.reconcile();
    const prepared = now();
    r.clock.advance(5);
    expect(snapshotJob()).toMatchObject({
      reconfigurable: true,
      runningSinceSeconds: prepared + 30,
      lastCheckpointSeconds: now(),
      expectedRemainingSeconds: 5000,
    });
    r.clock.advance(100);
    expect(snapshotJob()).toMatchObject({
      runningSinceSeconds: prepared + 30,
      lastCheckpointSeconds: prepared + 30,
      expectedRemainingSeconds: 5000 - (now() - prepared - 30),
    });
    // Its instances lost, it starts again elsewhere: prepared once, it is pinned again until its new starts are.
    await r.cloud.terminate(r.cloud.live().map((i) => i.id));
    r.clock.advance(61);
    await r.controller.runRound('period');
    expect(r.store.listTasks({ jobId: job.id }).map((t) => t.state)).toEqual(['running', 'running']);
    expect(r.store.getJob(job.id)?.state).toBe('running');
    expect(snapshotJob()).toMatchObject({ reconfigurable: false, runningSinceSeconds: undefined });
  });

  it('takes a running job as prepared only from when its inputs say', async () => {
    const r = rig();
    const job = r.controller.submit(initializingSpec('one'), 'research');
    await r.controller.runRound();
    const started = r.store.getJob(job.id)?.startedAtSeconds as number;
    r.clock.advance(100);
    const inputs = readSnapshotInputs(r.store, r.clock.nowSeconds());
    // Without workers a started task runs at once: prepared in the pass that started it.
    expect(inputs.preparedSince?.get(job.id)).toBe(started);
    const still = buildSnapshot({ ...inputs, preparedSince: new Map() }).jobs[0];
    expect(still).toMatchObject({
      reconfigurable: false,
      runningSinceSeconds: undefined,
      lastCheckpointSeconds: r.clock.nowSeconds(),
    });
    const later = buildSnapshot({ ...inputs, preparedSince: new Map([[job.id, started + 50]]) }).jobs[0];
    expect(later).toMatchObject({
      reconfigurable: true,
      runningSinceSeconds: started + 80,
      lastCheckpointSeconds: started + 80,
      expectedRemainingSeconds: 980,
    });
  });

  it('dates the progress of a job restarted after its instance was lost from the restart, not its first start', async () => {
    const r = rig({ vanishGraceSeconds: 60 });
    const job = r.controller.submit(
      jobSpec('lost', CPU_SMALL, { expectedDurationSeconds: 5000 }),
      'research',
    );
    await r.controller.runRound();
    const firstStart = r.store.getJob(job.id)?.startedAtSeconds as number;
    r.clock.advance(1000);
    await r.cloud.terminate([r.cloud.live()[0]?.id as string]); // gone without a notice: no move, no checkpoint
    r.clock.advance(61);
    await r.controller.runRound('period');
    expect(r.store.getTask(`${job.id}.0`)).toMatchObject({ state: 'running', instanceId: 'inst-2' });
    // Sent back to the queue, never moved: the first start is kept, but its progress begins again.
    expect(r.store.getJob(job.id)).toMatchObject({ migrations: 0, startedAtSeconds: firstStart });
    const restarted = r.clock.nowSeconds();
    r.clock.advance(100);
    const [snapshotJob] = buildSnapshot(readSnapshotInputs(r.store, r.clock.nowSeconds())).jobs;
    expect(snapshotJob?.runningSinceSeconds).toBe(restarted);
    // Never checkpointed: all 5000 s are still to do, less the 100 s since the restart.
    expect(snapshotJob?.expectedRemainingSeconds).toBe(4900);
  });

  it('puts no work at risk for the time a job waited: queued it has none, resumed it counts from the resume', async () => {
    const r = rig({ vanishGraceSeconds: 60 });
    const job = r.controller.submit(jobSpec('resumes', CPU_SMALL), 'research');
    await r.controller.runRound();
    r.clock.advance(500);
    r.store.recordCheckpoint(`${job.id}.0`, 'checkpoints/one', r.clock.nowSeconds());
    const checkpointed = r.clock.nowSeconds();
    r.clock.advance(300);
    const running = buildSnapshot(readSnapshotInputs(r.store, r.clock.nowSeconds())).jobs[0];
    expect(running?.lastCheckpointSeconds).toBe(checkpointed);
    // Back in the queue (as a lost instance sends it), it would resume from that checkpoint: nothing is at risk.
    r.store.transaction(() => {
      r.store.setTaskState(`${job.id}.0`, 'stopped');
      r.store.setJobState(job.id, 'queued', 'its instance was lost');
    });
    r.clock.advance(3600);
    const queued = buildSnapshot(readSnapshotInputs(r.store, r.clock.nowSeconds())).jobs[0];
    expect(queued?.lastCheckpointSeconds).toBe(r.clock.nowSeconds());
    // Running again from the checkpoint: at risk is what it did since it resumed, not the hour it waited.
    await r.controller.runRound('period');
    const resumed = r.store.getJob(job.id)?.state === 'running' ? r.clock.nowSeconds() : undefined;
    expect(resumed).toBeDefined();
    r.clock.advance(100);
    const again = buildSnapshot(readSnapshotInputs(r.store, r.clock.nowSeconds())).jobs[0];
    expect(again?.lastCheckpointSeconds).toBe(again?.runningSinceSeconds);
    expect(again?.runningSinceSeconds).toBeGreaterThanOrEqual(resumed as number);
  });

  it('leaves out instances that are going away, and a pinned job committed to one', async () => {
    const r = rig();
    const job = r.controller.submit(jobSpec('a', CPU_SMALL), 'research');
    await r.controller.runRound();
    r.store.setJobState(job.id, 'migrating', 'test'); // pinned
    r.store.setInstanceState('inst-1', 'draining', { reason: 'test' });
    const pinned = buildSnapshot(readSnapshotInputs(r.store, r.clock.nowSeconds()));
    expect(pinned.instances).toEqual([]);
    expect(pinned.jobs).toEqual([]);
    // Reconfigurable again: it appears, its task still pointing at the draining instance, so the plan moves it.
    r.store.setJobState(job.id, 'running', 'test');
    const movable = buildSnapshot(readSnapshotInputs(r.store, r.clock.nowSeconds()));
    expect(movable.jobs.map((j) => [j.id, j.reconfigurable])).toEqual([[job.id, true]]);
    expect(movable.tasks[0]?.instanceId).toBe('inst-1');
    expect(movable.instances).toEqual([]);
  });

  it('keeps the room a pinned job holds on an instance a plan may use when a sibling is on one going away', async () => {
    const r = rig();
    // Two tasks of one GPU each: one p3.2xlarge (1 GPU) apiece.
    const pair = r.controller.submit(jobSpec('pair', GPU_ONE, { replicas: 2 }), 'research');
    await r.controller.runRound();
    const home = (i: number) => r.store.getTask(`${pair.id}.${i}`)?.instanceId as string;
    expect(home(0)).not.toBe(home(1));
    // Still starting (pinned: its tasks on their way after a move) when a notice drains the first task's instance.
    r.store.setJobState(pair.id, 'migrating', 'test');
    r.store.setJobState(pair.id, 'starting', 'test');
    r.store.setInstanceState(home(0), 'draining', { reason: 'test' });
    const other = r.controller.submit(jobSpec('other', GPU_ONE), 'research');
    const snapshot = buildSnapshot(readSnapshotInputs(r.store, r.clock.nowSeconds()));
    // The second task stays where it is committed, and its instance is shown taken.
    expect(snapshot.jobs.map((j) => [j.id, j.reconfigurable, j.taskIds])).toEqual([
      [pair.id, false, [`${pair.id}.1`]],
      [other.id, true, [`${other.id}.0`]],
    ]);
    expect(snapshot.instances.map((i) => [i.id, i.taskIds])).toEqual([[home(1), [`${pair.id}.1`]]]);
    // So a plan that puts another job's task there is refused, as the instance is full...
    const typeName = r.store.getInstance(home(1))?.typeName as string;
    expect(() =>
      handPlan(r, { instances: [{ id: home(1), typeName, isNew: false, taskIds: [`${other.id}.0`] }] }),
    ).toThrow(/capacity is \[1 GPU/);
    // ...and the scheduler finds the other job its own instance.
    await r.controller.runRound();
    expect(r.store.getTask(`${other.id}.0`)?.instanceId).toBeDefined();
    expect(r.store.getTask(`${other.id}.0`)?.instanceId).not.toBe(home(1));
  });

  it('leaves out a task that succeeded while its siblings run, so the next plan neither restarts it nor moves them', async () => {
    const r = rig();
    const job = r.controller.submit(jobSpec('pair', CPU_SMALL, { replicas: 2 }), 'research');
    await r.controller.runRound();
    const placed = buildSnapshot(readSnapshotInputs(r.store, r.clock.nowSeconds()));
    expect(placed.tasks.map((t) => t.id)).toEqual([`${job.id}.0`, `${job.id}.1`]);
    const home = r.store.getTask(`${job.id}.1`)?.instanceId;
    r.store.setJobState(job.id, 'running', 'test');
    r.store.setTaskState(`${job.id}.0`, 'running', r.store.getTask(`${job.id}.0`)?.instanceId);
    r.store.setTaskState(`${job.id}.1`, 'running', home);
    r.store.setTaskState(`${job.id}.0`, 'succeeded');
    const after = buildSnapshot(readSnapshotInputs(r.store, r.clock.nowSeconds()));
    expect(after.tasks.map((t) => [t.id, t.instanceId])).toEqual([[`${job.id}.1`, home]]);
    expect(after.jobs.map((j) => j.id)).toEqual([job.id]);
    r.clock.advance(60);
    const round = await r.controller.runRound();
    expect(round.actions.filter((a) => a.kind === 'checkpoint-stop' || a.kind === 'start-task')).toEqual([]);
    expect(r.store.getTask(`${job.id}.1`)).toMatchObject({ state: 'running', instanceId: home });
  });

  it('carries the market of an instance (spot unless its launch fell back) and a rebalance recommendation', async () => {
    const r = rig();
    r.controller.submit(jobSpec('a', CPU_SMALL), 'research');
    r.controller.submit(jobSpec('b', CPU_SMALL), 'research');
    await r.controller.runRound();
    const ids = buildSnapshot(readSnapshotInputs(r.store, r.clock.nowSeconds())).instances.map((i) => i.id);
    expect(ids.length).toBeGreaterThanOrEqual(1);
    const first = ids[0] as string;
    const snap = () => buildSnapshot(readSnapshotInputs(r.store, r.clock.nowSeconds())).instances;
    expect(snap().every((i) => i.market === undefined && i.rebalanceRecommended === undefined)).toBe(true);
    // An instance and its launch as a plan records a spot one (the plan above launched on demand).
    const typeName = r.store.getInstance(first)?.typeName as string;
    const spot = r.store.createInstance({ typeName });
    r.store.recordIntent(
      {
        kind: 'launch',
        payload: { instanceId: spot.id, typeName, launchToken: spot.launchToken, market: 'spot' },
      },
      { key: launchIntentKey(spot.id) },
    );
    r.store.appendEvent({ kind: 'instance.rebalance-recommendation', instanceId: spot.id, message: 'test' });
    expect(snap().find((i) => i.id === spot.id)).toMatchObject({
      market: 'spot',
      rebalanceRecommended: true,
    });
    expect(
      snap()
        .filter((i) => i.id !== spot.id)
        .every((i) => i.market === undefined && i.rebalanceRecommended === undefined),
    ).toBe(true);
    // A launch that fell back to on demand is on demand.
    r.store.appendEvent({ kind: 'instance.market-fallback', instanceId: spot.id, message: 'test' });
    expect(snap().find((i) => i.id === spot.id)?.market).toBeUndefined();
  });

  it('gives a waiting job the zones it lost capacity in, asking only about jobs submitted before the newest loss', () => {
    const r = rig();
    const lost = r.controller.submit(jobSpec('lost', CPU_SMALL), 'research');
    r.clock.advance(100);
    r.store.appendEvent({
      kind: JOB_CAPACITY_LOST_EVENT,
      jobId: lost.id,
      message: 'test',
      data: { zone: 'us-east-1b' },
    });
    // Submitted within the clocks' grace of the loss, then well after it.
    r.clock.advance(30);
    const close = r.controller.submit(jobSpec('close', CPU_SMALL), 'research');
    r.clock.advance(600);
    const later = r.controller.submit(jobSpec('later', CPU_SMALL), 'research');
    const asked: string[] = [];
    const counting = new Proxy(r.store, {
      get(target, property, receiver) {
        const value: unknown = Reflect.get(target, property, receiver);
        if (property !== 'listEvents' || typeof value !== 'function') return value;
        return (filter?: EventFilter) => {
          if (filter?.kind === JOB_CAPACITY_LOST_EVENT && filter.jobId !== undefined)
            asked.push(filter.jobId);
          return (value as StateStore['listEvents']).call(target, filter);
        };
      },
    });
    const inputs = readSnapshotInputs(counting, r.clock.nowSeconds());
    expect(inputs.interruptedZones).toEqual(new Map([[lost.id, ['us-east-1b']]]));
    expect(asked.sort()).toEqual([close.id, lost.id].sort());
    expect(asked).not.toContain(later.id);
  });
});
