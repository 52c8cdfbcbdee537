import { Command } from 'commander';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { runOptimalityBench, type BenchWorkload } from '../../src/bench/optimality.js';
import { registerBench } from '../../src/cli/commands/bench.js';
import { formatReport } from '../../src/cli/commands/bench-optimality.js';
import type { Catalog, InstanceType } from '../../src/core/catalog.js';
import type { Resources } from '../../src/core/resources.js';
import { ValidationError } from '../../src/core/validation.js';

const delays = {
  instantiateSeconds: 0,
  workerStartSeconds: 0,
  workerRegisterSeconds: 0,
  terminateSeconds: 0,
};
const type = (name: string, capacity: Resources, costPerHour: number): InstanceType => ({
  name,
  family: name.split('.')[0] as string,
  capacity,
  costPerHour,
  delays,
});

// Eva Table 3's types and three of its tasks: a big task's A instance has room for the small ones.
const catalog: Catalog = {
  provider: 'test',
  region: 'test',
  types: [
    type('a.x', [4, 16, 244], 12),
    type('b.x', [1, 4, 61], 3),
    type('c.x', [0, 8, 32], 0.8),
    type('d.x', [0, 4, 16], 0.4),
  ],
};
const workloads: BenchWorkload[] = [
  { name: 'big', demand: { any: [2, 8, 24] } },
  { name: 'gpu', demand: { any: [1, 4, 10] } },
  { name: 'cpu', demand: { any: [0, 4, 12] } },
];

describe('runOptimalityBench', () => {
  it('reports heuristic and No-Packing cost relative to the proven optimum, per trial and on average', async () => {
    const report = await runOptimalityBench({
      catalog,
      workloads,
      tasksPerTrial: 6,
      trials: 4,
      seed: 5,
      timeLimitSeconds: 10,
    });
    expect(report.optimalTrials).toBe(4);
    expect(report.trials).toHaveLength(4);
    for (const t of report.trials) {
      expect(t.ilpStatus).toBe('optimal');
      expect(t.tasks).toBe(6);
      expect(Object.values(t.workloads).reduce((s, n) => s + n, 0)).toBe(6);
      // No-Packing is Σ reservation prices: $12 per big task, $3 per gpu task, $0.4 per cpu task.
      const { big = 0, gpu = 0, cpu = 0 } = t.workloads;
      expect(t.noPackingCostPerHour).toBeCloseTo(12 * big + 3 * gpu + 0.4 * cpu, 9);
      expect(t.heuristicRatio as number).toBeGreaterThanOrEqual(1);
      expect(t.noPackingRatio).toBeCloseTo(t.noPackingCostPerHour / (t.ilpCostPerHour as number), 5);
    }
    const ratios = report.trials.map((t) => t.heuristicRatio as number);
    expect(report.meanRatio).toBeCloseTo(ratios.reduce((s, x) => s + x, 0) / ratios.length, 5);
    expect(report.maxRatio).toBe(Math.max(...ratios));
    expect(report.noPackingRatio as number).toBeGreaterThan(1);
  });

  it('is reproducible from its seed and differs across seeds', async () => {
    const run = (seed: number) =>
      runOptimalityBench({ catalog, workloads, tasksPerTrial: 5, trials: 3, seed, timeLimitSeconds: 10 });
    const strip = (r: Awaited<ReturnType<typeof run>>) =>
      r.trials.map((t) => [t.sampleSeed, t.workloads, t.ilpCostPerHour]);
    expect(strip(await run(9))).toEqual(strip(await run(9)));
    expect(strip(await run(9))).not.toEqual(strip(await run(10)));
  });

  it('rates a No-Packing heuristic at the No-Packing ratio, and refuses an invalid packing', async () => {
    const noPacking = await runOptimalityBench({
      catalog,
      workloads,
      tasksPerTrial: 5,
      trials: 2,
      seed: 1,
      timeLimitSeconds: 10,
      heuristic: (book, tasks) => ({
        instances: tasks.map((t, i) => ({
          id: `n${i}`,
          typeName: book.minType(t.demand)?.name ?? '',
          isNew: true,
          taskIds: [t.id],
        })),
      }),
    });
    expect(noPacking.meanRatio).toBeCloseTo(noPacking.noPackingRatio as number, 5);
    await expect(
      runOptimalityBench({
        catalog,
        workloads,
        tasksPerTrial: 3,
        trials: 1,
        seed: 1,
        timeLimitSeconds: 10,
        heuristic: () => ({ instances: [] }),
      }),
    ).rejects.toThrow(/not placed/);
  });
});

describe('fleetwise bench optimality', () => {
  afterEach(() => vi.restoreAllMocks());

  const run = async (args: string[]): Promise<string> => {
    let out = '';
    vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
      out += String(chunk);
      return true;
    });
    const program = new Command('fleetwise').exitOverride();
    registerBench(program);
    await program.parseAsync(['node', 'fleetwise', 'bench', 'optimality', ...args]);
    return out;
  };

  it('prints exactly one JSON object with the summary and per-trial details (bundled catalog and workloads)', async () => {
    const out = await run(['--tasks', '8', '--trials', '2', '--seed', '3', '--json']);
    const lines = out.trim().split('\n');
    expect(lines).toHaveLength(1);
    const report = JSON.parse(lines[0] as string) as Record<string, unknown>;
    expect(Object.keys(report).slice(0, 4)).toEqual([
      'meanRatio',
      'maxRatio',
      'optimalTrials',
      'noPackingRatio',
    ]);
    expect(report.optimalTrials).toBe(2);
    expect(report.trials).toHaveLength(2);
    expect(report.meanRatio as number).toBeGreaterThanOrEqual(1);
  });

  it('tells stderr of each trial as it ends, keeping stdout for the report', async () => {
    let err = '';
    vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
      err += String(chunk);
      return true;
    });
    const out = await run(['--tasks', '4', '--trials', '2', '--json']);
    expect(err).toMatch(/^bench optimality: trial 0 \(ILP optimal, Full\/ILP [\d.]+, [\d.]+ s\) done; /m);
    expect(err).toMatch(/^bench optimality: trial 1 \(ILP optimal, .* done; /m);
    expect(err.trim().split('\n')).toHaveLength(2);
    expect(out.trim().split('\n')).toHaveLength(1);
  });

  it('prints a table without --json', async () => {
    const out = await run(['--tasks', '4', '--trials', '1']);
    expect(out).toMatch(/Full\/ILP/);
    expect(out).toMatch(/trials with a proven optimum: 1\/1/);
  });

  it('rejects bad options naming the option and the reason', async () => {
    await expect(run(['--tasks', '0', '--json'])).rejects.toThrow(ValidationError);
    // Named by the flag, with a reason a person can act on.
    await expect(run(['--time-limit', 'soon'])).rejects.toThrow(/--time-limit: must be a number/);
    await expect(run(['--seed', 'x'])).rejects.toThrow(/--seed: must be a number/);
    await expect(run(['--trials', '1.5'])).rejects.toThrow(/--trials: must be a whole number/);
  });

  it('formats missing optima as dashes', () => {
    const text = formatReport({
      meanRatio: null,
      maxRatio: null,
      optimalTrials: 0,
      noPackingRatio: null,
      tasksPerTrial: 3,
      seed: 1,
      timeLimitSeconds: 1,
      totalSeconds: 1,
      trials: [],
    });
    expect(text).toMatch(/mean -, max -/);
  });
});
