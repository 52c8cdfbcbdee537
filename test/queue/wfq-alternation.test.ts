import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { ClusterSnapshot, SchedJob, SchedTask } from '../../src/core/model.js';
import { admit, type QueuedJob, type RunningQueuedJob } from '../../src/queue/admit.js';
import { Admission, type AdmissionJobInfo } from '../../src/queue/admission.js';
import type { QueueCaps } from '../../src/queue/caps.js';
import { LAG_HORIZON_SECONDS, lagsAt, nextLagState, type ClassLagState } from '../../src/queue/class-lag.js';
import { parseWfqConfig, type WfqConfig } from '../../src/queue/wfq.js';
import { NoPackingScheduler } from '../../src/scheduler/baselines/no-packing.js';
import { runSimulation } from '../../src/sim/run-simulation.js';
import type { TraceJob } from '../../src/world/trace.js';
import { table3Catalog } from '../helpers/catalogs.js';
import { testCatalog, trace, traceJob } from '../sim/sim-fixtures.js';

/**
 * Two busy classes whose jobs are each bigger than either class's weight share: only the work-conserving pass ever
 * admits them, one at a time, and when one ends both classes hold nothing. The classes' lags (service owed over
 * time) must make them take turns as their weights say, whatever the order the config lists them in.
 */

// Table 3's d.x ($0.40/h) is the reservation-price instance of a [0, 4, 12] task: under $0.50/h one job runs at a
// time, at a share of 0.8, above either class's weight share below.
const catalog = table3Catalog();
const CAPS: QueueCaps = { maxCostPerHour: 0.5 };
const ROUND_SECONDS = 60;
const JOB_SECONDS = 600;

function teams(alphaWeight: number, restWeight: number, restFirst: boolean): WfqConfig {
  const alpha = { id: 'alpha', weight: alphaWeight, teams: ['alpha'], ordering: 'fifo' };
  const rest = { id: 'rest', weight: restWeight, teams: ['beta'], ordering: 'fifo' };
  return parseWfqConfig({ classifyBy: 'team', classes: restFirst ? [rest, alpha] : [alpha, rest] });
}

interface ToyJob {
  readonly id: string;
  readonly arrival: number;
}
const teamOf = (id: string): string => (id.startsWith('a') ? 'alpha' : 'beta');
const info = (id: string): AdmissionJobInfo => ({ team: teamOf(id) });

/** The reviewer's trace: an alpha job every 300 s (faster than they are served), b0 at 10 s, more beta ones after. */
function reviewerJobs(alpha: number, beta: number, betaEverySeconds: number): ToyJob[] {
  return [
    ...Array.from({ length: alpha }, (_, i) => ({ id: `a${i}`, arrival: i === 0 ? 0 : 300 * i + 20 })),
    ...Array.from({ length: beta }, (_, i) => ({ id: `b${i}`, arrival: 10 + betaEverySeconds * i })),
  ].sort((x, y) => x.arrival - y.arrival);
}

function snapshot(
  now: number,
  live: readonly ToyJob[],
  running: ReadonlyMap<string, number>,
): ClusterSnapshot {
  const jobs: SchedJob[] = [];
  const tasks: SchedTask[] = [];
  for (const j of live) {
    const placedOn = running.has(j.id) ? `i-${j.id}` : undefined;
    jobs.push({
      id: j.id,
      taskIds: [`${j.id}.0`],
      reconfigurable: true,
      arrivalSeconds: j.arrival,
      migrationDelaySeconds: 0,
      expectedRemainingSeconds: JOB_SECONDS,
    });
    tasks.push({
      id: `${j.id}.0`,
      jobId: j.id,
      key: j.id,
      demand: { any: [0, 4, 12] },
      instanceId: placedOn,
    });
  }
  const instances = [...running.keys()].map((id) => ({
    id: `i-${id}`,
    typeName: 'd.x',
    state: 'running' as const,
    taskIds: [`${id}.0`],
  }));
  return { nowSeconds: now, jobs, tasks, instances };
}

/** A cluster in virtual time: each admitted job holds its room for JOB_SECONDS; a round every ROUND_SECONDS. */
class ToyCluster {
  readonly running = new Map<string, number>(); // job → when it ends
  readonly done = new Set<string>();
  readonly admitted: string[] = [];
  readonly admittedAt = new Map<string, number>();
  now = 0;

  constructor(private readonly jobs: readonly ToyJob[]) {}

  /** Rounds until `untilSeconds` (exclusive), with `admission`. */
  runRounds(admission: Admission, untilSeconds: number): void {
    for (; this.now < untilSeconds; this.now += ROUND_SECONDS) {
      for (const [id, end] of [...this.running])
        if (end <= this.now) {
          this.running.delete(id);
          this.done.add(id);
          admission.forget(id);
        }
      const live = this.jobs.filter((j) => j.arrival <= this.now && !this.done.has(j.id));
      const decision = admission.decide(snapshot(this.now, live, this.running), info);
      for (const id of decision.result.admitted) {
        this.running.set(id, this.now + JOB_SECONDS);
        this.admitted.push(id);
        this.admittedAt.set(id, this.now);
      }
    }
  }
}

function admissions(config: WfqConfig, jobs: readonly ToyJob[], untilSeconds: number): string[] {
  const cluster = new ToyCluster(jobs);
  cluster.runRounds(new Admission(catalog, { caps: CAPS, config }), untilSeconds);
  return cluster.admitted;
}

describe('two busy classes with jobs bigger than their shares take turns', () => {
  it('b0 starts when a0 ends, not after every alpha job, whatever the order and the weights', () => {
    const jobs = reviewerJobs(30, 1, 0);
    for (const config of [teams(0.5, 0.5, false), teams(0.5, 0.5, true), teams(0.7, 0.3, true)])
      expect(admissions(config, jobs, 4 * 3600).slice(0, 3)).toEqual(['a0', 'b0', 'a1']);
  });

  it('equal weights alternate, whichever class the config lists first', () => {
    const jobs = reviewerJobs(30, 30, 300);
    for (const restFirst of [false, true]) {
      const order = admissions(teams(0.5, 0.5, restFirst), jobs, 6 * 3600).map(teamOf);
      expect(order.length).toBeGreaterThanOrEqual(30);
      expect(order.slice(0, 30)).toEqual(
        Array.from({ length: 30 }, (_, i) => (i % 2 === 0 ? 'alpha' : 'beta')),
      );
    }
  });

  it('weights 0.7/0.3 give each class its weight of the admissions', () => {
    // Both classes are backlogged from the start to the end of the window (60 jobs each, 40 admissions).
    const jobs = [
      ...Array.from({ length: 60 }, (_, i) => ({ id: `a${i}`, arrival: 0 })),
      ...Array.from({ length: 60 }, (_, i) => ({ id: `b${i}`, arrival: 10 })),
    ];
    for (const restFirst of [false, true]) {
      const order = admissions(teams(0.7, 0.3, restFirst), jobs, 40 * JOB_SECONDS).map(teamOf);
      expect(order).toHaveLength(40);
      const alphaShare = order.filter((t) => t === 'alpha').length / order.length;
      expect(alphaShare).toBeGreaterThan(0.6);
      expect(alphaShare).toBeLessThan(0.8);
    }
  });

  it('a class with nothing waiting banks no credit: what it was owed is gone once its line is empty', () => {
    // Beta waits through a0 (owed lag), b0 takes the next room and empties its line; three hours on it returns.
    // Were the lag of its wait kept, it would go first then; at 0 it ties with alpha, which the config lists first.
    const jobs = [
      ...Array.from({ length: 40 }, (_, i) => ({ id: `a${String(i).padStart(2, '0')}`, arrival: 0 })),
      { id: 'b0', arrival: 10 },
      ...Array.from({ length: 5 }, (_, i) => ({ id: `b${i + 1}`, arrival: 3 * 3600 })),
    ];
    const cluster = new ToyCluster(jobs);
    cluster.runRounds(new Admission(catalog, { caps: CAPS, config: teams(0.5, 0.5, false) }), 6 * 3600);
    const at = (id: string): number => cluster.admittedAt.get(id) ?? Infinity;
    expect(cluster.admitted.slice(0, 2)).toEqual(['a00', 'b0']);
    const before = cluster.admitted.filter((id) => at(id) > at('b0') && at(id) < 3 * 3600);
    expect(before.every((id) => teamOf(id) === 'alpha')).toBe(true);
    const returned = cluster.admitted.filter((id) => at(id) >= 3 * 3600).slice(0, 7);
    expect(returned.map(teamOf)).toEqual(['alpha', 'beta', 'alpha', 'beta', 'alpha', 'beta', 'alpha']);
  });
});

describe('the lags are part of the admission state', () => {
  it('a restart from the exported state admits as the uninterrupted run; without the lags it would not', () => {
    const jobs = reviewerJobs(30, 30, 300);
    const config = teams(0.5, 0.5, false);
    const settings = { caps: CAPS, config };
    const whole = new ToyCluster(jobs);
    whole.runRounds(new Admission(catalog, settings), 6 * 3600);

    const resumed = (keepLags: boolean): string[] => {
      const cluster = new ToyCluster(jobs);
      const first = new Admission(catalog, settings);
      // Stop mid-job: beta has waited through an alpha job, so the lags, not the config order, pick the next.
      cluster.runRounds(first, 1800);
      const saved = JSON.parse(JSON.stringify(first.exportState())) as ReturnType<Admission['exportState']>;
      expect(saved.lag?.classes.length).toBeGreaterThan(0);
      const state = keepLags ? saved : { ...saved, lag: undefined };
      cluster.runRounds(Admission.restore(catalog, settings, state), 6 * 3600);
      return cluster.admitted;
    };
    expect(resumed(true)).toEqual(whole.admitted);
    expect(resumed(false)).not.toEqual(whole.admitted);
  });

  it('a fork carries the lags and leaves the original as it was', () => {
    const jobs = reviewerJobs(10, 10, 300);
    const cluster = new ToyCluster(jobs);
    const admission = new Admission(catalog, { caps: CAPS, config: teams(0.5, 0.5, false) });
    cluster.runRounds(admission, 1800);
    expect(admission.exportState().lag?.classes.length).toBeGreaterThan(0);
    const before = JSON.stringify(admission.exportState());
    const fork = admission.fork();
    expect(JSON.stringify(fork.exportState())).toBe(before);
    new ToyCluster(jobs).runRounds(fork, 3600);
    expect(JSON.stringify(admission.exportState())).toBe(before);
  });

  it('lags accrue only while a class waits, are bounded, and never go back in time', () => {
    const state: ClassLagState = {
      atSeconds: 100,
      classes: [
        ['up', 10, 0.5],
        ['down', -10, -0.25],
      ],
    };
    expect(Object.fromEntries(lagsAt(state, 140))).toEqual({ up: 30, down: -20 });
    expect(Object.fromEntries(lagsAt(state, 50))).toEqual({ up: 10, down: -10 });
    expect(Object.fromEntries(lagsAt(state, 100 + 1e9))).toEqual({
      up: LAG_HORIZON_SECONDS,
      down: -LAG_HORIZON_SECONDS,
    });
    // After a round: the class still waiting keeps its lag and accrues its owed part of what is held (the fluid
    // shares .5/.5 scaled to the .8 held) less its own; the class with nothing waiting drops to 0.
    const next = nextLagState(
      new Map([
        ['up', 30],
        ['down', -20],
      ]),
      [
        {
          classId: 'up',
          weightShare: 0.5,
          demandShare: 0.8,
          guaranteedShare: 0.5,
          fluidShare: 0.5,
          usedShare: 0,
        },
        {
          classId: 'down',
          weightShare: 0.5,
          demandShare: 0.8,
          guaranteedShare: 0.5,
          fluidShare: 0.5,
          usedShare: 0.8,
        },
      ],
      [{ jobId: 'u1', classId: 'up', position: 0, reason: 'caps' }],
      140,
    );
    expect(next).toEqual({ atSeconds: 140, classes: [['up', 30, 0.4]] });
  });
});

describe('the lag in the simulator (engine runtime)', () => {
  // small.x at $3.6/h under a $4/h cap: one job at a time, at a share of 0.9.
  const simCatalog = testCatalog();
  const job = (id: string, arrivalSeconds: number): TraceJob => ({
    ...traceJob(id, { arrivalSeconds, iterations: JOB_SECONDS }),
    team: teamOf(id),
  });

  it("beta's first job starts right after alpha's first, whichever class is listed first", () => {
    const t = trace(...reviewerJobs(12, 1, 0).map((j) => job(j.id, j.arrival)));
    for (const config of [teams(0.5, 0.5, false), teams(0.5, 0.5, true), teams(0.7, 0.3, true)]) {
      const r = runSimulation({
        trace: t,
        catalog: simCatalog,
        groundTruth: () => 1,
        scheduler: new NoPackingScheduler(simCatalog),
        queue: { caps: { maxCostPerHour: 4 }, config, predict: false },
        roundSeconds: ROUND_SECONDS,
      });
      const start = (id: string): number => r.jobs.find((j) => j.id === id)?.startSeconds ?? Infinity;
      const alphaStarts = r.jobs.filter((j) => j.id.startsWith('a')).map((j) => j.startSeconds ?? Infinity);
      expect(start('b0')).toBeGreaterThan(start('a0'));
      // Only a0 started before it: b0 went in the room a0 freed.
      expect(alphaStarts.filter((s) => s < start('b0'))).toHaveLength(1);
    }
  });
});

// ------------------------------------------------------------------------------------------------------------
// Property: with both classes backlogged, neither waits through more than N admissions of the other in a row.

interface PropJob {
  readonly id: string;
  readonly classId: 'A' | 'B';
  readonly arrival: number;
  /** Rounds it holds its room. */
  readonly rounds: number;
  readonly share: number;
}

const COST_CAP = 10;
const queuedJob = (j: PropJob): QueuedJob => ({
  id: j.id,
  arrivalSeconds: j.arrival,
  remainingWorkSeconds: j.rounds * ROUND_SECONDS,
  sizeSeconds: j.rounds * ROUND_SECONDS,
  team: j.classId,
  footprint: {
    jobId: j.id,
    instances: [{ family: 'c7i', gpus: 0, vcpus: 4, costPerHour: j.share * COST_CAP }],
  },
});

/** The admissions of a run of rounds through `admit`, the lags carried between rounds as Admission carries them. */
function propertyRun(
  config: WfqConfig,
  jobs: readonly PropJob[],
): { order: PropJob[]; bothWaiting: boolean[] } {
  const byId = new Map(jobs.map((j) => [j.id, j]));
  const running = new Map<string, { job: RunningQueuedJob; endRound: number }>();
  const done = new Set<string>();
  let lag: ClassLagState | undefined;
  const order: PropJob[] = [];
  const bothWaiting: boolean[] = [];
  for (let round = 0; done.size + running.size < jobs.length || running.size > 0; round++) {
    const now = round * ROUND_SECONDS;
    for (const [id, r] of [...running])
      if (r.endRound <= round) {
        running.delete(id);
        done.add(id);
      }
    const waiting = jobs.filter((j) => j.arrival <= now && !done.has(j.id) && !running.has(j.id));
    const lagSeconds = lagsAt(lag, now);
    const r = admit({
      nowSeconds: now,
      caps: { maxCostPerHour: COST_CAP },
      config,
      running: [...running.values()].map((x) => x.job),
      waiting: waiting.map(queuedJob),
      lagSeconds,
    });
    lag = nextLagState(lagSeconds, r.classes, r.queued, now);
    const waitingClasses = new Set(waiting.map((j) => j.classId));
    for (const id of r.admitted) {
      const j = byId.get(id) as PropJob;
      running.set(id, { job: { ...queuedJob(j), admittedSeconds: now }, endRound: round + j.rounds });
      order.push(j);
      bothWaiting.push(waitingClasses.size === 2);
    }
    if (round > 10_000) throw new Error('the run does not end');
  }
  return { order, bothWaiting };
}

const arbRun = fc
  .record({
    weightA: fc.integer({ min: 1, max: 3 }),
    weightB: fc.integer({ min: 1, max: 3 }),
    bFirst: fc.boolean(),
    jobsA: fc.array(
      fc.record({ arrival: fc.integer({ min: 0, max: 200 }), rounds: fc.integer({ min: 5, max: 10 }) }),
      {
        minLength: 12,
        maxLength: 12,
      },
    ),
    jobsB: fc.array(
      fc.record({ arrival: fc.integer({ min: 0, max: 200 }), rounds: fc.integer({ min: 5, max: 10 }) }),
      {
        minLength: 12,
        maxLength: 12,
      },
    ),
    shares: fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { minLength: 24, maxLength: 24 }),
  })
  .map(({ weightA, weightB, bFirst, jobsA, jobsB, shares }) => {
    const wA = weightA / (weightA + weightB);
    const wB = 1 - wA;
    // Every job is bigger than either class's weight share (and at most the whole capacity): one runs at a time.
    const minShare = Math.max(wA, wB) + 0.01;
    const share = (i: number): number => minShare + (shares[i] as number) * (1 - minShare);
    const jobs: PropJob[] = [
      ...jobsA.map((j, i) => ({ id: `A${i}`, classId: 'A' as const, ...j, share: share(i) })),
      ...jobsB.map((j, i) => ({ id: `B${i}`, classId: 'B' as const, ...j, share: share(12 + i) })),
    ];
    const classes = [
      { id: 'A', weight: weightA, teams: ['A'], ordering: 'fifo' },
      { id: 'B', weight: weightB, teams: ['B'], ordering: 'fifo' },
    ];
    const config = parseWfqConfig({ classifyBy: 'team', classes: bFirst ? classes.reverse() : classes });
    return { wA, wB, jobs, config };
  });

describe('lag-ranked work conservation (property)', () => {
  it('neither of two backlogged classes waits through more than N admissions of the other in a row', () => {
    fc.assert(
      fc.property(arbRun, ({ wA, wB, jobs, config }) => {
        const { order, bothWaiting } = propertyRun(config, jobs);
        expect(order).toHaveLength(jobs.length);
        const shares = jobs.map((j) => j.share);
        const durations = jobs.map((j) => j.rounds);
        const minShare = Math.min(...shares);
        const spread = Math.max(...durations) / Math.min(...durations);
        // Each job of B that runs while A waits moves their lags apart by 2·w_A·share·duration; A's own last job
        // moved them the other way by at most 2·w_B·duration. So B runs at most ⌊(w_B/w_A)·spread/minShare⌋ + 1
        // jobs in a row while A waits (and the other way round). Ranked by the deficit of the moment alone, the
        // heavier class, or the one listed first, ran its whole line (12 jobs) while the other waited.
        const bound = (waiting: number, other: number) =>
          Math.floor((other / waiting) * (spread / minShare)) + 1;
        let streakClass: string | undefined;
        let streak = 0;
        order.forEach((j, i) => {
          if (!(bothWaiting[i] as boolean)) {
            streakClass = undefined;
            streak = 0;
            return;
          }
          streak = j.classId === streakClass ? streak + 1 : 1;
          streakClass = j.classId;
          const limit = j.classId === 'A' ? bound(wB, wA) : bound(wA, wB);
          expect(streak, `${j.classId} admitted ${streak} in a row (limit ${limit})`).toBeLessThanOrEqual(
            limit,
          );
        });
      }),
      { numRuns: 100 },
    );
  });
});
