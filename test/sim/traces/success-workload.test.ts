import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { loadCatalogFile } from '../../../src/cloud/catalog-file.js';
import { successSpecSchema, toDistribution, type SuccessSpec } from '../../../src/queue/success.js';
import { NoPackingScheduler } from '../../../src/scheduler/baselines/no-packing.js';
import { queueConfigFor } from '../../../src/sim/queue-options.js';
import { schedulerCaps } from '../../../src/round/plan-caps.js';
import { runSimulation } from '../../../src/sim/run-simulation.js';
import { createScheduler } from '../../../src/scheduler/registry.js';
import { loadTrace } from '../../../src/sim/traces/load.js';
import {
  continueProbabilityLowerBound,
  DEFAULT_SUCCESS_JOBS,
  DEFAULT_SUCCESS_MEAN_INTERARRIVAL_SECONDS,
  expectedRunSeconds,
  generateSuccessTrace,
  meanSuccessProbabilityFor,
  PHILLY_ATTEMPT_COUNTS,
} from '../../../src/sim/traces/success-workload.js';
import type { Trace, TraceJob } from '../../../src/world/trace.js';
import { findWorkload } from '../../../src/sim/traces/workloads.js';
import { workloadCatalog } from './fixtures.js';

type Stages = Extract<SuccessSpec, { kind: 'stages' }>;

function stagesOf(job: TraceJob): Stages {
  const s = job.success;
  if (s?.kind !== 'stages') throw new Error(`job ${job.id} declares no stages`);
  return s;
}

/** Number of stages the job ran: the prefix of its stages whose sum is its duration (0 when none is). */
function stagesRun(job: TraceJob): number {
  let sum = 0;
  const { stageSeconds } = stagesOf(job);
  for (let j = 0; j < stageSeconds.length; j++) {
    sum += stageSeconds[j] as number;
    if (sum === job.durationSeconds) return j + 1;
  }
  return 0;
}

const big = generateSuccessTrace({ workloadCatalog, seed: 42, jobs: 5000 });
const LO = continueProbabilityLowerBound(0.75);

describe('success workload (Yao/Paolieri/Golubchik §VI-A on Eva-style jobs)', () => {
  it('solves the continuation law for Philly’s 75% pass rate and sizes the arrivals for 8 slots', () => {
    expect(LO).toBeGreaterThan(0.58);
    expect(LO).toBeLessThan(0.6);
    expect(meanSuccessProbabilityFor(LO)).toBeCloseTo(0.75, 9);
    // Offered load 1 on 8 slots: E[run] / 8, with E[run] ≈ 1.97 stages × 4.67 h ≈ 9.2 h.
    expect(expectedRunSeconds(LO) / 3600).toBeCloseTo(9.2, 1);
    expect(DEFAULT_SUCCESS_MEAN_INTERARRIVAL_SECONDS).toBe(Math.round(expectedRunSeconds(LO) / 8));
    expect(DEFAULT_SUCCESS_MEAN_INTERARRIVAL_SECONDS).toBeGreaterThan(4100);
    expect(DEFAULT_SUCCESS_MEAN_INTERARRIVAL_SECONDS).toBeLessThan(4200);
  });

  it('is deterministic per seed, keeps the first N jobs whatever the count, and differs across seeds', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2 ** 31 }), fc.integer({ min: 1, max: 40 }), (seed, jobs) => {
        const a = generateSuccessTrace({ workloadCatalog, seed, jobs });
        expect(generateSuccessTrace({ workloadCatalog, seed, jobs })).toEqual(a);
        const longer = generateSuccessTrace({ workloadCatalog, seed, jobs: jobs + 5 });
        expect(longer.jobs.slice(0, jobs)).toEqual(a.jobs);
        const other = generateSuccessTrace({ workloadCatalog, seed: seed + 1, jobs });
        expect(other.jobs.map((j) => [j.arrivalSeconds, j.success])).not.toEqual(
          a.jobs.map((j) => [j.arrivalSeconds, j.success]),
        );
      }),
      { numRuns: 25 },
    );
    expect(generateSuccessTrace({ workloadCatalog, seed: 3 }).jobs).toHaveLength(DEFAULT_SUCCESS_JOBS);
  });

  it('gives every job a valid declared model, an outcome drawn from it and the iterations it actually runs', () => {
    let previousArrival = 0;
    for (const job of big.jobs) {
      const stages = stagesOf(job);
      expect(successSpecSchema.safeParse(job.success).success, `job ${job.id}`).toBe(true);
      const m = stages.stageSeconds.length;
      // M = A + 1 with A from Table XV (1 … 7 attempts).
      expect(m).toBeGreaterThanOrEqual(2);
      expect(m).toBeLessThanOrEqual(8);
      expect(stages.continueProbabilities).toHaveLength(m - 1);
      for (const c of stages.continueProbabilities) {
        expect(c).toBeGreaterThanOrEqual(LO);
        expect(c).toBeLessThan(1);
      }
      for (const d of stages.stageSeconds) {
        expect(Number.isInteger(d)).toBe(true);
        expect(d).toBeGreaterThanOrEqual(Math.floor(10 ** 1.5 * 60)); // Eva's short range, per stage
        expect(d).toBeLessThanOrEqual(60_000);
      }
      const ran = stagesRun(job);
      expect(ran, `job ${job.id} runs a prefix of its stages`).toBeGreaterThan(0);
      expect(job.successful).toBe(ran === m);
      expect(job.durationSeconds).toBe(stages.stageSeconds.slice(0, ran).reduce((s, d) => s + d, 0));
      expect(job.totalIterations).toBe(Math.max(1, Math.floor(job.durationSeconds * job.fullThroughput)));
      const w = findWorkload(workloadCatalog, job.workload);
      expect(job.name).toBe(w.name);
      expect(job.fullThroughput).toBe(w.fullThroughput);
      expect(job.initDelaySeconds).toBe(w.initDelaySeconds);
      expect(job.tasks).toHaveLength(1);
      expect(job.tasks[0]?.demand).toEqual(w.demand);
      expect(job.arrivalSeconds).toBeGreaterThanOrEqual(previousArrival);
      previousArrival = job.arrivalSeconds;
    }
    expect(new Set(big.jobs.map((j) => j.workload)).size).toBe(9);
  });

  it('stops jobs at each stage as often as their own declared model says (5,000 jobs)', () => {
    // Per stage index j (1-based): observed jobs ending there vs Σ_jobs p_j (the Poisson-binomial mean), within
    // 4.5 standard deviations.
    const maxStages = PHILLY_ATTEMPT_COUNTS.length + 1;
    const observed = Array<number>(maxStages).fill(0);
    const expected = Array<number>(maxStages).fill(0);
    const variance = Array<number>(maxStages).fill(0);
    for (const job of big.jobs) {
      observed[stagesRun(job) - 1] = (observed[stagesRun(job) - 1] as number) + 1;
      toDistribution(stagesOf(job)).endProbabilities.forEach((p, j) => {
        expected[j] = (expected[j] as number) + p;
        variance[j] = (variance[j] as number) + p * (1 - p);
      });
    }
    for (let j = 0; j < maxStages; j++)
      expect(
        Math.abs((observed[j] as number) - (expected[j] as number)),
        `stage ${j + 1}: observed ${observed[j]}, expected ${expected[j]?.toFixed(1)}`,
      ).toBeLessThanOrEqual(4.5 * Math.sqrt(variance[j] as number) + 1);
    // The bulk: about a quarter of the jobs stop after their first stage, three quarters succeed.
    expect((observed[0] as number) / big.jobs.length).toBeGreaterThan(0.18);
    const succeeded = big.jobs.filter((j) => j.successful).length / big.jobs.length;
    expect(succeeded).toBeGreaterThan(0.72);
    expect(succeeded).toBeLessThan(0.78);
  });

  it('draws each job’s outcome from its own continuation probability (calibrated in bins of c₁)', () => {
    const bins = [
      [LO, 0.72],
      [0.72, 0.86],
      [0.86, 1],
    ] as const;
    for (const [lo, hi] of bins) {
      const inBin = big.jobs.filter((j) => {
        const c = stagesOf(j).continueProbabilities[0] as number;
        return c >= lo && c < hi;
      });
      expect(inBin.length).toBeGreaterThan(1000);
      const continued = inBin.filter((j) => stagesRun(j) > 1).length;
      const mean = inBin.reduce((s, j) => s + (stagesOf(j).continueProbabilities[0] as number), 0);
      const sd = Math.sqrt(inBin.length * 0.25);
      expect(Math.abs(continued - mean), `c₁ in [${lo.toFixed(2)}, ${hi}]`).toBeLessThan(4 * sd);
    }
  });

  it('follows Table XV for the stage count and the analytic mean run time', () => {
    const total = PHILLY_ATTEMPT_COUNTS.reduce((s, c) => s + c, 0);
    const twoStage = big.jobs.filter((j) => stagesOf(j).stageSeconds.length === 2).length / big.jobs.length;
    expect(twoStage).toBeCloseTo((PHILLY_ATTEMPT_COUNTS[0] as number) / total, 1); // 0.866
    const sixStage = big.jobs.filter((j) => stagesOf(j).stageSeconds.length === 6).length / big.jobs.length;
    expect(sixStage).toBeGreaterThan(0.04); // Table XV's 5-attempt bump (5.98%)
    const meanRun = big.jobs.reduce((s, j) => s + j.durationSeconds, 0) / big.jobs.length;
    expect(meanRun / expectedRunSeconds(LO)).toBeGreaterThan(0.95);
    expect(meanRun / expectedRunSeconds(LO)).toBeLessThan(1.05);
  });

  it('arrives as a Poisson stream at the documented rate, scaled by arrivalRateScale', () => {
    const last = (t: Trace): number => t.jobs.at(-1)?.arrivalSeconds ?? 0;
    expect(last(big) / big.jobs.length / DEFAULT_SUCCESS_MEAN_INTERARRIVAL_SECONDS).toBeGreaterThan(0.95);
    expect(last(big) / big.jobs.length / DEFAULT_SUCCESS_MEAN_INTERARRIVAL_SECONDS).toBeLessThan(1.05);
    const fast = generateSuccessTrace({ workloadCatalog, seed: 42, jobs: 5000, arrivalRateScale: 2 });
    expect(last(fast) / last(big)).toBeCloseTo(0.5, 3);
    // Only the arrivals change.
    expect(fast.jobs.map((j) => j.success)).toEqual(big.jobs.map((j) => j.success));
  });

  it('moves the mean success rate with meanSuccessProbability, only turning failures into successes', () => {
    const low = generateSuccessTrace({ workloadCatalog, seed: 42, jobs: 5000, meanSuccessProbability: 0.5 });
    const share = low.jobs.filter((j) => j.successful).length / low.jobs.length;
    expect(share).toBeGreaterThan(0.47);
    expect(share).toBeLessThan(0.53);
    // Common random numbers: same stage lengths; a job that succeeds at 0.5 also succeeds at 0.75.
    low.jobs.forEach((j, i) => {
      const hi = big.jobs[i] as TraceJob;
      expect(stagesOf(j).stageSeconds).toEqual(stagesOf(hi).stageSeconds);
      expect(stagesRun(j)).toBeLessThanOrEqual(stagesRun(hi));
    });
    expect(() => generateSuccessTrace({ workloadCatalog, meanSuccessProbability: 0.3 })).toThrow(
      /meanSuccessProbability 0.3 is below 0.45/,
    );
    expect(() => generateSuccessTrace({ workloadCatalog, meanSuccessProbability: 1 })).toThrow(
      /meanSuccessProbability/,
    );
    expect(() => generateSuccessTrace({ workloadCatalog, jobs: 0 })).toThrow(/jobs/);
  });

  it('multi-task share gives 2- or 4-task jobs with the same stages', () => {
    const multi = generateSuccessTrace({ workloadCatalog, seed: 42, jobs: 200, multiTaskShare: 1 });
    for (const j of multi.jobs) expect([2, 4]).toContain(j.tasks.length);
    expect(multi.jobs.map((j) => j.success)).toEqual(big.jobs.slice(0, 200).map((j) => j.success));
  });
});

describe('success traces through loadTrace and the simulator', () => {
  it('loads as format "success" (400 jobs, seed 0 by default) and refuses a path', () => {
    const t = loadTrace(undefined, { format: 'success' });
    expect(t.jobs).toHaveLength(400);
    expect(t.name).toBe('success (seed 0, 400 jobs)');
    expect(t).toEqual(generateSuccessTrace({ workloadCatalog, seed: 0 }));
    const s = loadTrace(undefined, { format: 'success', seed: 1, jobs: 30, arrivalRateScale: 2 });
    expect(s).toEqual(generateSuccessTrace({ workloadCatalog, seed: 1, jobs: 30, arrivalRateScale: 2 }));
    expect(() => loadTrace('x.json', { format: 'success' })).toThrow(/generated, not read/);
  });

  const catalog = loadCatalogFile();
  const flat = (): number => 1;
  const trace = loadTrace(undefined, { format: 'success', seed: 1, jobs: 12 });

  it('runs only the drawn stages: a failed job ends before its declared full size', () => {
    // No-Packing, no interference, no cap: JCT = launch/round delays + the drawn duration.
    const r = runSimulation({
      trace,
      catalog,
      groundTruth: flat,
      scheduler: new NoPackingScheduler(catalog),
    });
    expect(trace.jobs.some((j) => j.successful === false)).toBe(true);
    for (const job of trace.jobs) {
      const o = r.jobs.find((x) => x.id === job.id);
      expect(o?.successful).toBe(job.successful);
      const jct = o?.jctSeconds ?? Number.NaN;
      expect(jct).toBeGreaterThanOrEqual(job.durationSeconds);
      // Every stage is ≥ 1,897 s, more than the delays, so a failed job visibly skips its later stages.
      expect(jct - job.durationSeconds).toBeLessThan(1800);
    }
  });

  it('simulates under an instance cap with fifo and success-rank, every job finishing', () => {
    const caps = { maxInstances: 2 };
    const sizes = trace.jobs.map((j) => j.durationSeconds * j.tasks.length);
    for (const kind of ['fifo', 'success-rank'] as const) {
      const r = runSimulation({
        trace,
        catalog,
        groundTruth: flat,
        scheduler: createScheduler('eva', { catalog, interferenceProfile: flat, caps: schedulerCaps(caps) }),
        queue: { caps, config: queueConfigFor(kind, sizes) },
      });
      expect(
        r.jobs.every((j) => j.endSeconds !== null),
        kind,
      ).toBe(true);
      for (const job of trace.jobs)
        expect(r.jobs.find((x) => x.id === job.id)?.jctSeconds).toBeGreaterThanOrEqual(job.durationSeconds);
      expect(r.queue?.successfulSojournMeanHours).toBeGreaterThan(0);
    }
  });
});
