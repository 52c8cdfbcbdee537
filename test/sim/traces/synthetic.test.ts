import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { generateSyntheticTrace } from '../../../src/sim/traces/synthetic.js';
import { findWorkload } from '../../../src/sim/traces/workloads.js';
import { workloadCatalog } from './fixtures.js';

describe('synthetic traces (Eva multi-task experiment style, digest §5.3)', () => {
  it('draws 100 single-task jobs from the 9 single-task workloads with their own demands', () => {
    const t = generateSyntheticTrace({ workloadCatalog, seed: 10 });
    expect(t.jobs).toHaveLength(100);
    for (const j of t.jobs) {
      const w = findWorkload(workloadCatalog, j.name);
      expect(j.workload).toBe(w.name);
      expect(j.tasks).toHaveLength(1);
      expect(j.tasks[0]?.demand).toEqual(w.demand);
      expect(j.initDelaySeconds).toBe(w.initDelaySeconds);
      expect(j.totalIterations).toBe(Math.floor(j.durationSeconds * w.fullThroughput));
    }
    expect(new Set(t.jobs.map((j) => j.workload)).size).toBe(9);
    // a3c keeps its per-family demand (more vCPUs on p3 than on c7i/r7i)
    const a3c = t.jobs.find((j) => j.workload === 'a3c');
    expect(a3c?.tasks[0]?.demand).toEqual({ p3: [0, 10, 8], c7i: [0, 4, 8], r7i: [0, 4, 8] });
  });

  it('gives every job k identical tasks with tasksPerJob = k', () => {
    const t = generateSyntheticTrace({ workloadCatalog, seed: 11, jobs: 20, tasksPerJob: 4 });
    for (const j of t.jobs) {
      expect(j.tasks).toHaveLength(4);
      // Identical but for their names node0…node3 (unique per job, as Eva's multi-node workloads).
      expect(new Set(j.tasks.map(({ name: _name, ...rest }) => JSON.stringify(rest))).size).toBe(1);
      expect(j.tasks.map((x) => x.name)).toEqual(['node0', 'node1', 'node2', 'node3']);
    }
  });

  it('restricts the workloads for pairwise-interference experiments', () => {
    const t = generateSyntheticTrace({
      workloadCatalog,
      seed: 12,
      jobs: 40,
      workloads: ['gpt2', 'resnet18'],
    });
    expect(new Set(t.jobs.map((j) => j.workload))).toEqual(new Set(['gpt2', 'resnet18']));
    expect(() => generateSyntheticTrace({ workloadCatalog, workloads: ['bert'] })).toThrow(
      /unknown workload bert/,
    );
    expect(() => generateSyntheticTrace({ workloadCatalog, tasksPerJob: 4, multiTaskShare: 0.5 })).toThrow(
      /either tasksPerJob/,
    );
    expect(() => generateSyntheticTrace({ workloadCatalog, tasksPerJob: 0 })).toThrow(/tasksPerJob:/);
  });

  it('is deterministic per seed, with short Gavel durations and ordered arrivals', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2 ** 31 }), fc.integer({ min: 1, max: 60 }), (seed, jobs) => {
        const a = generateSyntheticTrace({ workloadCatalog, seed, jobs });
        expect(generateSyntheticTrace({ workloadCatalog, seed, jobs })).toEqual(a);
        expect(a.jobs).toHaveLength(jobs);
        a.jobs.forEach((j, i) => {
          expect(j.durationSeconds).toBeGreaterThanOrEqual(Math.floor(10 ** 1.5 * 60));
          expect(j.durationSeconds).toBeLessThan(60_000);
          if (i > 0) expect(j.arrivalSeconds).toBeGreaterThanOrEqual(a.jobs[i - 1]?.arrivalSeconds ?? 0);
        });
      }),
      { numRuns: 30 },
    );
  });

  it('scales the arrival rate', () => {
    const slow = generateSyntheticTrace({ workloadCatalog, seed: 5, jobs: 500 });
    const fast = generateSyntheticTrace({ workloadCatalog, seed: 5, jobs: 500, arrivalRateScale: 4 });
    const last = (t: typeof slow): number => t.jobs.at(-1)?.arrivalSeconds ?? 0;
    expect(last(slow) / 500).toBeGreaterThan(1200 * 0.85);
    expect(last(slow) / 500).toBeLessThan(1200 * 1.15);
    expect(last(fast) / last(slow)).toBeCloseTo(0.25, 2);
  });
});
