import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { loadCatalogFile } from '../../src/cloud/catalog-file.js';
import type { ClusterSnapshot, SchedJob, SchedTask } from '../../src/core/model.js';
import { EvaScheduler } from '../../src/scheduler/eva.js';
import { createScheduler, NO_INTERFERENCE } from '../../src/scheduler/registry.js';
import {
  SLOWDOWN_BUDGET_MAX,
  SLOWDOWN_BUDGET_MIN,
  SLOWDOWN_BUDGET_START,
  SlowdownBudget,
} from '../../src/scheduler/slowdown-budget.js';

const ROUND = 300;

/** Feed `rounds` rounds of the same slowdowns, one round period apart, after a first observation at t = 0. */
function run(budget: SlowdownBudget, slowdowns: readonly number[], rounds: number): SlowdownBudget {
  budget.observe(0, slowdowns);
  for (let i = 1; i <= rounds; i++) budget.observe(i * ROUND, slowdowns);
  return budget;
}

describe('slowdown budget', () => {
  it('starts at $0.5 and moves log₂ v by 0.6/h × the relative error: 20 rounds at twice the target double v', () => {
    const budget = new SlowdownBudget(0.1);
    expect(budget.valuePerJobHour).toBe(SLOWDOWN_BUDGET_START);
    // A steady 0.2 against a target of 0.1: the relative error is 1, so each 300-s round adds 0.6 × 300/3600 = 0.05.
    run(budget, [0.2, 0.2], 20);
    expect(budget.smoothedSlowdown).toBeCloseTo(0.2, 12);
    expect(budget.valuePerJobHour).toBe(1);
    // And back down at no slowdown at all (relative error −1): twenty rounds halve it again.
    for (let i = 21; i <= 40; i++) budget.observe(i * ROUND, [0]);
    expect(budget.valuePerJobHour).toBeLessThan(1);
  });

  it('holds still on target, moves on a grid of quarter powers of two, and stays within its bounds', () => {
    expect(run(new SlowdownBudget(0.1), [0.1], 500).valuePerJobHour).toBe(SLOWDOWN_BUDGET_START);
    // One round at twice the target moves log₂ v by 0.05: not enough to reach the next step of the grid.
    expect(run(new SlowdownBudget(0.1), [0.2], 1).valuePerJobHour).toBe(SLOWDOWN_BUDGET_START);
    expect(run(new SlowdownBudget(0.05), [0.5], 5000).valuePerJobHour).toBe(SLOWDOWN_BUDGET_MAX);
    expect(run(new SlowdownBudget(0.5), [0], 5000).valuePerJobHour).toBe(SLOWDOWN_BUDGET_MIN);
    fc.assert(
      fc.property(
        fc.double({ min: 0.01, max: 0.9, noNaN: true }),
        fc.array(fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { maxLength: 5 }), { maxLength: 60 }),
        (target, rounds) => {
          const budget = new SlowdownBudget(target);
          rounds.forEach((slowdowns, i) => budget.observe(i * ROUND, slowdowns));
          const v = budget.valuePerJobHour;
          expect(v).toBeGreaterThanOrEqual(SLOWDOWN_BUDGET_MIN);
          expect(v).toBeLessThanOrEqual(SLOWDOWN_BUDGET_MAX);
          const quarters = Math.log2(v) * 4;
          expect(Math.abs(quarters - Math.round(quarters))).toBeLessThan(1e-9);
        },
      ),
    );
  });

  it('while caps hold jobs back it may fall but not rise', () => {
    const held = new SlowdownBudget(0.1);
    held.observe(0, [0.3]);
    const holding = { holdsJobsBack: true, placedSeconds: [0] };
    for (let i = 1; i <= 40; i++) held.observe(i * ROUND, [0.3], holding);
    expect(held.valuePerJobHour).toBe(SLOWDOWN_BUDGET_START);
    for (let i = 41; i <= 80; i++) held.observe(i * ROUND, [0], holding);
    expect(held.valuePerJobHour).toBeLessThan(SLOWDOWN_BUDGET_START);
  });

  it('after caps held jobs back, it may rise again only once every running job was placed since', () => {
    /** Caps hold jobs back at t = 0, then twenty rounds at twice the target with jobs placed at these times. */
    const after = (placedSeconds: readonly (number | undefined)[]): SlowdownBudget => {
      const budget = new SlowdownBudget(0.1);
      budget.observe(0, [0.2], { holdsJobsBack: true, placedSeconds: [0] });
      const slowdowns = placedSeconds.map(() => 0.2);
      for (let i = 1; i <= 20; i++)
        budget.observe(i * ROUND, slowdowns, { holdsJobsBack: false, placedSeconds });
      return budget;
    };
    // One job placed while the caps held others back is enough to hold v where it is.
    expect(after([0, 0]).valuePerJobHour).toBe(SLOWDOWN_BUDGET_START);
    expect(after([0, 60]).valuePerJobHour).toBe(SLOWDOWN_BUDGET_START);
    // An unknown placement time counts as placed under the caps.
    expect(after([60, undefined]).valuePerJobHour).toBe(SLOWDOWN_BUDGET_START);
    // All placed since: the full step, as if caps had never held anyone back (the first case of this suite).
    expect(after([60, 60]).valuePerJobHour).toBe(1);
    // When the caps last held jobs back is part of the state.
    expect(after([0, 60]).toJSON().heldBackAtSeconds).toBe(0);
    const saved = after([0, 60]);
    const restored = SlowdownBudget.fromJSON(0.1, structuredClone(saved.toJSON()));
    for (const b of [saved, restored])
      b.observe(21 * ROUND, [0.2, 0.2], { holdsJobsBack: false, placedSeconds: [60, 0] });
    expect(restored.toJSON()).toEqual(saved.toJSON());
    // Falling is never held back.
    const falling = after([0, 0]);
    for (let i = 21; i <= 60; i++)
      falling.observe(i * ROUND, [0, 0], { holdsJobsBack: false, placedSeconds: [0, 0] });
    expect(falling.valuePerJobHour).toBeLessThan(SLOWDOWN_BUDGET_START);
  });

  it('a round without running jobs changes nothing, and an idle gap counts as one hour at most', () => {
    const idle = run(new SlowdownBudget(0.1), [0.2], 10);
    const before = idle.toJSON();
    idle.observe(11 * ROUND, []);
    expect(idle.toJSON()).toEqual(before);
    // Ten idle hours, then one observation at twice the target: the step is one hour's, 0.6.
    const gap = new SlowdownBudget(0.1);
    gap.observe(0, [0.2]);
    gap.observe(10 * 3600, [0.2]);
    expect(gap.toJSON().log2Value).toBeCloseTo(Math.log2(SLOWDOWN_BUDGET_START) + 0.6, 12);
  });

  it('round-trips through JSON and refuses a target or a state out of range', () => {
    const budget = run(new SlowdownBudget(0.1), [0.3], 30);
    const copy = SlowdownBudget.fromJSON(0.1, structuredClone(budget.toJSON()));
    expect(copy.valuePerJobHour).toBe(budget.valuePerJobHour);
    copy.observe(31 * ROUND, [0.3]);
    budget.observe(31 * ROUND, [0.3]);
    expect(copy.toJSON()).toEqual(budget.toJSON());
    expect(SlowdownBudget.fromJSON(0.1, undefined).valuePerJobHour).toBe(SLOWDOWN_BUDGET_START);
    expect(() => new SlowdownBudget(0)).toThrow(/target slowdown/);
    expect(() => new SlowdownBudget(1)).toThrow(/target slowdown/);
    expect(() => SlowdownBudget.fromJSON(0.1, { log2Value: 99 })).toThrow(/log2Value/);
  });
});

describe("Eva's learned value of time", () => {
  const catalog = loadCatalogFile();
  /** Two single-task jobs sharing one r7i.large, and a gang of two whose slower task runs at `gangRate`. */
  function snapshot(nowSeconds: number): ClusterSnapshot {
    const job = (id: string, tasks: number): SchedJob => ({
      id,
      taskIds: Array.from({ length: tasks }, (_, i) => `${id}-t${i}`),
      reconfigurable: true,
      arrivalSeconds: 0,
      runningSinceSeconds: 0,
      migrationDelaySeconds: 60,
    });
    const task = (jobId: string, i: number, instanceId: string): SchedTask => ({
      id: `${jobId}-t${i}`,
      jobId,
      key: jobId,
      demand: { any: [0, 1, 4] },
      instanceId,
    });
    return {
      nowSeconds,
      jobs: [job('a', 1), job('b', 1), job('g', 2)],
      tasks: [task('a', 0, 'i-1'), task('b', 0, 'i-1'), task('g', 0, 'i-2'), task('g', 1, 'i-3')],
      instances: [
        { id: 'i-1', typeName: 'r7i.large', state: 'running', taskIds: ['a-t0', 'b-t0'] },
        { id: 'i-2', typeName: 'r7i.large', state: 'running', taskIds: ['g-t0'] },
        { id: 'i-3', typeName: 'r7i.large', state: 'running', taskIds: ['g-t1'] },
      ],
    };
  }
  const rates = [
    { taskId: 'a-t0', normalizedThroughput: 0.8 },
    { taskId: 'b-t0', normalizedThroughput: 0.8 },
    // A gang's slowdown is its slowest task's: 0.2, not the mean of 0 and 0.2.
    { taskId: 'g-t0', normalizedThroughput: 1 },
    { taskId: 'g-t1', normalizedThroughput: 0.8 },
  ];

  it("is 'auto' by default: jobs 20% slower than alone against a 10% target raise it, and the decision shows it", () => {
    const eva = new EvaScheduler(catalog, { targetSlowdown: 0.1 });
    expect(eva.plan(snapshot(0)).decision.valueOfTimePerJobHour).toBe(SLOWDOWN_BUDGET_START);
    for (let i = 0; i <= 20; i++) eva.observe(snapshot(i * ROUND), rates);
    expect(eva.plan(snapshot(20 * ROUND)).decision.valueOfTimePerJobHour).toBe(1);
    // What it learned survives a restart (the controller saves exportState) and a fork.
    const restored = new EvaScheduler(catalog, { targetSlowdown: 0.1 });
    restored.importState(structuredClone(eva.exportState()));
    expect(restored.plan(snapshot(20 * ROUND)).decision.valueOfTimePerJobHour).toBe(1);
    expect(eva.fork().plan(snapshot(20 * ROUND)).decision.valueOfTimePerJobHour).toBe(1);
  });

  it('the target reaches Eva through the registry (simulate --target-slowdown, the controller config)', () => {
    const learnedUnder = (target: number) => {
      const eva = createScheduler('eva', {
        catalog,
        interferenceProfile: NO_INTERFERENCE,
        evaTargetSlowdown: target,
      });
      for (let i = 0; i <= 20; i++) eva.observe(snapshot(i * ROUND), rates);
      return eva.plan(snapshot(20 * ROUND)).decision.valueOfTimePerJobHour;
    };
    expect(learnedUnder(0.1)).toBe(1);
    expect(learnedUnder(0.4)).toBeLessThan(SLOWDOWN_BUDGET_START);
  });

  it('does not rise in rounds where the queue layer says caps hold jobs back', () => {
    const eva = new EvaScheduler(catalog, { targetSlowdown: 0.1 });
    for (let i = 0; i <= 20; i++) eva.observe({ ...snapshot(i * ROUND), capHoldsJobsBack: true }, rates);
    expect(eva.plan(snapshot(20 * ROUND)).decision.valueOfTimePerJobHour).toBe(SLOWDOWN_BUDGET_START);
  });

  it('after caps held jobs back, it rises again only once every running job was placed since (its runningSinceSeconds)', () => {
    /** Caps hold jobs back at t = 0; then twenty rounds without, the jobs running since `since`. */
    const learned = (since: number) => {
      const eva = new EvaScheduler(catalog, { targetSlowdown: 0.1 });
      eva.observe({ ...snapshot(0), capHoldsJobsBack: true }, rates);
      const placed = (t: number): ClusterSnapshot => {
        const s = snapshot(t);
        return { ...s, jobs: s.jobs.map((j) => ({ ...j, runningSinceSeconds: since })) };
      };
      for (let i = 1; i <= 21; i++) eva.observe(placed(i * ROUND), rates);
      return eva.plan(placed(21 * ROUND)).decision.valueOfTimePerJobHour;
    };
    expect(learned(0)).toBe(SLOWDOWN_BUDGET_START);
    expect(learned(1)).toBe(1);
  });

  it('a fixed value of time does not move', () => {
    const eva = new EvaScheduler(catalog, { valueOfTimePerJobHour: 2 });
    for (let i = 0; i <= 40; i++) eva.observe(snapshot(i * ROUND), rates);
    expect(eva.plan(snapshot(40 * ROUND)).decision.valueOfTimePerJobHour).toBe(2);
    expect(eva.exportState().slowdownBudget).toBeUndefined();
  });
});
