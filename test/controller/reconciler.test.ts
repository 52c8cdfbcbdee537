import { describe, expect, it } from 'vitest';
import { InjectedCrash } from '../../src/controller/faults.js';
import type { TaskControl, TaskStartRequest, TaskStopRequest } from '../../src/controller/seams.js';
import { buildSnapshot, readSnapshotInputs } from '../../src/controller/snapshot.js';
import { readCoStart, writeCoStart } from '../../src/controller/co-start-records.js';
import type { LaunchRequest, LaunchResult } from '../../src/cloud/provider.js';
import { computeCostReport } from '../../src/controller/cost-accounting.js';
import {
  catalog,
  CPU_SMALL,
  CrashAt,
  FakeCloud,
  handPlan,
  jobSpec,
  reconcilerFor,
  rig,
} from './controller-fixtures.js';

/** Task control whose stops can be held "checkpointing", recording every call. */
class ScriptedTaskControl implements TaskControl {
  readonly name = 'scripted';
  stopOutcome: 'stopped' | 'pending' = 'stopped';
  readonly calls: string[] = [];
  async start(r: TaskStartRequest): Promise<void> {
    this.calls.push(`start ${r.task.id} on ${r.instance.id}`);
  }
  async stop(r: TaskStopRequest): Promise<'stopped' | 'pending'> {
    this.calls.push(
      `stop ${r.task.id} on ${r.instance.id}${r.checkpoint ? ' (checkpoint)' : ''}: ${this.stopOutcome}`,
    );
    return this.stopOutcome;
  }
  async status(): Promise<'running'> {
    return 'running';
  }
}

/** The same, holding the starts of multi-task jobs for the co-start barrier (as WorkerTaskControl with coStart). */
class HoldingTaskControl extends ScriptedTaskControl {
  readonly holdsStarts = true;
}

describe('reconciler: plans into intents into effects', () => {
  /** Job A runs alone on inst-1 (c7i.xlarge); job B is queued. */
  async function twoJobs(control: ScriptedTaskControl) {
    const r = rig({}, { tasks: control });
    const a = r.controller.submit(jobSpec('a', CPU_SMALL), 'research');
    await r.controller.runRound();
    const b = r.controller.submit(jobSpec('b', CPU_SMALL), 'research');
    return { r, a, b };
  }

  it('moves a job by checkpoint-stop then start, and starts another job only once the mover has left', async () => {
    const control = new ScriptedTaskControl();
    const { r, a, b } = await twoJobs(control);
    const reconciler = reconcilerFor(r, control);
    const { plan, diff } = handPlan(r, {
      instances: [
        { id: 'new-1', typeName: 'c7i.2xlarge', isNew: true, taskIds: [`${a.id}.0`] },
        { id: 'inst-1', typeName: 'c7i.xlarge', isNew: false, taskIds: [`${b.id}.0`] },
      ],
    });
    const applied = reconciler.applyPlan(plan, diff);
    expect(applied.launched.get('new-1')).toBe('inst-2');
    // The move counts once its task is reported stopped off inst-1, not when it is planned.
    expect(r.store.getJob(a.id)).toMatchObject({ state: 'migrating', migrations: 0 });
    expect(r.store.getTask(`${a.id}.0`)).toMatchObject({ state: 'checkpointing', instanceId: 'inst-1' });
    expect(r.store.getTask(`${b.id}.0`)).toMatchObject({ state: 'starting', instanceId: 'inst-1' });
    expect(r.store.getRound(applied.round)?.configuration.instances.map((i) => i.id)).toEqual([
      'inst-2',
      'inst-1',
    ]);
    // While it moves, the scheduler sees the job pinned at its destination (where it will need capacity).
    const during = buildSnapshot(readSnapshotInputs(r.store, r.clock.nowSeconds()));
    expect(during.jobs.find((j) => j.id === a.id)?.reconfigurable).toBe(false);
    expect(during.tasks.find((t) => t.id === `${a.id}.0`)?.instanceId).toBe('inst-2');
    expect(during.instances.map((i) => [i.id, i.taskIds])).toEqual([
      ['inst-1', [`${b.id}.0`]],
      ['inst-2', [`${a.id}.0`]],
    ]);

    // The checkpoint takes a while: nothing may start on inst-1, and A waits for its own stop.
    control.stopOutcome = 'pending';
    control.calls.length = 0;
    await reconciler.progress();
    expect(control.calls).toEqual([`stop ${a.id}.0 on inst-1 (checkpoint): pending`]);
    expect(r.store.getJob(a.id)?.migrations).toBe(0);
    expect(r.store.getInstance('inst-2')?.state).toBe('running');
    expect(r.store.getTask(`${b.id}.0`)?.state).toBe('starting');

    control.stopOutcome = 'stopped';
    control.calls.length = 0;
    await reconciler.progress();
    expect(control.calls).toEqual([
      `stop ${a.id}.0 on inst-1 (checkpoint): stopped`,
      `start ${a.id}.0 on inst-2`,
      `start ${b.id}.0 on inst-1`,
    ]);
    expect(r.store.getTask(`${a.id}.0`)).toMatchObject({ state: 'running', instanceId: 'inst-2' });
    expect(r.store.getJob(a.id)).toMatchObject({ state: 'running', migrations: 1 });
    expect(r.store.getJob(b.id)?.state).toBe('running');
    const aStates = r.store
      .listEvents({ jobId: a.id, kind: 'job.state' })
      .map((e) => (e.data as { to: string }).to);
    expect(aStates).toEqual(['starting', 'running', 'migrating', 'starting', 'running']);
    expect(r.store.listIntents({ states: ['pending'] })).toEqual([]);
  });

  it('returns a job to the queue when the plan leaves it out', async () => {
    const control = new ScriptedTaskControl();
    const { r, a } = await twoJobs(control);
    const reconciler = reconcilerFor(r, control);
    const { plan, diff } = handPlan(r, { instances: [] });
    reconciler.applyPlan(plan, diff);
    expect(r.store.getInstance('inst-1')?.state).toBe('draining');
    await reconciler.progress();
    expect(r.store.getJob(a.id)?.state).toBe('queued');
    expect(r.store.getTask(`${a.id}.0`)?.state).toBe('stopped');
    expect(r.store.getTask(`${a.id}.0`)?.instanceId).toBeUndefined();
    expect(r.store.getInstance('inst-1')?.state).toBe('terminated');
    expect(r.cloud.live()).toEqual([]);
  });

  it('records nothing when it crashes before the round commits', async () => {
    const control = new ScriptedTaskControl();
    const r = rig({}, { tasks: control });
    r.controller.submit(jobSpec('a', CPU_SMALL), 'research');
    const reconciler = reconcilerFor(r, control, { faults: new CrashAt('round:planned') });
    const { plan, diff } = handPlan(r, {
      instances: [{ id: 'new-1', typeName: 'c7i.xlarge', isNew: true, taskIds: ['job-1.0'] }],
    });
    expect(() => reconciler.applyPlan(plan, diff)).toThrow(InjectedCrash);
    expect(r.store.latestRound()).toBeUndefined();
    expect(r.store.listInstances()).toEqual([]);
    expect(r.store.listIntents()).toEqual([]);
    expect(r.store.getJob('job-1')?.state).toBe('queued');
  });

  it('repeats a stop whose outcome was not recorded, and converges', async () => {
    const control = new ScriptedTaskControl();
    const { r, a } = await twoJobs(control);
    r.controller.cancel(a.id);
    const crashing = reconcilerFor(r, control, { faults: new CrashAt('stop:after-call') });
    await expect(crashing.progress()).rejects.toThrow(InjectedCrash);
    expect(r.store.getTask(`${a.id}.0`)?.state).toBe('running'); // stopped on the instance, not yet recorded
    const restarted = reconcilerFor(r, control);
    await restarted.syncWithCloud();
    await restarted.progress();
    expect(control.calls.filter((c) => c.startsWith('stop'))).toEqual([
      `stop ${a.id}.0 on inst-1: stopped`,
      `stop ${a.id}.0 on inst-1: stopped`,
    ]);
    expect(r.store.getTask(`${a.id}.0`)?.state).toBe('stopped');
    expect(r.store.listIntents({ states: ['pending'] })).toEqual([]);
  });

  it('requeues a moving job whose destination vanished, and frees its other starts', async () => {
    const control = new ScriptedTaskControl();
    const { r, a } = await twoJobs(control);
    const reconciler = reconcilerFor(r, control);
    const { plan, diff } = handPlan(r, {
      instances: [{ id: 'new-1', typeName: 'c7i.2xlarge', isNew: true, taskIds: [`${a.id}.0`] }],
    });
    reconciler.applyPlan(plan, diff);
    control.stopOutcome = 'pending';
    await reconciler.progress(); // inst-2 launched; A still checkpointing
    const destination = r.store.getInstance('inst-2')?.cloudId as string;
    await r.cloud.terminate([destination]);
    r.clock.advance(61);
    await reconciler.syncWithCloud();
    expect(r.store.getInstance('inst-2')?.state).toBe('terminated');
    expect(r.store.listIntents({ states: ['pending'], kind: 'start-task' })).toEqual([]);
    control.stopOutcome = 'stopped';
    await reconciler.progress();
    expect(r.store.getJob(a.id)?.state).toBe('queued');
    expect(r.store.getTask(`${a.id}.0`)?.state).toBe('stopped');
    expect(r.store.getTask(`${a.id}.0`)?.instanceId).toBeUndefined();
  });

  it('a start whose job is cancelled while the start call is under way leaves the other starts recorded', async () => {
    // A task control whose start waits on the worker: the cancel lands in between and fails the start's intent.
    class SlowStart extends ScriptedTaskControl {
      onStart: ((taskId: string) => void) | undefined;
      override async start(request: TaskStartRequest): Promise<void> {
        await super.start(request);
        await new Promise((resolve) => setImmediate(resolve));
        this.onStart?.(request.task.id);
      }
    }
    const control = new SlowStart();
    const r = rig({}, { tasks: control });
    const a = r.controller.submit(jobSpec('a', CPU_SMALL), 'research');
    const b = r.controller.submit(jobSpec('b', CPU_SMALL), 'research');
    control.onStart = (taskId) => {
      if (taskId === `${a.id}.0`) r.controller.cancel(a.id);
    };
    await r.controller.runRound(); // launches
    await r.controller.runRound(); // starts both
    expect(control.calls.filter((c) => c.startsWith('start'))).toHaveLength(2);
    expect(r.store.getJob(a.id)?.state).toBe('cancelled');
    expect(r.store.getTask(`${b.id}.0`)?.state).toBe('running');
  });

  it('bills an instance whose launch returned after a drain dropped it, until its terminate', async () => {
    // RunInstances answers only when the test lets it: the drain lands while the launch is in flight.
    class SlowLaunchCloud extends FakeCloud {
      release: (() => void) | undefined;
      override async launch(input: LaunchRequest): Promise<LaunchResult> {
        await new Promise<void>((resolve) => (this.release = resolve));
        return super.launch(input);
      }
    }
    const cloud = new SlowLaunchCloud();
    const control = new ScriptedTaskControl();
    const r = rig({}, { tasks: control, cloud });
    r.controller.submit(jobSpec('a', CPU_SMALL), 'research');
    const round = r.controller.runRound();
    while (cloud.release === undefined) await new Promise((resolve) => setImmediate(resolve));
    expect(r.controller.drain('inst-1').state).toBe('terminating');
    r.clock.advance(2);
    const launchedAt = r.clock.nowSeconds();
    cloud.refuseTerminations = Number.MAX_SAFE_INTEGER; // its terminate keeps failing for a while
    cloud.release();
    await round;
    // Kept terminating (the drain stands), with the cloud id the launch brought and the time it came.
    expect(r.store.getInstance('inst-1')).toMatchObject({
      state: 'terminating',
      cloudId: cloud.live()[0]?.id,
      launchedAtSeconds: launchedAt,
    });
    // The terminate goes through ten minutes later; it is billed for those minutes.
    r.clock.advance(600);
    cloud.refuseTerminations = 0;
    await reconcilerFor(r, control).progress();
    expect(r.store.getInstance('inst-1')?.state).toBe('terminated');
    expect(cloud.live()).toEqual([]);
    const line = computeCostReport(r.store, catalog, r.clock.nowSeconds()).byInstance.find(
      (l) => l.id === 'inst-1',
    );
    expect(line?.billedSeconds).toBeGreaterThanOrEqual(600);
    expect(line?.cost).toBeGreaterThan(0);
  });

  it('stops the tasks of a job that another writer ended, so its instance can go', async () => {
    const control = new ScriptedTaskControl();
    const r = rig({}, { tasks: control });
    const a = r.controller.submit(jobSpec('a', CPU_SMALL), 'research');
    await r.controller.runRound();
    r.store.setJobState(a.id, 'cancelled', 'ended elsewhere');
    await r.controller.runRound();
    expect(r.store.getTask(`${a.id}.0`)?.state).toBe('stopped');
    expect(r.store.getInstance('inst-1')?.state).toBe('terminated');
  });

  it('a co-started task started again on the instance it was ready on before waits to be prepared again', async () => {
    const control = new HoldingTaskControl();
    const r = rig({ coStartTimeoutSeconds: 600 }, { tasks: control });
    const gang = r.controller.submit(jobSpec('gang', CPU_SMALL, { replicas: 2 }), 'research');
    const [t0, t1] = [`${gang.id}.0`, `${gang.id}.1`];
    const reconciler = reconcilerFor(r, control);
    const first = handPlan(r, {
      instances: [
        { id: 'new-1', typeName: 'c7i.xlarge', isNew: true, taskIds: [t0] },
        { id: 'new-2', typeName: 'c7i.xlarge', isNew: true, taskIds: [t1] },
      ],
    });
    reconciler.applyPlan(first.plan, first.diff);
    await reconciler.progress(); // launched, then prepared: held until both are ready
    const ready = (taskId: string, instanceId: string) => {
      const job = r.store.getJob(gang.id)!;
      const record = readCoStart(r.store, job);
      writeCoStart(r.store, gang.id, {
        ...record,
        ready: { ...record.ready, [taskId]: { instanceId, sinceSeconds: r.clock.nowSeconds() } },
      });
    };
    ready(t0, 'inst-1');
    ready(t1, 'inst-2');
    await reconciler.progress();
    expect(r.store.getJob(gang.id)?.state).toBe('running');

    // An hour later the plan moves t1 to a new instance; the gang restarts, t0 where it was.
    r.clock.advance(3600);
    const move = handPlan(r, {
      instances: [
        { id: 'inst-1', typeName: 'c7i.xlarge', isNew: false, taskIds: [t0] },
        { id: 'new-3', typeName: 'c7i.xlarge', isNew: true, taskIds: [t1] },
      ],
    });
    reconciler.applyPlan(move.plan, move.diff);
    // t0's readiness on inst-1 was of the start before: it no longer counts.
    expect(readCoStart(r.store, r.store.getJob(gang.id)!).ready[t0]).toBeUndefined();
    await reconciler.progress(); // stopped, inst-3 launched: both starts prepare again
    await reconciler.progress();
    // Neither released (t0 has not been reported prepared since) nor planned again for an hour-old readiness.
    expect(r.store.getJob(gang.id)?.state).toBe('starting');
    expect(r.store.listTasks({ jobId: gang.id }).map((t) => [t.state, t.instanceId])).toEqual([
      ['starting', 'inst-1'],
      ['starting', 'inst-3'],
    ]);
    expect(r.store.listEvents({ jobId: gang.id, kind: 'job.co-start' }).map((e) => e.message)).toEqual([
      'released 2 task(s) together',
    ]);
    ready(t0, 'inst-1');
    ready(t1, 'inst-3');
    await reconciler.progress();
    expect(r.store.getJob(gang.id)?.state).toBe('running');
  });
});
