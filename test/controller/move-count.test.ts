import { describe, expect, it } from 'vitest';
import type { Reconciler } from '../../src/controller/reconciler.js';
import type {
  TaskControl,
  TaskStartRequest,
  TaskStatus,
  TaskStopRequest,
} from '../../src/controller/seams.js';
import type { TaskRecord } from '../../src/controller/state-store.js';
import { CPU_SMALL, handPlan, jobSpec, reconcilerFor, rig, type Rig } from './controller-fixtures.js';

/**
 * A job's move counts (its `migrations`, and fleetwise_migrations_total through `onMoveBegun`) exactly when a task of
 * it changes instance: once a worker reports stopped a task that leaves the instance it ran on. A multi-task job that
 * lost a host is restarted by the next plan, its surviving tasks checkpointed and started again where they ran beside
 * a replacement for the lost one: no task moved, nothing counts. Moved elsewhere instead, the job counts one move.
 */

/** Task control whose stops each task answers as set (default: stopped at once), recording every call. */
class ScriptedStops implements TaskControl {
  readonly name = 'scripted-stops';
  readonly calls: string[] = [];
  /** Tasks whose stop is still checkpointing. */
  readonly checkpointing = new Set<string>();
  readonly statuses = new Map<string, TaskStatus>();
  async start(r: TaskStartRequest): Promise<void> {
    this.calls.push(`start ${r.task.id} on ${r.instance.id}`);
  }
  async stop(r: TaskStopRequest): Promise<'stopped' | 'pending'> {
    this.calls.push(`stop ${r.task.id} on ${r.instance.id}`);
    return this.checkpointing.has(r.task.id) ? 'pending' : 'stopped';
  }
  async status(task: TaskRecord): Promise<TaskStatus> {
    return this.statuses.get(task.id) ?? 'running';
  }
}

interface GangOnTwoHosts {
  readonly r: Rig;
  readonly control: ScriptedStops;
  readonly reconciler: Reconciler;
  readonly jobId: string;
  readonly t0: string;
  readonly t1: string;
  readonly host0: string;
  readonly host1: string;
  /** Moves counted for the metric (`onMoveBegun`), job by job. */
  readonly metric: string[];
}

/** A two-task job running on two c7i.xlarge instances, one task on each. */
async function gangOnTwoHosts(makeBeforeBreak: boolean): Promise<GangOnTwoHosts> {
  const control = new ScriptedStops();
  const r = rig({}, { tasks: control });
  const gang = r.controller.submit(jobSpec('gang', CPU_SMALL, { replicas: 2 }), 'research');
  const [t0, t1] = [`${gang.id}.0`, `${gang.id}.1`];
  await r.controller.runRound();
  const host0 = r.store.getTask(t0)?.instanceId as string;
  const host1 = r.store.getTask(t1)?.instanceId as string;
  expect(host0).not.toBe(host1);
  expect(r.store.getJob(gang.id)).toMatchObject({ state: 'running', migrations: 0 });
  const metric: string[] = [];
  const reconciler = reconcilerFor(r, control, {
    settings: { makeBeforeBreak },
    onMoveBegun: (jobId) => metric.push(jobId),
  });
  control.calls.length = 0;
  return { r, control, reconciler, jobId: gang.id, t0, t1, host0, host1, metric };
}

/** EC2 takes `host` back: the controller finds it gone, loses the task there and puts the job back in the queue. */
async function lose(g: GangOnTwoHosts, host: string): Promise<void> {
  await g.r.cloud.terminate([g.r.store.getInstance(host)?.cloudId as string]);
  g.r.clock.advance(61); // past the vanish grace
  await g.reconciler.syncWithCloud();
  expect(g.r.store.getInstance(host)?.state).toBe('terminated');
}

/** Carry the plan out: launches, stops, starts, until every task of the job runs again. */
async function carryOut(g: GangOnTwoHosts): Promise<void> {
  for (let pass = 0; pass < 4; pass++) {
    await g.reconciler.progress();
    await g.reconciler.syncWithCloud();
  }
  for (const t of [g.t0, g.t1]) expect(g.r.store.getTask(t)?.state).toBe('running');
  expect(g.r.store.getJob(g.jobId)?.state).toBe('running');
}

describe('counting moves: exactly when a task changes instance', () => {
  for (const makeBeforeBreak of [false, true]) {
    const mbb = `make before break ${makeBeforeBreak ? 'on' : 'off'}`;

    it(`${mbb}: one host of a two-task job lost, its survivor restarted in place beside the replacement counts nothing`, async () => {
      const g = await gangOnTwoHosts(makeBeforeBreak);
      await lose(g, g.host1);
      expect(g.r.store.getJob(g.jobId)?.state).toBe('queued');
      expect(g.r.store.getTask(g.t0)).toMatchObject({ state: 'running', instanceId: g.host0 });
      const { plan, diff } = handPlan(g.r, {
        instances: [
          { id: g.host0, typeName: 'c7i.xlarge', isNew: false, taskIds: [g.t0] },
          { id: 'new-1', typeName: 'c7i.xlarge', isNew: true, taskIds: [g.t1] },
        ],
      });
      // The job restarts whole from its checkpoint: its survivor is checkpointed and started again on host0.
      expect(diff.actions.filter((a) => a.kind === 'checkpoint-stop')).toMatchObject([
        { taskId: g.t0, instanceId: g.host0, then: 'move' },
      ]);
      const to = g.reconciler.applyPlan(plan, diff).launched.get('new-1') as string;
      await carryOut(g);
      expect(g.control.calls).toContain(`stop ${g.t0} on ${g.host0}`);
      expect(g.control.calls).toContain(`start ${g.t0} on ${g.host0}`);
      expect(g.r.store.getTask(g.t1)?.instanceId).toBe(to);
      expect(g.r.store.getJob(g.jobId)?.migrations).toBe(0);
      expect(g.metric).toEqual([]);
      expect(g.r.store.getValue(`reconcile.move.${g.jobId}.uncounted`)).toBeUndefined();
    });

    it(`${mbb}: one host of a two-task job lost, its survivor moved elsewhere counts one move`, async () => {
      const g = await gangOnTwoHosts(makeBeforeBreak);
      await lose(g, g.host1);
      const { plan, diff } = handPlan(g.r, {
        instances: [{ id: 'new-1', typeName: 'c7i.2xlarge', isNew: true, taskIds: [g.t0, g.t1] }],
      });
      const to = g.reconciler.applyPlan(plan, diff).launched.get('new-1') as string;
      await carryOut(g);
      expect(g.control.calls).toContain(`stop ${g.t0} on ${g.host0}`);
      for (const t of [g.t0, g.t1]) expect(g.r.store.getTask(t)?.instanceId).toBe(to);
      expect(g.r.store.getJob(g.jobId)?.migrations).toBe(1);
      expect(g.metric).toEqual([g.jobId]);
    });
  }

  it('a move counts at the stop of the task that leaves its instance, not at a sibling restarted in place', async () => {
    const g = await gangOnTwoHosts(false);
    // host1 is drained: t1 moves to a new instance; t0, on host0, restarts in place once both have stopped.
    g.r.controller.drain(g.host1);
    const { plan, diff } = handPlan(g.r, {
      instances: [
        { id: g.host0, typeName: 'c7i.xlarge', isNew: false, taskIds: [g.t0] },
        { id: 'new-1', typeName: 'c7i.xlarge', isNew: true, taskIds: [g.t1] },
      ],
    });
    g.control.checkpointing.add(g.t1);
    g.reconciler.applyPlan(plan, diff);
    expect(g.r.store.getJob(g.jobId)).toMatchObject({ state: 'migrating', migrations: 0 });
    await g.reconciler.progress();
    // t0 stopped, to start here again once t1 has stopped; t1 still checkpointing: nothing has moved yet.
    expect(g.control.calls).toContain(`stop ${g.t0} on ${g.host0}`);
    expect(g.r.store.getTask(g.t0)).toMatchObject({ state: 'starting', instanceId: g.host0 });
    expect(g.r.store.getTask(g.t1)?.state).toBe('checkpointing');
    expect(g.r.store.getJob(g.jobId)?.migrations).toBe(0);
    expect(g.metric).toEqual([]);
    g.control.checkpointing.delete(g.t1);
    await carryOut(g);
    expect(g.r.store.getJob(g.jobId)?.migrations).toBe(1);
    expect(g.metric).toEqual([g.jobId]);
  });

  it('a move whose only leaving task ended as its stop reached it counts nothing, its sibling restarted in place', async () => {
    const g = await gangOnTwoHosts(true);
    g.r.controller.drain(g.host1);
    const { plan, diff } = handPlan(g.r, {
      instances: [
        { id: g.host0, typeName: 'c7i.xlarge', isNew: false, taskIds: [g.t0] },
        { id: 'new-1', typeName: 'c7i.xlarge', isNew: true, taskIds: [g.t1] },
      ],
    });
    g.reconciler.applyPlan(plan, diff);
    // Both stops go once the new instance is up; t1 had finished its part as its stop reached it.
    g.control.statuses.set(g.t1, 'succeeded');
    await g.reconciler.progress();
    await g.reconciler.syncWithCloud();
    await g.reconciler.progress();
    expect(g.control.calls).toContain(`stop ${g.t0} on ${g.host0}`);
    expect(g.control.calls).toContain(`stop ${g.t1} on ${g.host1}`);
    expect(g.r.store.getTask(g.t0)).toMatchObject({ state: 'running', instanceId: g.host0 });
    expect(g.r.store.getJob(g.jobId)?.migrations).toBe(0);
    expect(g.metric).toEqual([]);
    expect(g.r.store.getValue(`reconcile.move.${g.jobId}.uncounted`)).toBeUndefined();
  });
});
