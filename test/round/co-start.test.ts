import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import type { Resources } from '../../src/core/resources.js';
import {
  bindOrLaunch,
  placeJobOnSlots,
  taskShareOf,
  type ExpectedSlot,
  type TaskToPlace,
} from '../../src/scheduler/expected-start.js';
import {
  barrierIdleCost,
  barrierIdleTaskSeconds,
  coStartDecision,
  coStartTimeoutAfter,
  fitsBackfill,
  gangStart,
  startSkewSeconds,
} from '../../src/round/co-start.js';
import { admit } from '../../src/queue/admit.js';
import { singleClassConfig, FIFO_CONFIG } from '../../src/queue/wfq.js';
import type { QueuedJob } from '../../src/queue/admit.js';

// Single-slot instances (one task each, capacity one vCPU), $3600/h so that $ read as task-seconds.
const ONE: Resources = [0, 1, 1];
const slot = (instanceId: string, freeAtSeconds: number, virtual = false): ExpectedSlot => ({
  instanceId,
  freeAtSeconds,
  free: ONE,
  virtual,
  costPerHour: 3600,
  capacity: ONE,
});
const task = (taskId: string): TaskToPlace => ({ taskId, demandOn: () => ONE });

describe('expected-start index and gang start (Murmuration digest §7.6)', () => {
  it('E1: a 3-task job takes two free slots and the virtual slot (209 < 240): S_job = 209, barrier-idle 418 → 0', () => {
    const slots = [slot('free-1', 0), slot('free-2', 0), slot('busy', 240), slot('new', 19 + 190, true)];
    const placement = placeJobOnSlots([task('t0'), task('t1'), task('t2')], slots);
    expect(placement?.jobStartSeconds).toBe(209);
    expect(placement?.placements.map((p) => p.instanceId)).toEqual(['free-1', 'free-2', 'new']);
    expect(placement?.placements.map((p) => p.virtual)).toEqual([false, false, true]);

    const eager = (placement?.placements ?? []).map((p) => ({
      startSeconds: p.expectedStartSeconds,
      costPerHour: 3600,
      share: 1,
    }));
    expect(barrierIdleTaskSeconds(eager, 209)).toBe(418);
    expect(barrierIdleCost(eager, 209)).toBe(418);
    expect(startSkewSeconds(eager)).toBe(209);

    const gang = gangStart(placement as NonNullable<typeof placement>);
    const together = gang.starts.map((s) => ({ startSeconds: s.startSeconds, costPerHour: 3600, share: 1 }));
    expect(barrierIdleCost(together, gang.jobStartSeconds)).toBe(0);
    expect(startSkewSeconds(together)).toBe(0);
    // The two free slots are offered for backfill until 209 s, to tasks expected to end by then.
    expect(gang.backfill).toEqual([
      { instanceId: 'free-1', fromSeconds: 0, untilSeconds: 209 },
      { instanceId: 'free-2', fromSeconds: 0, untilSeconds: 209 },
    ]);
    expect(fitsBackfill(gang.backfill[0] as (typeof gang.backfill)[0], 0, 209)).toBe(true);
    expect(fitsBackfill(gang.backfill[0] as (typeof gang.backfill)[0], 0, 210)).toBe(false);
  });

  it('E2: a task is bound to a busy instance freeing at 90 s rather than a launch ready at 209 s', () => {
    const choice = bindOrLaunch({
      nowSeconds: 0,
      taskSeconds: 600,
      bind: { instanceId: 'busy', freeAtSeconds: 90, costPerHour: 3, share: 1 },
      launch: { typeName: 'c7i.xlarge', readyAtSeconds: 209, costPerHour: 3 },
    });
    expect(choice.choice).toBe('bind');
    expect(choice.instanceId).toBe('busy');
    expect(choice.bindJobStartSeconds).toBe(90);
    expect(choice.launchJobStartSeconds).toBe(209);
    // No new instance-hours: the bind costs the task's share of a paid instance over its run only.
    expect(choice.bindCost).toBeCloseTo(0.5, 9);
    expect(choice.launchCost).toBeCloseTo((3 * (209 + 600)) / 3600, 9);
    expect(choice.reason).toMatch(/^bind to busy/);
  });

  it('E2 reversed: a launch wins when the busy instance frees after the launch would be ready', () => {
    const choice = bindOrLaunch({
      nowSeconds: 0,
      taskSeconds: 600,
      bind: { instanceId: 'busy', freeAtSeconds: 400, costPerHour: 3, share: 1 },
      launch: { typeName: 'c7i.xlarge', readyAtSeconds: 209, costPerHour: 3 },
    });
    expect(choice.choice).toBe('launch');
    expect(choice.typeName).toBe('c7i.xlarge');
  });

  it('E3: under a 4-slot cap, SJF admits C then B and A waits; FCFS admits A alone; mean JCT 15 vs 16.7', () => {
    const job = (id: string, tasks: number, minutes: number): QueuedJob => ({
      id,
      arrivalSeconds: 0,
      remainingWorkSeconds: tasks * minutes * 60,
      sizeSeconds: tasks * minutes * 60,
      footprint: {
        jobId: id,
        instances: Array.from({ length: tasks }, () => ({
          family: 'c7i',
          gpus: 0,
          vcpus: 1,
          costPerHour: 1,
        })),
      },
    });
    const jobs = [job('A', 4, 10), job('B', 1, 15), job('C', 2, 5)];
    const caps = { maxInstances: 4 };
    const sjf = admit({ nowSeconds: 0, caps, config: singleClassConfig('srpt'), running: [], waiting: jobs });
    expect(sjf.admitted).toEqual(['C', 'B']);
    const fcfs = admit({ nowSeconds: 0, caps, config: FIFO_CONFIG, running: [], waiting: jobs });
    expect(fcfs.admitted).toEqual(['A']);

    // Serve the jobs in each order on 4 single-slot instances, each gang-started at its S_job.
    const meanJct = (order: readonly [string, number, number][]): number => {
      const freeAt = [0, 0, 0, 0];
      const ends: number[] = [];
      for (const [id, tasks, minutes] of order) {
        const slots = freeAt.map((t, i) => slot(`s${i}`, t));
        const p = placeJobOnSlots(
          Array.from({ length: tasks }, (_, k) => task(`${id}${k}`)),
          slots,
        );
        if (p === undefined) throw new Error('no room');
        const end = p.jobStartSeconds + minutes;
        for (const pl of p.placements) freeAt[Number(pl.instanceId.slice(1))] = end;
        ends.push(end);
      }
      return ends.reduce((a, b) => a + b, 0) / ends.length;
    };
    expect(
      meanJct([
        ['C', 2, 5],
        ['B', 1, 15],
        ['A', 4, 10],
      ]),
    ).toBe(15);
    expect(
      meanJct([
        ['A', 4, 10],
        ['B', 1, 15],
        ['C', 2, 5],
      ]),
    ).toBeCloseTo(16.67, 2);
  });
});

describe('the co-start barrier', () => {
  it('releases all tasks once the last is ready, waits before, re-plans after the timeout', () => {
    expect(
      coStartDecision(
        [
          { taskId: 'a', ready: true, readySinceSeconds: 0 },
          { taskId: 'b', ready: false },
        ],
        100,
        900,
      ),
    ).toEqual({ kind: 'wait', waitingFor: ['b'] });
    expect(
      coStartDecision(
        [
          { taskId: 'a', ready: true, readySinceSeconds: 0 },
          { taskId: 'b', ready: true, readySinceSeconds: 500 },
        ],
        500,
        900,
      ),
    ).toEqual({ kind: 'release' });
    expect(
      coStartDecision(
        [
          { taskId: 'a', ready: true, readySinceSeconds: 0 },
          { taskId: 'b', ready: false },
        ],
        900,
        900,
      ).kind,
    ).toBe('replan');
  });

  it('a task share is its dominant share of the instance', () => {
    expect(taskShareOf([1, 4, 16], [4, 32, 244])).toBe(0.25);
    expect(taskShareOf([0, 8, 8], [0, 16, 32])).toBe(0.5);
  });
});

describe('placement properties', () => {
  const arbSlots = fc.array(
    fc.record({
      freeAt: fc.integer({ min: 0, max: 1000 }),
      cpus: fc.integer({ min: 0, max: 8 }),
      virtual: fc.boolean(),
    }),
    { minLength: 0, maxLength: 8 },
  );
  const arbTasks = fc.array(fc.integer({ min: 1, max: 4 }), { minLength: 1, maxLength: 8 });

  it('never exceeds a slot’s capacity, places each task once, and S_job is the latest start', () => {
    fc.assert(
      fc.property(arbSlots, arbTasks, (rawSlots, demands) => {
        const slots: ExpectedSlot[] = rawSlots.map((s, i) => ({
          instanceId: `i${i}`,
          freeAtSeconds: s.freeAt,
          free: [0, s.cpus, s.cpus],
          virtual: s.virtual,
          costPerHour: 1,
          capacity: [0, s.cpus, s.cpus],
        }));
        const tasks: TaskToPlace[] = demands.map((d, k) => ({ taskId: `t${k}`, demandOn: () => [0, d, d] }));
        const p = placeJobOnSlots(tasks, slots);
        if (p === undefined) {
          // Only a task left without room makes the job wait: some task bigger than every slot, or more demand
          // than all the slots hold, or the greedy's fragments (at least two tasks then).
          const total = demands.reduce((a, b) => a + b, 0);
          const room = rawSlots.reduce((a, s) => a + s.cpus, 0);
          const biggest = Math.max(0, ...rawSlots.map((s) => s.cpus));
          expect(total > room || demands.some((d) => d > biggest) || demands.length > 1).toBe(true);
          if (demands.every((d) => d === 1)) expect(total).toBeGreaterThan(room);
          return;
        }
        expect(p.placements.map((x) => x.taskId).sort()).toEqual(tasks.map((t) => t.taskId).sort());
        const used = new Map<string, number>();
        for (const pl of p.placements) {
          const d = demands[Number(pl.taskId.slice(1))] as number;
          used.set(pl.instanceId, (used.get(pl.instanceId) ?? 0) + d);
        }
        for (const [id, u] of used) expect(u).toBeLessThanOrEqual(rawSlots[Number(id.slice(1))]?.cpus ?? 0);
        expect(p.jobStartSeconds).toBe(Math.max(...p.placements.map((x) => x.expectedStartSeconds)));
        // Gang start: every task starts at S_job, so the barrier costs nothing.
        const g = gangStart(p);
        expect(
          barrierIdleCost(
            g.starts.map((s) => ({ startSeconds: s.startSeconds, costPerHour: 1, share: 1 })),
            g.jobStartSeconds,
          ),
        ).toBe(0);
      }),
    );
  });

  it('with one-task slots, S_job is the k-th smallest free time (the greedy is optimal for the job start)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 1000 }), { minLength: 1, maxLength: 10 }),
        fc.nat(),
        (ts, kRaw) => {
          const k = 1 + (kRaw % ts.length);
          const p = placeJobOnSlots(
            Array.from({ length: k }, (_, i) => task(`t${i}`)),
            ts.map((t, i) => slot(`i${i}`, t)),
          );
          const sorted = [...ts].sort((a, b) => a - b);
          expect(p?.jobStartSeconds).toBe(sorted[k - 1]);
        },
      ),
    );
  });

  it('times out on a readiness no longer trusted, but releases only on fresh ones; the timeout doubles per re-plan, capped', () => {
    const stale = { taskId: 'a', ready: false, readySinceSeconds: 0 };
    expect(coStartDecision([stale, { taskId: 'b', ready: true, readySinceSeconds: 50 }], 99, 100).kind).toBe(
      'wait',
    );
    expect(coStartDecision([stale, { taskId: 'b', ready: false }], 100, 100).kind).toBe('replan');
    expect([0, 1, 2, 4, 9].map((n) => coStartTimeoutAfter(100, n))).toEqual([100, 200, 400, 1600, 1600]);
  });
});
