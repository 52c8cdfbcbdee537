import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/controller/clock.js';
import { readCoStart, startMetrics } from '../../src/controller/co-start-records.js';
import { computeCostReport } from '../../src/controller/cost-accounting.js';
import { ControllerMetrics } from '../../src/controller/api/metrics.js';
import { jobDocument } from '../../src/controller/api/views.js';
import { coStartLines } from '../../src/cli/commands/job.js';
import { MemoryStateStore } from '../../src/controller/memory-state-store.js';
import type { StateStore } from '../../src/controller/state-store.js';
import type { StartMeasure, WorkerTaskControl } from '../../src/controller/worker-task-control.js';
import type { DesiredTask, TaskReport } from '../../src/protocol/worker-protocol.js';
import {
  catalog,
  CPU_SMALL,
  FakeCloud,
  jobSpec,
  rig,
  workerTaskControlFor,
  type Rig,
} from './controller-fixtures.js';

/**
 * The co-start barrier in the controller (round/co-start.ts through the reconciler and the worker protocol): a
 * multi-task job's tasks are prepared and held, released together when the last is ready, level-triggered through
 * the state store (a controller restart while they wait loses nothing), and planned again after the timeout.
 * Workers are played by heartbeats: what a worker reports and what the controller answers it.
 */

const TIMEOUT = 600;

/** Workers whose measured starts go to `measured` and to `metrics`, wired as the controller's build wires them. */
function workersFor(
  store: StateStore,
  clock: ManualClock,
  measured: StartMeasure[],
  metrics: ControllerMetrics,
): WorkerTaskControl {
  return workerTaskControlFor(store, clock, {
    objectStoreLocation: '/tmp/fleetwise-co-start-objects',
    coStart: true,
    onStartMeasured: (_jobId, m) => {
      measured.push(m);
      metrics.observeStart(m);
    },
  });
}

interface Harness {
  readonly r: Rig;
  readonly workers: WorkerTaskControl;
  readonly measured: StartMeasure[];
  readonly metrics: ControllerMetrics;
}

function harness(store?: StateStore, clock?: ManualClock, cloud?: FakeCloud): Harness {
  const c = clock ?? new ManualClock();
  const s = store ?? new MemoryStateStore({ nowSeconds: () => c.nowSeconds() });
  const measured: StartMeasure[] = [];
  const metrics = new ControllerMetrics();
  const workers = workersFor(s, c, measured, metrics);
  const r = rig(
    { coStartTimeoutSeconds: TIMEOUT },
    {
      store: s,
      clock: c,
      tasks: workers,
      workers,
      // Holds that end without a release count as they end, wired as the controller's build wires them.
      onBarrierIdle: (dollars) => metrics.observeBarrierIdle(dollars),
      ...(cloud === undefined ? {} : { cloud }),
    },
  );
  return { r, workers, measured, metrics };
}

/** A store whose next outermost transaction fails as it would commit (its writes undone), when asked to. */
class FailingCommitStore extends MemoryStateStore {
  readonly clock: ManualClock;
  failNextCommit = false;
  private depth = 0;

  constructor() {
    const clock = new ManualClock();
    super({ nowSeconds: () => clock.nowSeconds() });
    this.clock = clock;
  }

  override transaction<T>(fn: () => T): T {
    this.depth += 1;
    try {
      return super.transaction(() => {
        const result = fn();
        if (this.depth === 1 && this.failNextCommit) {
          this.failNextCommit = false;
          throw new Error('commit failed');
        }
        return result;
      });
    } finally {
      this.depth -= 1;
    }
  }
}

/** `fleetwise_barrier_idle_cost_dollars_total` as /metrics shows it. */
async function barrierIdleMetric(h: Harness): Promise<number> {
  const metric = h.metrics.registry.getSingleMetric('fleetwise_barrier_idle_cost_dollars_total');
  return (await metric?.get())?.values[0]?.value ?? 0;
}

/** What holding a task of `gang` on `instanceId` for `seconds` costs: its share of its instance's price. */
function holdCost(h: Harness, instanceId: string, seconds: number): number {
  const inst = h.r.store.getInstance(instanceId)!;
  const type = catalog.types.find((t) => t.name === inst.typeName)!;
  const share = Math.max(4 / type.capacity[1], 8 / type.capacity[2]);
  return (seconds * share * type.costPerHour) / 3600;
}

/** What `instanceId` is billed for `seconds` (its type's on-demand price). */
function instanceCost(h: Harness, instanceId: string, seconds: number): number {
  const inst = h.r.store.getInstance(instanceId)!;
  const type = catalog.types.find((t) => t.name === inst.typeName)!;
  return (seconds * type.costPerHour) / 3600;
}

/** The job's cost in the cost report now (0 when it has none). */
function jobCost(h: Harness, jobId: string): number {
  const report = computeCostReport(h.r.store, catalog, h.r.clock.nowSeconds());
  return report.byJob.find((j) => j.id === jobId)?.cost ?? 0;
}

const token = (instanceId: string): string => `worker-token-${instanceId}-0123456789abcdef`;

/** Every live instance's worker has registered. */
function registerAll(h: Harness): void {
  for (const i of h.r.store.listInstances({ states: ['running'] }))
    if (i.workerTokenHash === undefined) h.r.store.setWorkerToken(i.id, token(i.id));
}

function beat(h: Harness, instanceId: string, tasks: TaskReport[] = []): DesiredTask[] {
  return h.workers.heartbeat(token(instanceId), { tasks }).tasks;
}

const ready = (taskId: string): TaskReport => ({ taskId, state: 'ready', attempt: 1 });
const running = (taskId: string): TaskReport => ({ taskId, state: 'running', attempt: 1 });
/** The task exited 0 `secondsAgo` (a held task reports so when its exit was stored where it ran before). */
const succeeded = (taskId: string, secondsAgo: number): TaskReport => ({
  taskId,
  state: 'succeeded',
  attempt: 1,
  exitCode: 0,
  exitedSecondsAgo: secondsAgo,
});

/** When the task's state last changed, as the store's log dates it. */
function lastTaskChangeAt(h: Harness, taskId: string): number | undefined {
  const jobId = h.r.store.getTask(taskId)?.jobId;
  return h.r.store.listEvents({ jobId, taskId, kind: 'task.state', newestFirst: true, limit: 1 })[0]
    ?.atSeconds;
}

/** The readiness the job's co-start record holds (an object matches `{}` in toMatchObject: compared whole here). */
function readyIn(h: Harness, jobId: string): unknown {
  return (h.r.store.getValue(`coStart.${jobId}`) as { ready?: unknown } | undefined)?.ready;
}

/** A two-task job placed and its instances up and registered; the instance of each task. */
async function placedGang(h: Harness): Promise<{ jobId: string; on: Map<string, string> }> {
  const job = h.r.controller.submit(jobSpec('gang', CPU_SMALL, { replicas: 2 }), 'research');
  await h.r.controller.runRound();
  await h.r.controller.reconcile();
  registerAll(h);
  await h.r.controller.reconcile();
  const on = new Map(
    h.r.store.listTasks({ jobId: job.id }).map((t) => [t.id, t.instanceId as string] as const),
  );
  // One task per instance (4 of a c7i's vCPUs each): each has a worker of its own.
  expect(new Set(on.values()).size).toBe(2);
  return { jobId: job.id, on };
}

describe('co-start barrier in the controller', () => {
  it('holds prepared tasks until the last is ready, then releases them together; a restart while waiting loses nothing', async () => {
    const h = harness();
    const { jobId, on } = await placedGang(h);
    const [t0, t1] = [`${jobId}.0`, `${jobId}.1`];
    // Both starts were asked for, held: every worker is told to prepare and wait.
    for (const [taskId, instanceId] of on) {
      const desired = beat(h, instanceId).find((d) => d.taskId === taskId);
      expect(desired).toMatchObject({ action: 'run', hold: true });
    }
    expect(h.r.store.getTask(t0)?.state).toBe('starting');

    // The first task is prepared; its sibling is not: nothing is released, the job's clock has not started.
    h.r.clock.advance(5);
    beat(h, on.get(t0) as string, [ready(t0)]);
    await h.r.controller.reconcile();
    expect(h.r.store.getTask(t0)?.state).toBe('starting');
    expect(h.r.store.getJob(jobId)?.startedAtSeconds).toBeUndefined();
    expect(jobDocument(h.r.store, h.r.store.getJob(jobId)!).coStart).toMatchObject({ readyTaskIds: [t0] });

    // The controller restarts while the job waits: a new process over the same store, nothing in memory.
    const restarted = harness(h.r.store, h.r.clock, h.r.cloud);
    await restarted.r.controller.recover();
    h.r.clock.advance(30);
    // Both workers heartbeat on: t0's still holds it prepared (ready since before the restart: its readiness and
    // since when came from the store), and the slow task is now ready too.
    beat(restarted, on.get(t0) as string, [ready(t0)]);
    beat(restarted, on.get(t1) as string, [ready(t1)]);
    await restarted.r.controller.reconcile();
    expect(restarted.r.store.getTask(t0)?.state).toBe('running');
    expect(restarted.r.store.getTask(t1)?.state).toBe('running');
    const job = restarted.r.store.getJob(jobId)!;
    expect(job.state).toBe('running');
    // The job's clock starts at the release, not when its first task was ready.
    expect(job.startedAtSeconds).toBe(restarted.r.clock.nowSeconds());
    // The hold is lifted: each worker's next answer runs its task.
    for (const [taskId, instanceId] of on)
      expect(beat(restarted, instanceId).find((d) => d.taskId === taskId)?.hold).toBeUndefined();

    // Both heard running, one heartbeat apart: the start skew is that heartbeat, and no started task waited.
    beat(restarted, on.get(t0) as string, [running(t0)]);
    restarted.r.clock.advance(1);
    beat(restarted, on.get(t1) as string, [running(t1)]);
    expect(restarted.measured).toEqual([{ startSkewSeconds: 1, barrierIdleCost: expect.any(Number) }]);
    const view = jobDocument(restarted.r.store, restarted.r.store.getJob(jobId)!).coStart;
    expect(view).toMatchObject({ readyTaskIds: [], startSkewSeconds: 1 });
    expect(view?.releasedAtSeconds).toBe(job.startedAtSeconds);
    // Barrier-idle: t0 held its slot 30 s before the release, t1 none (each at its share of its instance's $/h).
    const inst = restarted.r.store.getInstance(on.get(t0) as string)!;
    const type = catalog.types.find((t) => t.name === inst.typeName)!;
    const share = Math.max(4 / type.capacity[1], 8 / type.capacity[2]);
    expect(view?.barrierIdleCost).toBeCloseTo((30 * share * type.costPerHour) / 3600, 9);

    // The job ends: its record keeps what the view shows and drops the per-task times.
    restarted.r.controller.cancel(jobId);
    const kept = restarted.r.store.getValue(`coStart.${jobId}`) as { ready: object; running: object };
    expect([Object.keys(kept.ready), Object.keys(kept.running)]).toEqual([[], []]);
    const ended = jobDocument(restarted.r.store, restarted.r.store.getJob(jobId)!).coStart;
    expect(ended).toEqual({ ...view, readyTaskIds: [] });
  });

  it('bills its job a task’s preparation and its instance’s idle time its hold: the job’s cost does not fall at the release', async () => {
    const h = harness();
    const { jobId, on } = await placedGang(h);
    const [t0, t1] = [`${jobId}.0`, `${jobId}.1`];
    // t0 is prepared in 20 s, then held 30 s for t1, prepared in 50 s.
    h.r.clock.advance(20);
    beat(h, on.get(t0) as string, [ready(t0)]);
    h.r.clock.advance(30);
    // One task per instance: the instance's whole price while its task is prepared, none of it while it is held.
    const billed = instanceCost(h, on.get(t0) as string, 20) + instanceCost(h, on.get(t1) as string, 50);
    expect(jobCost(h, jobId)).toBeCloseTo(billed, 12);
    beat(h, on.get(t0) as string, [ready(t0)]);
    beat(h, on.get(t1) as string, [ready(t1)]);
    await h.r.controller.reconcile();
    expect(h.r.store.listTasks({ jobId }).map((t) => t.state)).toEqual(['running', 'running']);
    expect(jobCost(h, jobId)).toBeCloseTo(billed, 12);
    const report = computeCostReport(h.r.store, catalog, h.r.clock.nowSeconds());
    expect(report.idleCost).toBeCloseTo(instanceCost(h, on.get(t0) as string, 30), 12);
    // Running, both instances are the job's.
    h.r.clock.advance(60);
    expect(jobCost(h, jobId)).toBeCloseTo(
      billed + instanceCost(h, on.get(t0) as string, 60) + instanceCost(h, on.get(t1) as string, 60),
      12,
    );
  });

  it('drops the record of a job that ended before its release', async () => {
    const h = harness();
    const { jobId, on } = await placedGang(h);
    const t0 = `${jobId}.0`;
    beat(h, on.get(t0) as string, [ready(t0)]);
    expect(h.r.store.getValue(`coStart.${jobId}`)).toMatchObject({ ready: { [t0]: {} } });
    h.r.controller.cancel(jobId);
    expect(h.r.store.getValue(`coStart.${jobId}`)).toBeUndefined();
    expect(jobDocument(h.r.store, h.r.store.getJob(jobId)!).coStart).toBeNull();
  });

  it('forgets a readiness its worker no longer reports (a restarted worker lost the prepared task)', async () => {
    const h = harness();
    const { jobId, on } = await placedGang(h);
    const [t0, t1] = [`${jobId}.0`, `${jobId}.1`];
    beat(h, on.get(t0) as string, [ready(t0)]);
    // t0's worker restarted: it reports nothing, so t0 is not ready any more; t1 being ready releases nothing.
    beat(h, on.get(t0) as string, []);
    beat(h, on.get(t1) as string, [ready(t1)]);
    await h.r.controller.reconcile();
    expect(h.r.store.getTask(t0)?.state).toBe('starting');
    expect(h.r.store.getTask(t1)?.state).toBe('starting');
    // The worker prepares it again (it is still told to): now both are ready.
    expect(beat(h, on.get(t0) as string, [ready(t0)]).find((d) => d.taskId === t0)?.hold).toBe(true);
    await h.r.controller.reconcile();
    expect(h.r.store.getTask(t0)?.state).toBe('running');
  });

  it('plans the job again when a task is still unready after the timeout', async () => {
    const h = harness();
    const { jobId, on } = await placedGang(h);
    const [t0] = [`${jobId}.0`];
    beat(h, on.get(t0) as string, [ready(t0)]);
    h.r.clock.advance(TIMEOUT - 1);
    await h.r.controller.reconcile();
    expect(h.r.store.getJob(jobId)?.state).toBe('starting');
    h.r.clock.advance(1);
    await h.r.controller.reconcile();
    // Its starts are void, its tasks wait to be placed again, and the job is back in the queue for the next round.
    expect(h.r.store.getJob(jobId)?.state).toBe('queued');
    expect(h.r.store.listTasks({ jobId }).map((t) => t.state)).toEqual(['pending', 'pending']);
    expect(h.r.store.listIntents({ states: ['pending'], kind: 'start-task' })).toEqual([]);
    expect(h.r.store.listEvents({ jobId }).some((e) => e.kind === 'job.co-start')).toBe(true);
    // The held task is no longer wanted on its instance: its worker drops what it prepared.
    expect(beat(h, on.get(t0) as string, [ready(t0)]).find((d) => d.taskId === t0)).toBeUndefined();
  });

  it('plans the job again at once when the instance of a task not yet released is drained, and terminates it', async () => {
    const h = harness();
    const { jobId, on } = await placedGang(h);
    const [t0, t1] = [`${jobId}.0`, `${jobId}.1`];
    const drained = on.get(t1) as string;
    beat(h, on.get(t0) as string, [ready(t0)]);
    // Drained (by request, or for a spot interruption) before t1 was prepared: its start can never happen there.
    h.r.controller.drain(drained);
    await h.r.controller.reconcile();
    expect(h.r.store.getJob(jobId)?.state).toBe('queued');
    expect(h.r.store.listTasks({ jobId }).map((t) => t.state)).toEqual(['pending', 'pending']);
    expect(h.r.store.listIntents({ states: ['pending'], kind: 'start-task' })).toEqual([]);
    // What t0 was prepared with is forgotten, and its worker drops it.
    expect(readyIn(h, jobId)).toEqual({});
    expect(beat(h, on.get(t0) as string, [ready(t0)]).find((d) => d.taskId === t0)).toBeUndefined();
    // The next round places the job anew, on instances that stay; the drained one has nothing left and goes.
    await h.r.controller.runRound();
    await h.r.controller.reconcile();
    registerAll(h);
    await h.r.controller.reconcile();
    const placed = h.r.store.listTasks({ jobId });
    expect(placed.map((t) => t.state)).toEqual(['starting', 'starting']);
    expect(placed.map((t) => t.instanceId)).not.toContain(drained);
    expect(['terminating', 'terminated']).toContain(h.r.store.getInstance(drained)?.state);
    // And it is released as any gang is, once both are prepared.
    for (const t of placed) beat(h, t.instanceId as string, [ready(t.id)]);
    await h.r.controller.reconcile();
    expect(h.r.store.listTasks({ jobId }).map((t) => t.state)).toEqual(['running', 'running']);
    expect(h.r.store.getJob(jobId)?.state).toBe('running');
  });

  it('fails the job when a held task cannot be prepared, as it would a started task, and lets its sibling go', async () => {
    const h = harness();
    const { jobId, on } = await placedGang(h);
    const [t0, t1] = [`${jobId}.0`, `${jobId}.1`];
    beat(h, on.get(t0) as string, [ready(t0)]);
    const failure = 'could not start: the build context is not in the object store';
    beat(h, on.get(t1) as string, [{ taskId: t1, state: 'failed', attempt: 1, reason: failure }]);
    await h.r.controller.reconcile();
    const job = h.r.store.getJob(jobId);
    expect(job?.state).toBe('failed');
    expect(job?.reason).toContain(failure);
    expect(h.r.store.listIntents({ states: ['pending'], kind: 'start-task' })).toEqual([]);
    // The prepared sibling is stopped, not run.
    expect(beat(h, on.get(t0) as string, [ready(t0)]).find((d) => d.taskId === t0)).toMatchObject({
      action: 'stop',
    });
  });

  it('retries the job under its retryStrategy when a held task cannot be prepared', async () => {
    const h = harness();
    const spec = jobSpec('gang', CPU_SMALL, { replicas: 2 });
    const job = h.r.controller.submit({ ...spec, retryStrategy: { attempts: 2 } }, 'research');
    await h.r.controller.runRound();
    await h.r.controller.reconcile();
    registerAll(h);
    await h.r.controller.reconcile();
    const [t0, t1] = [`${job.id}.0`, `${job.id}.1`];
    const on = (taskId: string): string => h.r.store.getTask(taskId)?.instanceId as string;
    beat(h, on(t0), [ready(t0)]);
    beat(h, on(t1), [{ taskId: t1, state: 'failed', attempt: 1, reason: 'image pull failed' }]);
    await h.r.controller.reconcile();
    const retried = h.r.store.getJob(job.id);
    expect(retried).toMatchObject({ state: 'queued', attempts: 2 });
    expect(h.r.store.listTasks({ jobId: job.id }).map((t) => t.state)).toEqual(['pending', 'pending']);
  });

  it('settles a held task found already succeeded, dated at its exit, and releases its sibling', async () => {
    const h = harness();
    const { jobId, on } = await placedGang(h);
    const [t0, t1] = [`${jobId}.0`, `${jobId}.1`];
    beat(h, on.get(t0) as string, [ready(t0)]);
    h.r.clock.advance(30);
    // t1 exited where it ran before, its worker lost before it said so; restarted here it is not run again, and
    // its worker reports the stored exit (worker/task-start.ts) while it is held.
    beat(h, on.get(t0) as string, [ready(t0)]);
    beat(h, on.get(t1) as string, [succeeded(t1, 10)]);
    await h.r.controller.reconcile();
    expect(h.r.store.getTask(t1)?.state).toBe('succeeded');
    expect(lastTaskChangeAt(h, t1)).toBe(h.r.clock.nowSeconds() - 10);
    // Its start is done, not left to time out; its sibling, the last one unready, is released on its own.
    expect(h.r.store.listIntents({ states: ['pending'], kind: 'start-task' })).toEqual([]);
    expect(h.r.store.getTask(t0)?.state).toBe('running');
    expect(h.r.store.getJob(jobId)?.state).toBe('running');
    expect(beat(h, on.get(t0) as string, [ready(t0)]).find((d) => d.taskId === t0)?.hold).toBeUndefined();
    // No re-plan follows at the co-start timeout, and the job ends when t0 does.
    h.r.clock.advance(TIMEOUT);
    beat(h, on.get(t0) as string, [succeeded(t0, 0)]);
    await h.r.controller.reconcile();
    expect(h.r.store.getJob(jobId)?.state).toBe('succeeded');
    expect(h.r.store.listEvents({ jobId }).some((e) => e.message?.includes('planned again'))).toBe(false);
  });

  it('ends the job when every held task is found already succeeded, when the last exited', async () => {
    const h = harness();
    const { jobId, on } = await placedGang(h);
    const [t0, t1] = [`${jobId}.0`, `${jobId}.1`];
    h.r.clock.advance(60);
    beat(h, on.get(t0) as string, [succeeded(t0, 40)]);
    beat(h, on.get(t1) as string, [succeeded(t1, 20)]);
    await h.r.controller.reconcile();
    expect(h.r.store.listTasks({ jobId }).map((t) => t.state)).toEqual(['succeeded', 'succeeded']);
    const job = h.r.store.getJob(jobId);
    expect(job?.state).toBe('succeeded');
    expect(job?.finishedAtSeconds).toBe(h.r.clock.nowSeconds() - 20);
    expect(h.r.store.listIntents({ states: ['pending'], kind: 'start-task' })).toEqual([]);
  });

  it('counts the hold of a sibling held when a retry ends its start as idle, not the job’s, and in /metrics', async () => {
    const h = harness();
    const spec = jobSpec('gang', CPU_SMALL, { replicas: 2 });
    const job = h.r.controller.submit({ ...spec, retryStrategy: { attempts: 2 } }, 'research');
    await h.r.controller.runRound();
    await h.r.controller.reconcile();
    registerAll(h);
    await h.r.controller.reconcile();
    const [t0, t1] = [`${job.id}.0`, `${job.id}.1`];
    const on = new Map([t0, t1].map((t) => [t, h.r.store.getTask(t)?.instanceId as string]));
    beat(h, on.get(t0) as string, [ready(t0)]);
    h.r.clock.advance(100);
    beat(h, on.get(t0) as string, [ready(t0)]);
    const idleBefore = computeCostReport(h.r.store, catalog, h.r.clock.nowSeconds()).idleCost;
    expect(idleBefore).toBeCloseTo(instanceCost(h, on.get(t0) as string, 100), 9);
    beat(h, on.get(t1) as string, [{ taskId: t1, state: 'failed', attempt: 1, reason: 'image pull failed' }]);
    await h.r.controller.reconcile();
    expect(h.r.store.getJob(job.id)).toMatchObject({ state: 'queued', attempts: 2 });
    // The retry ended t0's hold: still its instance's idle time, not turned into the job's after the fact.
    const after = computeCostReport(h.r.store, catalog, h.r.clock.nowSeconds());
    expect(after.idleCost).toBeCloseTo(idleBefore, 9);
    expect(jobCost(h, job.id)).toBeCloseTo(instanceCost(h, on.get(t1) as string, 100), 9);
    const inst = h.r.store.getInstance(on.get(t0) as string)!;
    const type = catalog.types.find((t) => t.name === inst.typeName)!;
    const share = Math.max(4 / type.capacity[1], 8 / type.capacity[2]);
    expect(await barrierIdleMetric(h)).toBeCloseTo((100 * share * type.costPerHour) / 3600, 9);
  });

  it('keeps what an earlier attempt’s holds cost in the job’s total, and numbers the next attempt’s start after them', async () => {
    const h = harness();
    const spec = jobSpec('gang', CPU_SMALL, { replicas: 2 });
    const job = h.r.controller.submit({ ...spec, retryStrategy: { attempts: 2 } }, 'research');
    await h.r.controller.runRound();
    await h.r.controller.reconcile();
    registerAll(h);
    await h.r.controller.reconcile();
    const [t0, t1] = [`${job.id}.0`, `${job.id}.1`];
    const on = (taskId: string): string => h.r.store.getTask(taskId)?.instanceId as string;
    const held = on(t0);
    beat(h, held, [ready(t0)]);
    h.r.clock.advance(100);
    beat(h, held, [ready(t0)]);
    beat(h, on(t1), [{ taskId: t1, state: 'failed', attempt: 1, reason: 'image pull failed' }]);
    await h.r.controller.reconcile();
    expect(h.r.store.getJob(job.id)).toMatchObject({ state: 'queued', attempts: 2 });
    const hold = holdCost(h, held, 100);
    // Nothing of the second attempt yet: the first's hold is still the job's.
    const retried = jobDocument(h.r.store, h.r.store.getJob(job.id)!).coStart;
    expect(retried).toMatchObject({ readyTaskIds: [], starts: 0 });
    expect(retried?.totalBarrierIdleCost).toBeCloseTo(hold, 9);
    // The second attempt starts at once: its start is the job's first, and the total has both.
    await h.r.controller.runRound();
    await h.r.controller.reconcile();
    registerAll(h);
    await h.r.controller.reconcile();
    const report = (taskId: string, state: 'ready' | 'running'): TaskReport => ({
      taskId,
      state,
      attempt: 2,
    });
    for (const t of [t0, t1]) beat(h, on(t), [report(t, 'ready')]);
    await h.r.controller.reconcile();
    for (const t of [t0, t1]) beat(h, on(t), [report(t, 'running')]);
    expect(h.measured).toHaveLength(1);
    const view = jobDocument(h.r.store, h.r.store.getJob(job.id)!).coStart;
    expect(view).toMatchObject({ start: 1, starts: 1, barrierIdleCost: 0 });
    expect(view?.totalBarrierIdleCost).toBeCloseTo(hold, 9);
    expect(view?.totalBarrierIdleCost).toBeCloseTo(await barrierIdleMetric(h), 9);
  });

  it('does not have a task placed again prepared before its siblings are: neither the called-off start nor an old report counts', async () => {
    const h = harness();
    const { jobId, on } = await placedGang(h);
    const [t0, t1] = [`${jobId}.0`, `${jobId}.1`];
    const kept = on.get(t0) as string;
    expect(beat(h, kept, [ready(t0)]).find((d) => d.taskId === t0)).toMatchObject({ hold: true });
    // t1's instance is drained before t1 was prepared: the job is planned again, t0's start is called off.
    h.r.controller.drain(on.get(t1) as string);
    await h.r.controller.reconcile();
    expect(h.r.store.getJob(jobId)?.state).toBe('queued');
    // Placed anew: t0 back on its instance (its worker still holds what it prepared), t1 on one still booting.
    await h.r.controller.runRound();
    await h.r.controller.reconcile();
    expect(h.r.store.getTask(t0)).toMatchObject({ state: 'starting', instanceId: kept });
    const booting = h.r.store.getTask(t1)?.instanceId as string;
    expect(h.r.store.getInstance(booting)?.workerTokenHash).toBeUndefined();
    // Its worker is not told to prepare t0 again (and drops it), and its old readiness does not count.
    expect(beat(h, kept, [ready(t0)]).find((d) => d.taskId === t0)).toBeUndefined();
    expect(readyIn(h, jobId)).toEqual({});
    // Once t1's instance is up, both starts are asked for: t0 is prepared and held as before.
    registerAll(h);
    await h.r.controller.reconcile();
    expect(beat(h, kept, []).find((d) => d.taskId === t0)).toMatchObject({ action: 'run', hold: true });
    beat(h, kept, [ready(t0)]);
    beat(h, booting, [ready(t1)]);
    await h.r.controller.reconcile();
    expect(h.r.store.listTasks({ jobId }).map((t) => t.state)).toEqual(['running', 'running']);
  });

  it("does not have a retried job's tasks prepared on the strength of the earlier attempt's start or report", async () => {
    const h = harness();
    const spec = jobSpec('gang', CPU_SMALL, { replicas: 2 });
    const job = h.r.controller.submit({ ...spec, retryStrategy: { attempts: 2 } }, 'research');
    await h.r.controller.runRound();
    await h.r.controller.reconcile();
    registerAll(h);
    await h.r.controller.reconcile();
    const [t0, t1] = [`${job.id}.0`, `${job.id}.1`];
    const on = (taskId: string): string => h.r.store.getTask(taskId)?.instanceId as string;
    const failed: TaskReport = { taskId: t1, state: 'failed', attempt: 1, reason: 'image pull failed' };
    const [kept, left] = [on(t0), on(t1)];
    beat(h, kept, [ready(t0)]);
    beat(h, left, [failed]);
    await h.r.controller.reconcile();
    expect(h.r.store.getJob(job.id)).toMatchObject({ state: 'queued', attempts: 2 });
    // Attempt 2 is placed with t1 on an instance still booting (its old one drained): t0's start is not asked for.
    h.r.controller.drain(left);
    await h.r.controller.runRound();
    expect(h.r.store.getTask(t0)).toMatchObject({ state: 'starting', instanceId: kept });
    expect(h.r.store.getInstance(on(t1))?.workerTokenHash).toBeUndefined();
    // Neither attempt 1's start of t0 nor its worker's report of attempt 1 makes it prepare t0 now…
    expect(beat(h, kept, [ready(t0)]).find((d) => d.taskId === t0)).toBeUndefined();
    // …nor, for a controller restarted meanwhile (it asked for no start yet), the worker's report of attempt 1.
    const restarted = harness(h.r.store, h.r.clock, h.r.cloud);
    expect(beat(restarted, kept, [ready(t0)]).find((d) => d.taskId === t0)).toBeUndefined();
    expect(jobDocument(h.r.store, h.r.store.getJob(job.id)!).coStart?.readyTaskIds ?? []).toEqual([]);
  });

  it('counts a hold that a re-plan ends as idle, not the job’s, and its barrier-idle cost in the next start', async () => {
    const h = harness();
    const { jobId, on } = await placedGang(h);
    const [t0, t1] = [`${jobId}.0`, `${jobId}.1`];
    beat(h, on.get(t0) as string, [ready(t0)]);
    h.r.clock.advance(TIMEOUT);
    beat(h, on.get(t0) as string, [ready(t0)]);
    await h.r.controller.reconcile();
    expect(h.r.store.getJob(jobId)?.state).toBe('queued');
    // t0, ready at once, held its instance for the timeout: idle, none of it the job's. t1 was being prepared all
    // along, as any start is: its instance's time is the job's.
    const report = computeCostReport(h.r.store, catalog, h.r.clock.nowSeconds());
    expect(jobCost(h, jobId)).toBeCloseTo(instanceCost(h, on.get(t1) as string, TIMEOUT), 9);
    expect(report.idleCost).toBeCloseTo(instanceCost(h, on.get(t0) as string, TIMEOUT), 9);
    // t0 held its part of its instance for the timeout: that is the job's barrier-idle cost so far.
    const inst = h.r.store.getInstance(on.get(t0) as string)!;
    const type = catalog.types.find((t) => t.name === inst.typeName)!;
    const share = Math.max(4 / type.capacity[1], 8 / type.capacity[2]);
    const held = (TIMEOUT * share * type.costPerHour) / 3600;
    expect(jobDocument(h.r.store, h.r.store.getJob(jobId)!).coStart?.barrierIdleCost).toBeCloseTo(held, 9);
    // Placed again and released at once: the measured start includes the earlier hold (the metric counts it).
    await h.r.controller.runRound();
    await h.r.controller.reconcile();
    for (const t of h.r.store.listTasks({ jobId })) beat(h, t.instanceId as string, [ready(t.id)]);
    await h.r.controller.reconcile();
    expect(h.r.store.getJob(jobId)?.state).toBe('running');
    for (const t of h.r.store.listTasks({ jobId })) beat(h, t.instanceId as string, [running(t.id)]);
    expect(h.measured).toHaveLength(1);
    expect(h.measured[0]?.barrierIdleCost).toBeCloseTo(held, 9);
  });

  it('counts a hold that a cancel ends as idle, not the job’s, and keeps its barrier-idle cost', async () => {
    const h = harness();
    const { jobId, on } = await placedGang(h);
    const [t0, t1] = [`${jobId}.0`, `${jobId}.1`];
    beat(h, on.get(t0) as string, [ready(t0)]);
    h.r.clock.advance(100);
    beat(h, on.get(t0) as string, [ready(t0)]);
    h.r.controller.cancel(jobId);
    await h.r.controller.reconcile();
    // The workers hear the stops, then report the tasks gone: the stops complete.
    beat(h, on.get(t0) as string, [ready(t0)]);
    beat(h, on.get(t1) as string, []);
    beat(h, on.get(t0) as string, []);
    beat(h, on.get(t1) as string, []);
    await h.r.controller.reconcile();
    expect(h.r.store.listTasks({ jobId }).map((t) => t.state)).toEqual(['stopped', 'stopped']);
    // t0's hold is idle; t1's preparation, cut short, the job's.
    const report = computeCostReport(h.r.store, catalog, h.r.clock.nowSeconds());
    expect(jobCost(h, jobId)).toBeCloseTo(instanceCost(h, on.get(t1) as string, 100), 9);
    expect(report.idleCost).toBeCloseTo(instanceCost(h, on.get(t0) as string, 100), 9);
    const inst = h.r.store.getInstance(on.get(t0) as string)!;
    const type = catalog.types.find((t) => t.name === inst.typeName)!;
    const share = Math.max(4 / type.capacity[1], 8 / type.capacity[2]);
    expect(jobDocument(h.r.store, h.r.store.getJob(jobId)!).coStart?.barrierIdleCost).toBeCloseTo(
      (100 * share * type.costPerHour) / 3600,
      9,
    );
  });

  it('does not release a job onto a worker gone silent since it reported its task ready', async () => {
    const h = harness();
    const { jobId, on } = await placedGang(h);
    const [t0, t1] = [`${jobId}.0`, `${jobId}.1`];
    beat(h, on.get(t0) as string, [ready(t0)]);
    // t0's worker is not heard for ten heartbeat intervals (1 s each), short of being declared lost.
    h.r.clock.advance(10);
    beat(h, on.get(t1) as string, [ready(t1)]);
    await h.r.controller.reconcile();
    expect(h.r.store.listTasks({ jobId }).map((t) => t.state)).toEqual(['starting', 'starting']);
    // Heard again, still holding t0 prepared: released, t0 held since it was first ready.
    beat(h, on.get(t0) as string, [ready(t0)]);
    await h.r.controller.reconcile();
    expect(h.r.store.listTasks({ jobId }).map((t) => t.state)).toEqual(['running', 'running']);
  });

  it('waits longer at each co-start re-plan of the same job, across a controller restart', async () => {
    const h = harness();
    const { jobId, on } = await placedGang(h);
    const t0 = `${jobId}.0`;
    beat(h, on.get(t0) as string, [ready(t0)]);
    h.r.clock.advance(TIMEOUT);
    await h.r.controller.reconcile();
    expect(h.r.store.getJob(jobId)?.state).toBe('queued');
    await h.r.controller.runRound();
    await h.r.controller.reconcile();
    // The controller restarts: the count of re-plans is in the store.
    const restarted = harness(h.r.store, h.r.clock, h.r.cloud);
    await restarted.r.controller.recover();
    await restarted.r.controller.reconcile();
    const placed = restarted.r.store.getTask(t0)?.instanceId as string;
    beat(restarted, placed, [ready(t0)]);
    // The second barrier times out after twice the timeout, not once.
    restarted.r.clock.advance(TIMEOUT);
    beat(restarted, placed, [ready(t0)]);
    await restarted.r.controller.reconcile();
    expect(restarted.r.store.getJob(jobId)?.state).toBe('starting');
    restarted.r.clock.advance(TIMEOUT);
    await restarted.r.controller.reconcile();
    expect(restarted.r.store.getJob(jobId)?.state).toBe('queued');
  });
  it('counts a hold that a drain of a sibling’s instance ends as idle, not the job’s, and in the barrier-idle cost', async () => {
    const h = harness();
    const { jobId, on } = await placedGang(h);
    const [t0, t1] = [`${jobId}.0`, `${jobId}.1`];
    beat(h, on.get(t0) as string, [ready(t0)]);
    h.r.clock.advance(100);
    beat(h, on.get(t0) as string, [ready(t0)]);
    // t1's instance is drained before t1 was prepared: the job goes back to the queue, t0's hold ends unreleased.
    h.r.controller.drain(on.get(t1) as string);
    await h.r.controller.reconcile();
    expect(h.r.store.getJob(jobId)?.state).toBe('queued');
    // t0's hold is idle; t1's preparation, cut short, the job's.
    const report = computeCostReport(h.r.store, catalog, h.r.clock.nowSeconds());
    expect(jobCost(h, jobId)).toBeCloseTo(instanceCost(h, on.get(t1) as string, 100), 9);
    expect(report.idleCost).toBeCloseTo(instanceCost(h, on.get(t0) as string, 100), 9);
    const held = holdCost(h, on.get(t0) as string, 100);
    expect(jobDocument(h.r.store, h.r.store.getJob(jobId)!).coStart?.barrierIdleCost).toBeCloseTo(held, 9);
    expect(await barrierIdleMetric(h)).toBeCloseTo(held, 9);
  });

  it('counts a hold that the loss of its instance ends as idle, not the job’s, and in the barrier-idle cost', async () => {
    const h = harness();
    const { jobId, on } = await placedGang(h);
    const [t0, t1] = [`${jobId}.0`, `${jobId}.1`];
    const lost = on.get(t0) as string;
    beat(h, lost, [ready(t0)]);
    h.r.clock.advance(100);
    beat(h, lost, [ready(t0)]);
    // Terminated behind the controller's back: the next comparison with the cloud finds it gone.
    await h.r.cloud.terminate([h.r.store.getInstance(lost)?.cloudId as string]);
    await h.r.controller.recover();
    expect(h.r.store.getInstance(lost)?.state).toBe('terminated');
    expect(h.r.store.getJob(jobId)?.state).toBe('queued');
    expect(h.r.store.listTasks({ jobId }).map((t) => t.state)).toEqual(['pending', 'pending']);
    // t0's hold is idle; t1's preparation, cut short, the job's.
    expect(jobCost(h, jobId)).toBeCloseTo(instanceCost(h, on.get(t1) as string, 100), 9);
    const held = holdCost(h, lost, 100);
    expect(jobDocument(h.r.store, h.r.store.getJob(jobId)!).coStart?.barrierIdleCost).toBeCloseTo(held, 9);
    expect(await barrierIdleMetric(h)).toBeCloseTo(held, 9);
  });

  it('counts the barrier-idle cost of a hold a co-start timeout ends in /metrics as it ends, and once', async () => {
    const h = harness();
    const { jobId, on } = await placedGang(h);
    const t0 = `${jobId}.0`;
    beat(h, on.get(t0) as string, [ready(t0)]);
    h.r.clock.advance(TIMEOUT);
    beat(h, on.get(t0) as string, [ready(t0)]);
    await h.r.controller.reconcile();
    expect(h.r.store.getJob(jobId)?.state).toBe('queued');
    const held = holdCost(h, on.get(t0) as string, TIMEOUT);
    expect(await barrierIdleMetric(h)).toBeCloseTo(held, 9);
    // Placed again and released at once: the measured start shows the earlier hold, the metric does not add it again.
    await h.r.controller.runRound();
    await h.r.controller.reconcile();
    for (const t of h.r.store.listTasks({ jobId })) beat(h, t.instanceId as string, [ready(t.id)]);
    await h.r.controller.reconcile();
    for (const t of h.r.store.listTasks({ jobId })) beat(h, t.instanceId as string, [running(t.id)]);
    expect(h.measured).toHaveLength(1);
    expect(h.measured[0]?.barrierIdleCost).toBeCloseTo(held, 9);
    expect(await barrierIdleMetric(h)).toBeCloseTo(held, 9);
  });

  it('counts a measured start once its heartbeat committed, and once when that commit failed', async () => {
    const store = new FailingCommitStore();
    const h = harness(store, store.clock);
    const { jobId, on } = await placedGang(h);
    const [t0, t1] = [`${jobId}.0`, `${jobId}.1`];
    beat(h, on.get(t0) as string, [ready(t0)]);
    beat(h, on.get(t1) as string, [ready(t1)]);
    await h.r.controller.reconcile();
    beat(h, on.get(t0) as string, [running(t0)]);
    // The heartbeat that measures the start does not commit: nothing of it is kept, so nothing is counted.
    store.failNextCommit = true;
    expect(() => beat(h, on.get(t1) as string, [running(t1)])).toThrow(/commit failed/);
    expect(h.measured).toEqual([]);
    expect(jobDocument(h.r.store, h.r.store.getJob(jobId)!).coStart?.startSkewSeconds).toBeUndefined();
    // The worker reports again: the start is measured and counted, once.
    beat(h, on.get(t1) as string, [running(t1)]);
    expect(h.measured).toHaveLength(1);
    expect(await h.metrics.registry.metrics()).toMatch(/^fleetwise_job_start_skew_seconds_count 1$/m);
  });

  it('counts the barrier-idle cost of a hold a cancel ends in /metrics, once', async () => {
    const h = harness();
    const { jobId, on } = await placedGang(h);
    const [t0, t1] = [`${jobId}.0`, `${jobId}.1`];
    beat(h, on.get(t0) as string, [ready(t0)]);
    h.r.clock.advance(100);
    beat(h, on.get(t0) as string, [ready(t0)]);
    h.r.controller.cancel(jobId);
    const held = holdCost(h, on.get(t0) as string, 100);
    expect(await barrierIdleMetric(h)).toBeCloseTo(held, 9);
    // The workers hear the stops, then report the tasks gone: the stops complete, and nothing more is counted.
    await h.r.controller.reconcile();
    beat(h, on.get(t0) as string, [ready(t0)]);
    beat(h, on.get(t1) as string, []);
    beat(h, on.get(t0) as string, []);
    beat(h, on.get(t1) as string, []);
    await h.r.controller.reconcile();
    expect(h.r.store.listTasks({ jobId }).map((t) => t.state)).toEqual(['stopped', 'stopped']);
    expect(await barrierIdleMetric(h)).toBeCloseTo(held, 9);
  });
});

describe('co-start barrier: a start after a release in the same attempt', () => {
  /**
   * A gang released and run for two hours; then its second task's instance is lost and the job is placed whole again,
   * its first task back on the instance it ran on (stopped there and started anew). Returns the job, its tasks, the
   * first task's instance, and when it was first ready. The first task is held `heldFirstSeconds` before its sibling
   * is ready at the first start.
   */
  async function releasedThenPlacedAgain(
    h: Harness,
    heldFirstSeconds = 0,
  ): Promise<{
    jobId: string;
    t0: string;
    t1: string;
    kept: string;
    firstReadyAt: number;
  }> {
    const { jobId, on } = await placedGang(h);
    const [t0, t1] = [`${jobId}.0`, `${jobId}.1`];
    const kept = on.get(t0) as string;
    const firstReadyAt = h.r.clock.nowSeconds();
    beat(h, kept, [ready(t0)]);
    if (heldFirstSeconds > 0) {
      h.r.clock.advance(heldFirstSeconds);
      beat(h, kept, [ready(t0)]);
    }
    beat(h, on.get(t1) as string, [ready(t1)]);
    await h.r.controller.reconcile();
    expect(h.r.store.listTasks({ jobId }).map((t) => t.state)).toEqual(['running', 'running']);
    // A released hold's readiness is of that start only: the record keeps none of it.
    expect(readyIn(h, jobId)).toEqual({});
    beat(h, kept, [running(t0)]);
    beat(h, on.get(t1) as string, [running(t1)]);
    expect(h.measured).toHaveLength(1);
    h.r.clock.advance(7200);
    await h.r.cloud.terminate([h.r.store.getInstance(on.get(t1) as string)?.cloudId as string]);
    await h.r.controller.recover();
    expect(h.r.store.getJob(jobId)?.state).toBe('queued');
    await h.r.controller.runRound();
    await h.r.controller.reconcile();
    registerAll(h);
    // t0's worker hears the stop and reports it gone: the stop completes, t0 starts anew where it was.
    beat(h, kept, [running(t0)]);
    await h.r.controller.reconcile();
    beat(h, kept, []);
    await h.r.controller.reconcile();
    expect(h.r.store.getTask(t0)).toMatchObject({ state: 'starting', instanceId: kept });
    expect(h.r.store.getTask(t1)?.state).toBe('starting');
    return { jobId, t0, t1, kept, firstReadyAt };
  }

  it('neither re-plans at once nor bills the running time as held, and does not lengthen the timeout', async () => {
    const h = harness();
    const { jobId, t0, kept } = await releasedThenPlacedAgain(h);
    await h.r.controller.reconcile();
    expect(h.r.store.getJob(jobId)?.state).toBe('starting');
    expect(await barrierIdleMetric(h)).toBe(0);
    // t0 prepared anew: the barrier times out after the timeout from then, once, and bills that wait alone.
    beat(h, kept, [ready(t0)]);
    h.r.clock.advance(TIMEOUT - 1);
    beat(h, kept, [ready(t0)]);
    await h.r.controller.reconcile();
    expect(h.r.store.getJob(jobId)?.state).toBe('starting');
    h.r.clock.advance(1);
    beat(h, kept, [ready(t0)]);
    await h.r.controller.reconcile();
    expect(h.r.store.getJob(jobId)?.state).toBe('queued');
    expect(await barrierIdleMetric(h)).toBeCloseTo(holdCost(h, kept, TIMEOUT), 9);
    expect(h.r.store.getValue(`coStart.${jobId}`)).toMatchObject({ replans: 1 });
  });

  it('counts for nothing a readiness the record holds from before its task’s current start', async () => {
    const h = harness();
    const { jobId, t0, t1, kept, firstReadyAt } = await releasedThenPlacedAgain(h);
    // The readiness of t0's first start, on this same instance, as a controller that kept it at the release left it.
    const record = h.r.store.getValue(`coStart.${jobId}`) as Record<string, unknown>;
    h.r.store.setValue(`coStart.${jobId}`, {
      ...record,
      ready: { [t0]: { instanceId: kept, sinceSeconds: firstReadyAt, costPerHour: 1 } },
    });
    await h.r.controller.reconcile();
    // Not a re-plan "7200 s after the first was ready", nor two hours of it billed, nor a longer next timeout.
    expect(h.r.store.getJob(jobId)?.state).toBe('starting');
    expect(await barrierIdleMetric(h)).toBe(0);
    expect(readyIn(h, jobId)).toEqual({});
    expect((h.r.store.getValue(`coStart.${jobId}`) as { replans?: number }).replans).toBeUndefined();
    // Nor does it release the job: t1 ready alone waits for t0 to be prepared again.
    const booting = h.r.store.getTask(t1)?.instanceId as string;
    beat(h, booting, [ready(t1)]);
    await h.r.controller.reconcile();
    expect(h.r.store.listTasks({ jobId }).map((t) => t.state)).toEqual(['starting', 'starting']);
    // Prepared again 30 s later: released, and the measured start bills those 30 s of t1's hold, not the run before.
    h.r.clock.advance(30);
    beat(h, booting, [ready(t1)]);
    beat(h, kept, [ready(t0)]);
    await h.r.controller.reconcile();
    expect(h.r.store.listTasks({ jobId }).map((t) => t.state)).toEqual(['running', 'running']);
    beat(h, kept, [running(t0)]);
    beat(h, booting, [running(t1)]);
    expect(h.measured).toHaveLength(2);
    expect(h.measured[1]?.barrierIdleCost).toBeCloseTo(holdCost(h, booting, 30), 9);
  });
  it('says which start its figures are of, and what all its starts cost together, as /metrics counted them', async () => {
    const h = harness();
    const { jobId, t0, t1, kept } = await releasedThenPlacedAgain(h, 20);
    const first = holdCost(h, kept, 20);
    expect(h.measured[0]?.barrierIdleCost).toBeCloseTo(first, 9);
    const booting = h.r.store.getTask(t1)?.instanceId as string;
    // The second start: t1 held 40 s for t0.
    beat(h, booting, [ready(t1)]);
    h.r.clock.advance(40);
    beat(h, booting, [ready(t1)]);
    beat(h, kept, [ready(t0)]);
    await h.r.controller.reconcile();
    beat(h, kept, [running(t0)]);
    beat(h, booting, [running(t1)]);
    expect(h.measured).toHaveLength(2);
    const second = holdCost(h, booting, 40);
    const view = jobDocument(h.r.store, h.r.store.getJob(jobId)!).coStart;
    expect(view).toMatchObject({ start: 2, starts: 2, startSkewSeconds: 0 });
    expect(view?.barrierIdleCost).toBeCloseTo(second, 9);
    expect(view?.totalBarrierIdleCost).toBeCloseTo(first + second, 9);
    expect(view?.totalBarrierIdleCost).toBeCloseTo(await barrierIdleMetric(h), 9);
    const shown = view === null ? null : { ...view, readyTaskIds: [...view.readyTaskIds] };
    expect(coStartLines(shown, 2).slice(1)).toEqual([
      `start skew 0.0 s, barrier-idle $${second.toFixed(4)} (start 2 of 2)`,
      `barrier-idle $${(first + second).toFixed(4)} in all (2 starts and any holds that ended without one)`,
    ]);
    // The job ends: the figures and the totals stay.
    h.r.controller.cancel(jobId);
    expect(jobDocument(h.r.store, h.r.store.getJob(jobId)!).coStart).toEqual({ ...view, readyTaskIds: [] });
  });

  it('counts a hold after the move that the job’s end cuts short, in /metrics and its barrier-idle cost, once', async () => {
    const h = harness();
    const { jobId, t0, t1, kept } = await releasedThenPlacedAgain(h);
    const first = jobDocument(h.r.store, h.r.store.getJob(jobId)!).coStart?.barrierIdleCost ?? 0;
    beat(h, kept, [ready(t0)]);
    h.r.clock.advance(100);
    beat(h, kept, [ready(t0)]);
    await h.r.controller.reconcile();
    // Held again after the earlier release: `fleetwise job` says so, not that the tasks were released.
    const view = jobDocument(h.r.store, h.r.store.getJob(jobId)!).coStart;
    expect(view).toMatchObject({ readyTaskIds: [t0], releasedAtSeconds: expect.any(Number) });
    const shown = view === null ? null : { ...view, readyTaskIds: [...view.readyTaskIds] };
    expect(coStartLines(shown, 2)[0]).toBe('co-start   1 of 2 tasks ready, held for the others');
    h.r.controller.cancel(jobId);
    const held = holdCost(h, kept, 100);
    expect(await barrierIdleMetric(h)).toBeCloseTo(held, 9);
    expect(jobDocument(h.r.store, h.r.store.getJob(jobId)!).coStart?.barrierIdleCost).toBeCloseTo(
      first + held,
      9,
    );
    // The stops complete: nothing more is counted.
    const booting = h.r.store.getTask(t1)?.instanceId as string;
    await h.r.controller.reconcile();
    beat(h, kept, [ready(t0)]);
    beat(h, booting, []);
    beat(h, kept, []);
    beat(h, booting, []);
    await h.r.controller.reconcile();
    expect(h.r.store.listTasks({ jobId }).map((t) => t.state)).toEqual(['stopped', 'stopped']);
    expect(await barrierIdleMetric(h)).toBeCloseTo(held, 9);
    expect(jobDocument(h.r.store, h.r.store.getJob(jobId)!).coStart?.barrierIdleCost).toBeCloseTo(
      first + held,
      9,
    );
  });
});

describe('co-start records of older controllers', () => {
  it('loads a released record that kept its readiness and measures its start from it', () => {
    const h = harness();
    const job = h.r.controller.submit(jobSpec('gang', CPU_SMALL, { replicas: 2 }), 'research');
    const [t0, t1] = [`${job.id}.0`, `${job.id}.1`];
    // Released at 1000, t0 held since 970: older controllers left the readiness in `ready`, with no heldSinceSeconds.
    h.r.store.setValue(`coStart.${job.id}`, {
      attempt: 1,
      ready: {
        [t0]: { instanceId: 'inst-1', sinceSeconds: 970, costPerHour: 0.1 },
        [t1]: { instanceId: 'inst-2', sinceSeconds: 1000, costPerHour: 0.1 },
      },
      releasedAtSeconds: 1000,
      running: { [t0]: 1001, [t1]: 1002 },
    });
    const record = readCoStart(h.r.store, h.r.store.getJob(job.id)!);
    expect(record.releasedAtSeconds).toBe(1000);
    const placed = [t0, t1].map((taskId) => ({ taskId, demand: CPU_SMALL, typeName: 'c7i.xlarge' }));
    const type = catalog.types.find((t) => t.name === 'c7i.xlarge')!;
    const share = Math.max(4 / type.capacity[1], 8 / type.capacity[2]);
    expect(startMetrics(record, placed, catalog)).toEqual({
      startSkewSeconds: 1,
      barrierIdleCost: expect.closeTo((30 * share * type.costPerHour) / 3600, 9) as number,
    });
  });

  it('does not bill the released readiness an older record kept as a hold when the job ends', async () => {
    const h = harness();
    const job = h.r.controller.submit(jobSpec('gang', CPU_SMALL, { replicas: 2 }), 'research');
    const [t0, t1] = [`${job.id}.0`, `${job.id}.1`];
    const now = h.r.clock.nowSeconds();
    h.r.store.setValue(`coStart.${job.id}`, {
      attempt: 1,
      ready: {
        [t0]: { instanceId: 'inst-1', sinceSeconds: now - 3630, costPerHour: 0.1 },
        [t1]: { instanceId: 'inst-2', sinceSeconds: now - 3600, costPerHour: 0.1 },
      },
      releasedAtSeconds: now - 3600,
      running: { [t0]: now - 3599, [t1]: now - 3598 },
      startSkewSeconds: 1,
      barrierIdleCost: 0.002,
    });
    h.r.controller.cancel(job.id);
    expect(await barrierIdleMetric(h)).toBe(0);
    // Its one measured start is numbered, and is all it counted.
    expect(jobDocument(h.r.store, h.r.store.getJob(job.id)!).coStart).toEqual({
      readyTaskIds: [],
      releasedAtSeconds: now - 3600,
      startSkewSeconds: 1,
      barrierIdleCost: 0.002,
      start: 1,
      starts: 1,
      totalBarrierIdleCost: 0.002,
    });
  });
});
