import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { gainOverStaying } from './decision-gain.js';
import { loadCatalogFile } from '../../src/cloud/catalog-file.js';
import type { ClusterSnapshot, SchedInstance, SchedJob, SchedTask } from '../../src/core/model.js';
import type { FamilyDemand } from '../../src/core/resources.js';
import { EvaScheduler } from '../../src/scheduler/eva.js';
import { weighed } from '../../src/scheduler/eva-choice.js';

const catalog = loadCatalogFile();
const HOUR = 3600;

/**
 * Two single-task jobs, each alone on an r7i.large ($0.1323/h). Both fit one r7i.large ([0, 1, 6] twice), where
 * each is measured to run at 0.9 of its speed next to the other: consolidating saves one instance's price and costs
 * each job a tenth of its progress.
 */
function twoLonelyJobs(valueOfTime?: { a?: number; b?: number }): ClusterSnapshot {
  const demand: FamilyDemand = { any: [0, 1, 6] };
  const job = (id: string, v: number | undefined): SchedJob => ({
    id,
    taskIds: [`${id}-t0`],
    reconfigurable: true,
    arrivalSeconds: 0,
    runningSinceSeconds: 0,
    migrationDelaySeconds: 60,
    lastCheckpointSeconds: 100 * HOUR - 60,
    expectedRemainingSeconds: 200 * HOUR,
    ...(v === undefined ? {} : { valueOfTimePerHour: v }),
  });
  const tasks: SchedTask[] = [
    { id: 'a-t0', jobId: 'a', key: 'etl-a', demand, instanceId: 'i-1' },
    { id: 'b-t0', jobId: 'b', key: 'etl-b', demand, instanceId: 'i-2' },
  ];
  const instances: SchedInstance[] = [
    { id: 'i-1', typeName: 'r7i.large', state: 'running', taskIds: ['a-t0'] },
    { id: 'i-2', typeName: 'r7i.large', state: 'running', taskIds: ['b-t0'] },
  ];
  return {
    nowSeconds: 100 * HOUR,
    jobs: [job('a', valueOfTime?.a), job('b', valueOfTime?.b)],
    tasks,
    instances,
  };
}

/** A scheduler that has seen the two jobs arrive and measured them next to each other at 0.9. */
function learned(valueOfTimePerJobHour?: number): EvaScheduler {
  const eva = new EvaScheduler(catalog, valueOfTimePerJobHour === undefined ? {} : { valueOfTimePerJobHour });
  eva.table.record('etl-a', ['etl-b'], 0.9);
  eva.table.record('etl-b', ['etl-a'], 0.9);
  return eva;
}

const instancesOf = (s: ClusterSnapshot, eva: EvaScheduler) =>
  eva.plan(s).configuration.instances.map((i) => [...i.taskIds].sort().join('+'));

describe('value of time', () => {
  it('flips a consolidation: dollars alone move b next to a; at $1 per job-hour the slowdown costs more', () => {
    const dollars = learned(0).plan(twoLonelyJobs());
    expect(dollars.decision.chosen).not.toBe('stay');
    expect(dollars.configuration.instances.map((i) => [...i.taskIds].sort().join('+'))).toEqual([
      'a-t0+b-t0',
    ]);
    // The saving is real in dollars: one r7i.large less.
    const moved = dollars.decision.candidates.find((c) => c.name === dollars.decision.chosen);
    expect(moved?.costPerHour).toBeCloseTo(0.1323, 4);

    const timed = learned(1).plan(twoLonelyJobs());
    expect(timed.decision.chosen).toBe('stay');
    expect(timed.configuration.instances.map((i) => i.taskIds.join('+')).sort()).toEqual(['a-t0', 'b-t0']);
    expect(timed.decision.valueOfTimePerJobHour).toBe(1);
    // Both parts are in the record: the consolidation still saves dollars, but adds 2 × $1 × (1 − 0.9) = $0.20/h of
    // completion time, plus its move's minute out of service and the minute of work to redo.
    const consolidate = timed.decision.candidates.find((c) => c.movedJobs.length > 0);
    expect(consolidate).toBeDefined();
    expect(consolidate?.savingPerSecond ?? 0).toBeGreaterThan(
      timed.decision.candidates.find((c) => c.name === 'stay')?.savingPerSecond ?? Infinity,
    );
    expect(consolidate?.timeCostPerHour).toBeCloseTo(0.2, 6);
    expect(consolidate?.migrationTimeCost).toBeCloseTo((120 / HOUR) * 1, 6);
    expect(timed.decision.candidates.find((c) => c.name === 'stay')?.timeCostPerHour).toBe(0);
    expect(timed.decision.reason).toContain('time: −$0.20/h slowdown');
  });

  it("a job's own value of time overrides the default, either way", () => {
    // Default $1, but both jobs say time is worth nothing to them: dollars decide, as without a value of time.
    expect(instancesOf(twoLonelyJobs({ a: 0, b: 0 }), learned(1))).toEqual(['a-t0+b-t0']);
    // Default 0, but both jobs value their time: they stay apart.
    expect(instancesOf(twoLonelyJobs({ a: 1, b: 1 }), learned(0)).sort()).toEqual(['a-t0', 'b-t0']);
  });

  it('refuses a value of time out of bounds', () => {
    expect(() => new EvaScheduler(catalog, { valueOfTimePerJobHour: -1 })).toThrow(/value of time/);
    expect(() => new EvaScheduler(catalog, { valueOfTimePerJobHour: Number.NaN })).toThrow(/value of time/);
    expect(() => new EvaScheduler(catalog, { valueOfTimePerJobHour: 1e9 })).toThrow(/value of time/);
  });
});

const DEMANDS: FamilyDemand[] = [
  { any: [1, 8, 30] },
  { any: [1, 4, 15] },
  { any: [2, 16, 64] },
  { any: [0, 4, 8] },
  { any: [0, 2, 20] },
  { any: [0, 1, 6] },
  { p3: [0, 8, 8], c7i: [0, 6, 8], r7i: [0, 6, 8] },
];
const KEYS = ['resnet18', 'gpt2', 'cyclegan', 'gcn'];

const jobArb = fc.record({
  demand: fc.integer({ min: 0, max: DEMANDS.length - 1 }),
  key: fc.integer({ min: 0, max: KEYS.length - 1 }),
  tasks: fc.constantFrom(1, 1, 1, 2, 4),
  placedOn: fc.option(fc.integer({ min: 0, max: 5 }), { nil: undefined }),
  reconfigurable: fc.boolean(),
  remainingHours: fc.integer({ min: 0, max: 300 }),
  /** Whether the job says "my time is worth 0" itself (absent otherwise). */
  saysZero: fc.boolean(),
});
const rateArb = fc.record({
  a: fc.integer({ min: 0, max: KEYS.length - 1 }),
  b: fc.integer({ min: 0, max: KEYS.length - 1 }),
  rate: fc.double({ min: 0.3, max: 1, noNaN: true }),
});

/**
 * A snapshot of placed and waiting jobs on up to six instances (each big enough for what the draft puts on it: a
 * p3.16xlarge), for comparing decisions, not for realism.
 */
function snapshotOf(drafts: readonly JobDraft[]): {
  plain: ClusterSnapshot;
  zeros: ClusterSnapshot;
} {
  const jobs: SchedJob[] = [];
  const zeroJobs: SchedJob[] = [];
  const tasks: SchedTask[] = [];
  const on = new Map<number, string[]>();
  drafts.forEach((d, i) => {
    const id = `j${i}`;
    const taskIds = Array.from({ length: d.tasks }, (_, k) => `${id}-t${k}`);
    const job: SchedJob = {
      id,
      taskIds,
      reconfigurable: d.reconfigurable,
      arrivalSeconds: i * 600,
      runningSinceSeconds: d.placedOn === undefined ? undefined : i * 600,
      migrationDelaySeconds: 90,
      lastCheckpointSeconds: d.placedOn === undefined ? undefined : 20 * HOUR,
      expectedRemainingSeconds: d.remainingHours * HOUR,
    };
    jobs.push(job);
    zeroJobs.push(d.saysZero ? { ...job, valueOfTimePerHour: 0 } : job);
    for (const taskId of taskIds) {
      const instanceId = d.placedOn === undefined ? undefined : `i-${d.placedOn}`;
      tasks.push({
        id: taskId,
        jobId: id,
        key: `${KEYS[d.key]}[${d.demand}]_node0`,
        demand: DEMANDS[d.demand] as FamilyDemand,
        ...(instanceId === undefined ? {} : { instanceId }),
      });
      if (d.placedOn !== undefined) on.set(d.placedOn, [...(on.get(d.placedOn) ?? []), taskId]);
    }
  });
  const instances: SchedInstance[] = [...on.entries()]
    .sort(([a], [b]) => a - b)
    .map(([k, taskIds]) => ({ id: `i-${k}`, typeName: 'p3.16xlarge', state: 'running', taskIds }));
  const base = { nowSeconds: 24 * HOUR, tasks, instances };
  return { plain: { ...base, jobs }, zeros: { ...base, jobs: zeroJobs } };
}

type JobDraft = {
  demand: number;
  key: number;
  tasks: number;
  placedOn: number | undefined;
  reconfigurable: boolean;
  remainingHours: number;
  saysZero: boolean;
};

function withRates(
  eva: EvaScheduler,
  rates: readonly { a: number; b: number; rate: number }[],
): EvaScheduler {
  for (const r of rates) eva.table.record(`${KEYS[r.a]}[0]_node0`, [`${KEYS[r.b]}[1]_node0`], r.rate);
  return eva;
}

describe('value of time 0 (property)', () => {
  it("decides exactly as Eva's dollars-only rule: same plans, same records, no time parts", () => {
    fc.assert(
      fc.property(
        fc.array(jobArb, { minLength: 1, maxLength: 18 }),
        fc.array(rateArb, { maxLength: 6 }),
        (drafts, rates) => {
          const { plain, zeros } = snapshotOf(drafts as JobDraft[]);
          // Eva told 0 and no job saying anything: the code paths of the value of time all stay off (no task has a
          // time value), which is Eva before the value of time existed (checked once against that commit: the same
          // simulated runs on pai_200 and two Alibaba conversions) …
          const reference = withRates(new EvaScheduler(catalog, { valueOfTimePerJobHour: 0 }), rates);
          const expected = reference.plan(plain);
          // … and Eva told 0 with some jobs saying 0 themselves: the same plan, decision record and all.
          const zero = withRates(new EvaScheduler(catalog, { valueOfTimePerJobHour: 0 }), rates);
          const got = zero.plan(zeros);
          expect(got).toEqual(expected);
          // Under Eva's default (not 0), jobs that all say 0 get the same plan and candidates too.
          const allZero = { ...plain, jobs: plain.jobs.map((j) => ({ ...j, valueOfTimePerHour: 0 })) };
          const underDefault = withRates(new EvaScheduler(catalog), rates).plan(allZero);
          expect(underDefault.configuration).toEqual(expected.configuration);
          expect(underDefault.decision.candidates).toEqual(expected.decision.candidates);
          // And a later round, after each has kept its history of the first (event rate, horizon, previous plan).
          const later = (s: ClusterSnapshot) => ({ ...s, nowSeconds: s.nowSeconds + 900 });
          expect(zero.plan(later(zeros))).toEqual(reference.plan(later(plain)));
          for (const c of got.decision.candidates) {
            expect(c.timeCostPerHour).toBeUndefined();
            expect(c.migrationTimeCost).toBeUndefined();
            expect(weighed(c)).toEqual({
              savingPerSecond: c.savingPerSecond,
              migrationCost: c.migrationCost,
            });
          }
          expect(got.decision.valueOfTimePerJobHour).toBeUndefined();
          expect(got.decision.reason).not.toContain('time:');
        },
      ),
      { numRuns: 60, seed: 20 },
    );
  });

  it('with a value of time, the choice beats staying on dollars plus time, k × the one-off costs (property)', () => {
    fc.assert(
      fc.property(
        fc.array(jobArb, { minLength: 1, maxLength: 18 }),
        fc.array(rateArb, { maxLength: 6 }),
        fc.double({ min: 0.01, max: 20, noNaN: true }),
        (drafts, rates, value) => {
          const { plain } = snapshotOf(drafts as JobDraft[]);
          const plan = withRates(new EvaScheduler(catalog, { valueOfTimePerJobHour: value }), rates).plan(
            plain,
          );
          const d = plan.decision;
          const chosen = d.candidates.find((c) => c.name === d.chosen);
          const stay = d.candidates.find((c) => c.name === 'stay');
          for (const c of d.candidates) {
            expect(c.timeCostPerHour ?? -1).toBeGreaterThanOrEqual(0);
            expect(c.migrationTimeCost ?? -1).toBeGreaterThanOrEqual(0);
          }
          if (chosen === undefined || stay === undefined || chosen.name === 'stay') return;
          if (chosen.rejectedBecause !== undefined) return;
          expect(gainOverStaying(chosen, stay, d.paybackMargin ?? 1, d.horizonSeconds ?? 0)).toBeGreaterThan(
            0,
          );
        },
      ),
      { numRuns: 40, seed: 21 },
    );
  });
});
