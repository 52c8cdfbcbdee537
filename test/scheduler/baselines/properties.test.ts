import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { ClusterSnapshot, SchedJob, SchedTask } from '../../../src/core/model.js';
import { add, demandOn, fits, type FamilyDemand, type Resources } from '../../../src/core/resources.js';
import { KarpenterScheduler } from '../../../src/scheduler/baselines/karpenter.js';
import { OwlScheduler } from '../../../src/scheduler/baselines/owl.js';
import { StratusScheduler } from '../../../src/scheduler/baselines/stratus.js';
import { SynergyScheduler } from '../../../src/scheduler/baselines/synergy.js';
import type { Plan, Scheduler } from '../../../src/scheduler/types.js';
import { catalog } from './fixtures.js';

/** Demands seen in Eva's traces and workloads, including a per-family one (a3c: more vCPUs on P3). */
const DEMANDS: readonly FamilyDemand[] = [
  { any: [0, 1, 2] },
  { any: [0, 2, 4] },
  { any: [0, 1, 15] },
  { any: [0, 4, 8] },
  { any: [0, 8, 30] },
  { any: [0, 16, 64] },
  { any: [1, 4, 10] },
  { any: [1, 8, 30] },
  { any: [2, 8, 60] },
  { any: [4, 4, 10] },
  { p3: [0, 10, 8], c7i: [0, 4, 8], r7i: [0, 4, 8] },
  { any: [0, 0.5, 1] },
];
const KEYS = ['resnet18', 'sage', 'gcn', 'a3c'];
const TYPE_NAMES = catalog.types.map((t) => t.name);

const oracle = (target: string, others: readonly string[]) =>
  others.reduce((r, o) => r * (o === target ? 0.9 : 0.97), 1);

const taskArb = fc.record({
  demand: fc.integer({ min: 0, max: DEMANDS.length - 1 }),
  key: fc.integer({ min: 0, max: KEYS.length - 1 }),
  /** Instance slot to try committing to (≥ instance count = pending). */
  slot: fc.integer({ min: 0, max: 7 }),
});
const jobArb = fc.record({
  tasks: fc.array(taskArb, { minLength: 1, maxLength: 2 }),
  pinned: fc.boolean(),
  remainingSeconds: fc.option(fc.integer({ min: 1, max: 500_000 }), { nil: undefined }),
  noMove: fc.boolean(),
});
const snapshotArb = fc.record({
  instances: fc.array(
    fc.record({ type: fc.integer({ min: 0, max: TYPE_NAMES.length - 1 }), launching: fc.boolean() }),
    { maxLength: 6 },
  ),
  jobs: fc.array(jobArb, { minLength: 1, maxLength: 10 }),
  now: fc.integer({ min: 0, max: 10_000 }),
});

type SnapshotSpec = typeof snapshotArb extends fc.Arbitrary<infer T> ? T : never;

/** A consistent snapshot: committed tasks fit their instances, pinned jobs are fully committed. */
function build(spec: SnapshotSpec, maxPerInstance: number): ClusterSnapshot {
  const instances = spec.instances.map((i, n) => ({
    id: `i${n}`,
    type: catalog.types.find((t) => t.name === TYPE_NAMES[i.type]) ?? catalog.types[0],
    state: i.launching ? ('launching' as const) : ('running' as const),
    used: [0, 0, 0] as Resources,
    taskIds: [] as string[],
  }));
  const jobs: SchedJob[] = [];
  const tasks: SchedTask[] = [];
  spec.jobs.forEach((j, jn) => {
    const jobId = `j${jn}`;
    const ids: string[] = [];
    let allPlaced = true;
    j.tasks.forEach((t, tn) => {
      const id = `${jobId}-${tn}`;
      const demand = DEMANDS[t.demand] as FamilyDemand;
      const inst = instances[t.slot];
      let instanceId: string | undefined;
      if (inst !== undefined && inst.taskIds.length < maxPerInstance) {
        const d = demandOn(demand, inst.type?.family ?? '');
        if (d !== undefined && inst.type !== undefined && fits(add(inst.used, d), inst.type.capacity)) {
          inst.used = add(inst.used, d);
          inst.taskIds.push(id);
          instanceId = inst.id;
        }
      }
      if (instanceId === undefined) allPlaced = false;
      ids.push(id);
      tasks.push({ id, jobId, key: KEYS[t.key] as string, demand, instanceId });
    });
    jobs.push({
      id: jobId,
      taskIds: ids,
      reconfigurable: !(j.pinned && allPlaced),
      arrivalSeconds: jn * 60,
      runningSinceSeconds: j.noMove ? 0 : undefined,
      noMoveSeconds: j.noMove ? 3600 : undefined,
      migrationDelaySeconds: 30,
      expectedRemainingSeconds: j.remainingSeconds,
    });
  });
  return {
    nowSeconds: spec.now,
    jobs,
    tasks,
    instances: instances.map((i) => ({
      id: i.id,
      typeName: i.type?.name ?? '',
      state: i.state,
      taskIds: i.taskIds,
    })),
  };
}

function checkPlan(snap: ClusterSnapshot, plan: Plan, scheduler: Scheduler): void {
  const existing = new Map(snap.instances.map((i) => [i.id, i]));
  const placed = new Map<string, string>();
  const ids = new Set<string>();
  for (const inst of plan.configuration.instances) {
    expect(ids.has(inst.id), `duplicate instance id ${inst.id}`).toBe(false);
    ids.add(inst.id);
    if (inst.isNew) expect(inst.id).toMatch(/^new-\d+$/);
    else
      expect(existing.get(inst.id)?.typeName, `existing instance ${inst.id} keeps its type`).toBe(
        inst.typeName,
      );
    const type = catalog.types.find((t) => t.name === inst.typeName);
    expect(type, inst.typeName).toBeDefined();
    let used: Resources = [0, 0, 0];
    for (const id of inst.taskIds) {
      expect(placed.has(id), `task ${id} placed twice`).toBe(false);
      placed.set(id, inst.id);
      const task = snap.tasks.find((t) => t.id === id);
      expect(task, `unknown task ${id}`).toBeDefined();
      const d = demandOn((task as SchedTask).demand, type?.family ?? '');
      expect(d, `task ${id} cannot run on ${inst.typeName}`).toBeDefined();
      used = add(used, d as Resources);
    }
    expect(
      fits(used, type?.capacity ?? [0, 0, 0]),
      `${inst.id} (${inst.typeName}) over capacity: ${used.join(',')}`,
    ).toBe(true);
  }
  for (const t of snap.tasks) expect(placed.has(t.id), `task ${t.id} not placed`).toBe(true);
  for (const job of snap.jobs) {
    const stays =
      !job.reconfigurable ||
      (job.runningSinceSeconds !== undefined &&
        job.noMoveSeconds !== undefined &&
        snap.nowSeconds < job.runningSinceSeconds + job.noMoveSeconds);
    if (!stays) continue;
    for (const id of job.taskIds) {
      const before = snap.tasks.find((t) => t.id === id)?.instanceId;
      if (before !== undefined) expect(placed.get(id), `pinned task ${id} moved`).toBe(before);
    }
  }
  expect(plan.decision.chosen).toBe('baseline');
  expect(plan.decision.scheduler).toBe(scheduler.name);
}

const makers: readonly { name: string; make: () => Scheduler; maxPerInstance: number }[] = [
  { name: 'stratus', make: () => new StratusScheduler(catalog), maxPerInstance: 8 },
  { name: 'synergy', make: () => new SynergyScheduler(catalog), maxPerInstance: 8 },
  { name: 'owl', make: () => new OwlScheduler(catalog, oracle), maxPerInstance: 2 },
  { name: 'karpenter', make: () => new KarpenterScheduler(catalog), maxPerInstance: 8 },
  {
    name: 'karpenter-balanced',
    make: () => new KarpenterScheduler(catalog, { policy: 'Balanced' }),
    maxPerInstance: 8,
  },
  {
    name: 'karpenter-when-empty',
    make: () => new KarpenterScheduler(catalog, { policy: 'WhenEmpty' }),
    maxPerInstance: 8,
  },
];

describe('baseline scheduler invariants (fast-check)', () => {
  for (const { name, make, maxPerInstance } of makers) {
    it(`${name}: every task placed once, capacity respected, pinned jobs unmoved`, () => {
      fc.assert(
        fc.property(snapshotArb, (spec) => {
          const snap = build(spec, maxPerInstance);
          const scheduler = make();
          const plan = scheduler.plan(snap);
          checkPlan(snap, plan, scheduler);
          if (name === 'owl')
            for (const i of plan.configuration.instances) expect(i.taskIds.length).toBeLessThanOrEqual(2);
          if (name === 'synergy')
            for (const t of snap.tasks)
              if (t.instanceId !== undefined)
                expect(plan.configuration.instances.find((i) => i.taskIds.includes(t.id))?.id).toBe(
                  t.instanceId,
                );
        }),
        { numRuns: 100, seed: 20250 },
      );
    });
  }

  it('plans are deterministic for a given snapshot', () => {
    fc.assert(
      fc.property(snapshotArb, (spec) => {
        const snap = build(spec, 2);
        for (const { make } of makers) expect(make().plan(snap)).toEqual(make().plan(snap));
      }),
      { numRuns: 30, seed: 7 },
    );
  });

  it('re-planning an applied plan converges: Karpenter and Stratus stop moving tasks within a few rounds', () => {
    fc.assert(
      fc.property(snapshotArb, (spec) => {
        for (const make of [() => new KarpenterScheduler(catalog), () => new StratusScheduler(catalog)]) {
          const scheduler = make();
          let snap = build(spec, 8);
          let moved = 0;
          for (let round = 0; round < 6; round++) {
            const plan = scheduler.plan(snap);
            moved = plan.decision.candidates[0]?.movedJobs.length ?? 0;
            snap = apply(snap, plan);
          }
          expect(moved).toBe(0);
        }
      }),
      { numRuns: 30, seed: 11 },
    );
  });
});

/** The snapshot after a plan is carried out (new instances running under fresh ids, every job movable). */
function apply(snap: ClusterSnapshot, plan: Plan): ClusterSnapshot {
  const rename = new Map(
    plan.configuration.instances.map((i) => [i.id, i.isNew ? `r${snap.nowSeconds}-${i.id}` : i.id]),
  );
  const hostOf = new Map<string, string>();
  for (const i of plan.configuration.instances)
    for (const t of i.taskIds) hostOf.set(t, rename.get(i.id) as string);
  return {
    nowSeconds: snap.nowSeconds + 300,
    jobs: snap.jobs.map((j) => ({ ...j, reconfigurable: true, noMoveSeconds: undefined })),
    tasks: snap.tasks.map((t) => ({ ...t, instanceId: hostOf.get(t.id) })),
    instances: plan.configuration.instances.map((i) => ({
      id: rename.get(i.id) as string,
      typeName: i.typeName,
      state: 'running' as const,
      taskIds: [...i.taskIds],
    })),
  };
}
