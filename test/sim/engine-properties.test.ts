import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Catalog, InstanceType } from '../../src/core/catalog.js';
import type { ClusterSnapshot } from '../../src/core/model.js';
import { demandOn, fits, type Resources } from '../../src/core/resources.js';
import { Rng } from '../../src/core/random.js';
import type { Configuration, Plan, Scheduler } from '../../src/scheduler/types.js';
import { runSimulation } from '../../src/sim/run-simulation.js';
import type { GroundTruth } from '../../src/world/ground-truth.js';
import { COST_PARTS } from '../../src/world/cost-ledger.js';
import type { RunResult } from '../../src/world/run-result.js';
import type { TraceJob } from '../../src/world/trace.js';
import { instanceType, trace, traceJob, traceTask } from './sim-fixtures.js';

const catalog: Catalog = {
  provider: 'test',
  region: 'test',
  types: [
    instanceType('g1.x', [1, 8, 32], 3, {
      instantiateSeconds: 20,
      workerStartSeconds: 50,
      workerRegisterSeconds: 100,
    }),
    instanceType('g4.x', [4, 32, 128], 12, {
      instantiateSeconds: 35,
      workerStartSeconds: 60,
      workerRegisterSeconds: 130,
    }),
    instanceType('c2.x', [0, 16, 32], 0.7, {
      instantiateSeconds: 7,
      workerStartSeconds: 60,
      workerRegisterSeconds: 85,
    }),
  ],
};

const PAIRS: Record<string, number> = { 'a|a': 0.9, 'a|b': 0.7, 'b|a': 0.95, 'b|b': 0.8, 'c|a': 0.6 };
const truth: GroundTruth = (target, others) =>
  others.reduce((r, o) => r * (PAIRS[`${target}|${o}`] ?? 0.85), 1);

/**
 * A scheduler that churns: each round it places queued jobs anywhere they fit (existing or new instances of a
 * random type), moves some running jobs, and returns a few to the queue. Deterministic given its seed.
 */
class ChurningScheduler implements Scheduler {
  readonly name = 'churn';
  private readonly rng: Rng;
  constructor(seed: number) {
    this.rng = new Rng(seed);
  }
  observe(): void {}
  plan(snapshot: ClusterSnapshot): Plan {
    const types = new Map(catalog.types.map((t) => [t.name, t]));
    const plan = new Map<string, { typeName: string; isNew: boolean; taskIds: string[]; used: Resources }>();
    for (const i of snapshot.instances)
      plan.set(i.id, { typeName: i.typeName, isNew: false, taskIds: [], used: [0, 0, 0] });
    const tasks = new Map(snapshot.tasks.map((t) => [t.id, t]));
    const put = (taskId: string, instId: string): boolean => {
      const p = plan.get(instId);
      const type = types.get(p?.typeName ?? '') as InstanceType;
      const d = demandOn(tasks.get(taskId)?.demand ?? {}, type.family);
      if (p === undefined || d === undefined) return false;
      const used: Resources = [p.used[0] + d[0], p.used[1] + d[1], p.used[2] + d[2]];
      if (!fits(used, type.capacity)) return false;
      p.used = used;
      p.taskIds.push(taskId);
      return true;
    };
    const place = (taskId: string): void => {
      const ids = [...plan.keys()];
      const start = this.rng.int(ids.length + 1);
      for (let k = 0; k < ids.length; k++) if (put(taskId, ids[(start + k) % ids.length] as string)) return;
      const fitting = catalog.types.filter((t) => {
        const d = demandOn(tasks.get(taskId)?.demand ?? {}, t.family);
        return d !== undefined && fits(d, t.capacity);
      });
      const id = `new-${plan.size + 1}`;
      plan.set(id, { typeName: this.rng.pick(fitting).name, isNew: true, taskIds: [], used: [0, 0, 0] });
      put(taskId, id);
    };
    const decided = snapshot.jobs.map((job) => {
      const placed = job.taskIds.every((t) => tasks.get(t)?.instanceId !== undefined);
      const r = this.rng.next();
      const action =
        !job.reconfigurable || (placed && r < 0.75) ? 'stay' : placed && r > 0.95 ? 'evict' : 'place';
      return { job, action };
    });
    // Staying jobs first (their instances must hold them), then the rest.
    for (const { job, action } of decided)
      if (action === 'stay')
        for (const t of job.taskIds) {
          const at = tasks.get(t)?.instanceId;
          if (at !== undefined && !put(t, at)) throw new Error('a staying task no longer fits');
        }
    for (const { job, action } of decided) if (action === 'place') for (const t of job.taskIds) place(t);
    const configuration: Configuration = {
      instances: [...plan]
        .filter(([, p]) => p.taskIds.length > 0 || this.rng.next() < 0.2)
        .map(([id, p]) => ({ id, typeName: p.typeName, isNew: p.isNew, taskIds: p.taskIds })),
    };
    return {
      configuration,
      decision: {
        scheduler: this.name,
        nowSeconds: snapshot.nowSeconds,
        candidates: [],
        chosen: this.rng.next() < 0.1 ? 'full' : 'partial',
        reason: 'churn',
        waiting: [],
        pinned: [],
      },
    };
  }
}

const jobArb = fc.record({
  arrivalSeconds: fc.integer({ min: 0, max: 3000 }),
  iterations: fc.integer({ min: 20, max: 3000 }),
  fullThroughput: fc.constantFrom(0.5, 1, 2.1),
  initDelaySeconds: fc.integer({ min: 0, max: 100 }),
  workload: fc.constantFrom('a', 'b', 'c'),
  taskDemands: fc.array(fc.constantFrom<Resources>([1, 4, 8], [0, 6, 16], [2, 8, 60], [1, 8, 32]), {
    minLength: 1,
    maxLength: 2,
  }),
  imageId: fc.constantFrom('i1', 'i2'),
});

type JobSpec = typeof jobArb extends fc.Arbitrary<infer T> ? T : never;

function buildTrace(specs: readonly JobSpec[]): TraceJob[] {
  return specs.map((s, n) =>
    traceJob(`j${n}`, {
      arrivalSeconds: s.arrivalSeconds,
      iterations: s.iterations,
      fullThroughput: s.fullThroughput,
      initDelaySeconds: s.initDelaySeconds,
      workload: s.workload,
      tasks: s.taskDemands.map((d, k) => traceTask(`node${k}`, { demand: { any: d }, imageId: s.imageId })),
    }),
  );
}

function withoutWallTime(r: RunResult): unknown {
  return { ...r, summary: { ...r.summary, wallSeconds: 0 } };
}

describe('engine invariants under a churning scheduler', () => {
  it('finishes every job no sooner than its standalone duration, keeps billing and capacity consistent', () => {
    let movedJobs = 0;
    fc.assert(
      fc.property(fc.array(jobArb, { minLength: 1, maxLength: 6 }), fc.integer(), (specs, seed) => {
        const jobs = buildTrace(specs);
        const stopsIssued: { jobId: string; timeSeconds: number }[] = [];
        const result = runSimulation({
          trace: trace(...jobs),
          scheduler: new ChurningScheduler(seed),
          catalog,
          groundTruth: truth,
          onEvent: (e) => {
            if (e.kind === 'checkpoint-issued' && e.jobId !== undefined)
              stopsIssued.push({ jobId: e.jobId, timeSeconds: e.timeSeconds });
          },
        });
        const byId = new Map(jobs.map((j) => [j.id, j]));
        for (const outcome of result.jobs) {
          const spec = byId.get(outcome.id) as TraceJob;
          expect(outcome.endSeconds).not.toBeNull();
          expect(outcome.startSeconds as number).toBeGreaterThanOrEqual(
            spec.arrivalSeconds + spec.initDelaySeconds,
          );
          // Rates are at most 1 and only active time counts, so a job takes at least its duration.
          expect((outcome.endSeconds as number) - (outcome.startSeconds as number)).toBeGreaterThanOrEqual(
            spec.durationSeconds - 1e-6,
          );
        }
        const s = result.series;
        expect(s.runningInstances.at(-1)).toBe(0);
        expect(s.cumulativeCost.at(-1)).toBeCloseTo(result.summary.totalCost, 6);
        // Where the dollars went: every part ≥ 0, adding up to the bill; a move's checkpoint is paid for.
        const parts = Object.values(result.costBreakdown ?? {});
        expect(parts).toHaveLength(COST_PARTS.length);
        for (const dollars of parts) expect(dollars).toBeGreaterThanOrEqual(0);
        expect(parts.reduce((a, b) => a + b, 0)).toBeCloseTo(result.summary.totalCost, 6);
        // A move counts when its stop is issued (in both runtimes); one issued at the very instant its job completes
        // (a round sees a job ending at it still running) checkpoints nothing, so only a stop issued before its job's
        // end must be paid for.
        const ends = new Map(result.jobs.map((j) => [j.id, j.endSeconds as number]));
        if (stopsIssued.some((s) => s.timeSeconds < (ends.get(s.jobId) as number)))
          expect(result.costBreakdown?.checkpointing).toBeGreaterThan(0);
        expect(s.migrations.at(-1)).toBe(result.jobs.reduce((a, j) => a + j.migrations, 0));
        movedJobs += result.jobs.filter((j) => j.migrations > 0).length;
        for (let i = 0; i < s.timeSeconds.length; i++) {
          if (i > 0)
            expect(s.cumulativeCost[i] as number).toBeGreaterThanOrEqual(
              (s.cumulativeCost[i - 1] as number) - 1e-9,
            );
          expect(s.allocatedGpus[i] as number).toBeLessThanOrEqual((s.capacityGpus[i] as number) + 1e-9);
          expect(s.allocatedVcpus[i] as number).toBeLessThanOrEqual((s.capacityVcpus[i] as number) + 1e-9);
          expect(s.allocatedMemoryGiB[i] as number).toBeLessThanOrEqual(
            (s.capacityMemoryGiB[i] as number) + 1e-9,
          );
          expect(s.costPerHour[i] as number).toBeLessThanOrEqual(result.summary.peakCostPerHour + 1e-9);
        }
        expect(result.summary.fullReconfigFraction).toBeGreaterThanOrEqual(0);
        expect(result.summary.fullReconfigFraction).toBeLessThanOrEqual(1);
      }),
      { numRuns: 60 },
    );
    expect(movedJobs).toBeGreaterThan(10); // the churn did exercise moves and evictions
  });

  it('is deterministic: the same inputs give the same result, with no state shared between runs', () => {
    fc.assert(
      fc.property(fc.array(jobArb, { minLength: 1, maxLength: 6 }), fc.integer(), (specs, seed) => {
        const t = trace(...buildTrace(specs));
        const a = runSimulation({
          trace: t,
          scheduler: new ChurningScheduler(seed),
          catalog,
          groundTruth: truth,
        });
        const b = runSimulation({
          trace: t,
          scheduler: new ChurningScheduler(seed),
          catalog,
          groundTruth: truth,
        });
        expect(withoutWallTime(b)).toEqual(withoutWallTime(a));
      }),
      { numRuns: 25 },
    );
  });
});
