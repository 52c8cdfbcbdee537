import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import type { GLPK } from 'glpk.js/node';
import { beforeAll, describe, expect, it } from 'vitest';
import { costBounds } from '../../src/bench/cost-bound.js';
import type { Catalog } from '../../src/core/catalog.js';
import type { Resources } from '../../src/core/resources.js';
import { loadIlpSolver } from '../../src/scheduler/ilp.js';
import { runSimulation } from '../../src/sim/run-simulation.js';
import { noticeHandlingOf } from '../../src/sim/run-request.js';
import type { GroundTruth } from '../../src/world/ground-truth.js';
import { createScheduler } from '../../src/scheduler/registry.js';
import type { TraceJob } from '../../src/world/trace.js';
import { ensureBuiltCli, runCli } from '../helpers/built-cli.js';
import { instanceType, testSpotMarket, trace, traceJob, traceTask } from '../sim/sim-fixtures.js';

let solver: GLPK;
beforeAll(async () => {
  solver = await loadIlpSolver();
});

/** A vCPU-rich and a memory-rich family at the same price: jobs with opposite shapes pack well together. */
const shapes: Catalog = {
  provider: 'test',
  region: 'test',
  types: [instanceType('cpu.x', [0, 4, 8], 1), instanceType('mem.x', [0, 2, 16], 1)],
};

/** A one-hour job of one task (`iterations` at throughput 1 = seconds). */
const hourJob = (id: string, demand: Resources, arrivalSeconds: number, hours = 1): TraceJob =>
  traceJob(id, {
    arrivalSeconds,
    iterations: hours * 3600,
    tasks: [traceTask('node0', { demand: { any: demand } })],
  });

describe('costBounds (fluid-fleet lower bounds)', () => {
  // A = [0, 4, 2] alone: one cpu.x ($1/h; on mem.x it needs two for its vCPUs). B = [0, 1, 8] alone: half a mem.x
  // ($0.50/h). Together on cpu.x: 5 vCPU and 10 GiB = 1.25 cpu.x, both dimensions tight: $1.25/h.
  const a = (arrival: number) => hourJob('a', [0, 4, 2], arrival);
  const b = (arrival: number) => hourJob('b', [0, 1, 8], arrival);

  it('overlapping jobs: both bounds are the shared fluid fleet ($1.25 for the hour)', () => {
    const r = costBounds(solver, shapes, [a(0), b(0)]);
    expect(r.workBound).toBeCloseTo(1.25, 9);
    expect(r.timedBound).toBeCloseTo(1.25, 9);
    expect(r.standaloneCost).toBeCloseTo(2, 9); // each alone on its cheapest whole type
    expect(r.segments).toBe(1);
  });

  it('disjoint jobs: the timed bound pays each hour alone ($1 + $0.50); the work bound still pools them', () => {
    const r = costBounds(solver, shapes, [a(0), b(3600)]);
    expect(r.timedBound).toBeCloseTo(1.5, 9);
    expect(r.workBound).toBeCloseTo(1.25, 9);
    expect(r.segments).toBe(2);
    // Accumulated at each event: $1 after A's hour, $0.50 more after B's.
    expect(r.timedSeries.timeSeconds).toEqual([0, 3600, 7200]);
    expect(r.timedSeries.cumulativeCost.map((c) => Number(c.toFixed(9)))).toEqual([0, 1, 1.5]);
  });

  it('integrates partial overlaps by segment and skips idle gaps', () => {
    // A in [0, 2h], B in [1h, 2h], then B again alone in [5h, 6h]: $1 + $1.25 + $0.50.
    const r = costBounds(solver, shapes, [
      hourJob('a', [0, 4, 2], 0, 2),
      b(3600),
      hourJob('b2', [0, 1, 8], 5 * 3600),
    ]);
    expect(r.timedBound).toBeCloseTo(2.75, 9);
    expect(r.segments).toBe(3);
  });

  it('keeps a task to the families that can host it alone (a GPU task only on the GPU type)', () => {
    const catalog: Catalog = {
      provider: 'test',
      region: 'test',
      types: [instanceType('g.x', [2, 8, 32], 6), instanceType('c.x', [0, 8, 32], 1)],
    };
    // Two half-GPU tasks' worth: one [1, 2, 4] task for an hour needs half a g.x = $3; the CPU type cannot help.
    const r = costBounds(solver, catalog, [hourJob('g', [1, 2, 4], 0)]);
    expect(r.workBound).toBeCloseTo(3, 9);
  });

  it('says which demand no type can host', () => {
    expect(() => costBounds(solver, shapes, [hourJob('x', [1, 1, 1], 0)])).toThrow(/no instance type.*1,1,1/);
  });
});

describe('costBounds with a spot market', () => {
  // The shapes catalog with spot pools: cpu.x $0.30 in zone a (>20%) and $0.50 in zone b (<5%, the
  // price-capacity-optimized one); mem.x $0.25.
  const spotShapes: Catalog = {
    ...shapes,
    spot: testSpotMarket(
      { typeName: 'cpu.x', zone: 'a', pricePerHour: 0.3, interruption: '>20%' },
      { typeName: 'cpu.x', zone: 'b', pricePerHour: 0.5, interruption: '<5%' },
      { typeName: 'mem.x', zone: 'a', pricePerHour: 0.25, interruption: '5-10%' },
    ),
  };
  const spotJob = (id: string, demand: Resources, spot: 'allowed' | 'never') => ({
    ...hourJob(id, demand, 0),
    spot,
  });

  it('prices spot capacity at the cheapest pool of each type', () => {
    // A = [0, 4, 2] for an hour: one cpu.x at its cheapest pool, $0.30 (not the $0.50 pool a launch would pick).
    const r = costBounds(solver, spotShapes, [spotJob('a', [0, 4, 2], 'allowed')], { spot: spotShapes.spot });
    expect(r.workBound).toBeCloseTo(0.3, 9);
    expect(r.timedBound).toBeCloseTo(0.3, 9);
    // Reservation prices stay on demand: the standalone cost is No-Packing's on-demand cost.
    expect(r.standaloneCost).toBeCloseTo(1, 9);
  });

  it('keeps the tasks of jobs that never run on spot on on-demand capacity', () => {
    // A (never) needs one on-demand cpu.x ($1; two mem.x for its vCPUs would be $2). B = [0, 1, 8] (allowed) then adds
    // 1 vCPU and 8 GiB to the cpu.x family: a quarter cpu.x on spot covers it ($0.075), cheaper than half a spot
    // mem.x ($0.125). Total $1.075.
    const jobs = [spotJob('a', [0, 4, 2], 'never'), spotJob('b', [0, 1, 8], 'allowed')];
    const r = costBounds(solver, spotShapes, jobs, { spot: spotShapes.spot });
    expect(r.workBound).toBeCloseTo(1.075, 9);
    expect(r.timedBound).toBeCloseTo(1.075, 9);
  });

  it('ignores the spot market unless asked (spot off: every instance on demand)', () => {
    const r = costBounds(solver, spotShapes, [hourJob('a', [0, 4, 2], 0), hourJob('b', [0, 1, 8], 0)]);
    expect(r.workBound).toBeCloseTo(1.25, 9);
  });
});

describe('no schedule beats the work bound', () => {
  const catalog: Catalog = {
    provider: 'test',
    region: 'test',
    types: [
      instanceType('g1.x', [1, 8, 32], 3),
      instanceType('g4.x', [4, 32, 128], 12),
      instanceType('c2.x', [0, 16, 32], 0.7),
      instanceType('r2.x', [0, 4, 64], 0.9),
    ],
  };
  const truth: GroundTruth = (_t, others) => 0.9 ** others.length;
  const jobArb = fc.record({
    arrivalSeconds: fc.integer({ min: 0, max: 4000 }),
    seconds: fc.integer({ min: 60, max: 8000 }),
    demands: fc.array(fc.constantFrom<Resources>([1, 4, 8], [0, 6, 16], [0, 2, 40], [2, 8, 60], [1, 8, 32]), {
      minLength: 1,
      maxLength: 2,
    }),
  });

  it('simulated cost ≥ work bound for every scheduler; timed and standalone ≥ work (fast-check)', () => {
    fc.assert(
      fc.property(fc.array(jobArb, { minLength: 1, maxLength: 8 }), (specs) => {
        const jobs = specs.map((s, n) =>
          traceJob(`j${n}`, {
            arrivalSeconds: s.arrivalSeconds,
            iterations: s.seconds,
            tasks: s.demands.map((d, k) => traceTask(`node${k}`, { demand: { any: d } })),
          }),
        );
        const bounds = costBounds(solver, catalog, jobs);
        expect(bounds.timedBound).toBeGreaterThanOrEqual(bounds.workBound - 1e-6);
        expect(bounds.standaloneCost).toBeGreaterThanOrEqual(bounds.workBound - 1e-6);
        for (const name of ['no-packing', 'eva', 'karpenter-balanced', 'stratus'] as const) {
          const result = runSimulation({
            trace: trace(...jobs),
            scheduler: createScheduler(name, { catalog, interferenceProfile: truth }),
            catalog,
            groundTruth: truth,
          });
          expect(result.summary.totalCost, name).toBeGreaterThanOrEqual(bounds.workBound - 1e-6);
        }
      }),
      { numRuns: 25 },
    );
  });
});

describe('no schedule beats the work bound at spot prices', () => {
  const catalog: Catalog = {
    provider: 'test',
    region: 'test',
    types: [instanceType('g1.x', [1, 8, 32], 3), instanceType('c2.x', [0, 16, 32], 0.7)],
    spot: testSpotMarket(
      { typeName: 'g1.x', zone: 'a', pricePerHour: 0.9, interruption: '>20%' },
      { typeName: 'g1.x', zone: 'b', pricePerHour: 1.2, interruption: '<5%' },
      { typeName: 'c2.x', zone: 'a', pricePerHour: 0.21, interruption: '<5%' },
    ),
  };
  const truth: GroundTruth = (_t, others) => 0.9 ** others.length;
  const jobArb = fc.record({
    arrivalSeconds: fc.integer({ min: 0, max: 4000 }),
    seconds: fc.integer({ min: 60, max: 8000 }),
    spot: fc.constantFrom('allowed' as const, 'never' as const, 'preferred' as const),
    demands: fc.array(fc.constantFrom<Resources>([1, 4, 8], [0, 6, 16], [0, 2, 20], [1, 8, 32]), {
      minLength: 1,
      maxLength: 2,
    }),
  });

  // The bound prices instance time: AWS charges nothing for a spot instance EC2 reclaims in its first hour, so a bill
  // may go below it by what those refunds took back (what such an instance accrued leaves the cumulative cost series
  // at its reclaim, the series' only falls), and the bill with them may not.
  it('simulated cost with spot on, first-hour refunds added back, ≥ the spot work bound (fast-check)', () => {
    fc.assert(
      fc.property(fc.array(jobArb, { minLength: 1, maxLength: 6 }), fc.nat(1000), (specs, seed) => {
        const jobs = specs.map((s, n) => ({
          ...traceJob(`j${n}`, {
            arrivalSeconds: s.arrivalSeconds,
            iterations: s.seconds,
            tasks: s.demands.map((d, k) => traceTask(`node${k}`, { demand: { any: d } })),
          }),
          spot: s.spot,
        }));
        const bounds = costBounds(solver, catalog, jobs, { spot: catalog.spot });
        const onDemand = costBounds(solver, catalog, jobs);
        expect(bounds.workBound).toBeLessThanOrEqual(onDemand.workBound + 1e-9);
        for (const name of ['eva', 'karpenter-spot', 'skypilot-spot'] as const) {
          const result = runSimulation({
            trace: trace(...jobs),
            scheduler: createScheduler(name, { catalog, interferenceProfile: truth, spot: true }),
            catalog,
            groundTruth: truth,
            spot: { seed, noticeHandling: noticeHandlingOf(name), burstsPerPoolPerMonth: 300 },
            maxSeriesPoints: Number.MAX_SAFE_INTEGER,
          });
          const c = result.series.cumulativeCost;
          const refunded = c.reduce((sum, v, i) => sum + Math.max(0, (c[i - 1] ?? v) - v), 0);
          expect(result.summary.totalCost + refunded, name).toBeGreaterThanOrEqual(bounds.workBound - 1e-6);
        }
      }),
      { numRuns: 15, seed: 1489992682 },
    );
  });
});

describe('fleetwise bench bound (CLI subprocess)', () => {
  beforeAll(() => ensureBuiltCli(), 180_000);

  it('prints one JSON object: pai_200 No-Packing as calibrated and its bounds', async () => {
    const r = await runCli(['bench', 'bound', '--format', 'eva', '--json']);
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stdout.trim().split('\n');
    expect(lines).toHaveLength(1);
    const out = JSON.parse(lines[0] as string) as Record<string, number>;
    expect(out.jobs).toBe(200);
    expect(out.noPackingCost).toBeCloseTo(20736.38, 2); // the simulator's calibration (digest §6 C)
    expect(out.workBound).toBeLessThanOrEqual(out.timedBound as number);
    expect(out.normalizedWorkBound).toBeGreaterThan(0.5);
    expect(out.normalizedWorkBound).toBeLessThan(0.6);
  });

  it('--spot on: the bounds at spot prices, below the on-demand ones; No-Packing stays on demand', async () => {
    const on = await runCli(['bench', 'bound', '--format', 'eva', '--spot', 'on', '--json']);
    expect(on.code, on.stderr).toBe(0);
    const out = JSON.parse(on.stdout.trim()) as Record<string, number | boolean>;
    expect(out.spot).toBe(true);
    expect(out.noPackingCost).toBeCloseTo(20736.38, 2);
    // The bundled catalog's cheapest spot pools cost 30-50% of on demand: the work bound falls from 0.56 of
    // No-Packing to under 0.2.
    expect(out.normalizedWorkBound).toBeGreaterThan(0.1);
    expect(out.normalizedWorkBound).toBeLessThan(0.2);
    // The table says the spot bounds are before EC2's first-hour refunds: a run with reclaims can be billed below.
    const table = await runCli(['bench', 'bound', '--format', 'eva', '--spot', 'on']);
    expect(table.code, table.stderr).toBe(0);
    expect(table.stdout).toMatch(
      /work bound .*spot where a job allows it, before first-hour reclaim refunds/,
    );
    const bad = await runCli(['bench', 'bound', '--format', 'eva', '--spot', 'yes']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--spot: must be off or on');
  });

  it('names a bad flag', async () => {
    const r = await runCli(['bench', 'bound', '--format', 'synthetic', '--jobs', '0']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--jobs: must be ≥ 1/);
    // Spot prices without --spot on would price nothing: refused as the flag's file, not blamed on the catalog.
    const dir = mkdtempSync(join(tmpdir(), 'fw-bound-'));
    try {
      const spotPrices = join(dir, 'spot.yaml');
      writeFileSync(spotPrices, 'spotPricePerType:\n  c7i.large: 0.03\n');
      const refused = await runCli(['bench', 'bound', '--format', 'eva', '--price-overrides', spotPrices]);
      expect(refused.code).toBe(2);
      expect(refused.stderr).toContain(
        `${spotPrices}\n  - spotPricePerType (line 1): prices spot instances: needs --spot on`,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
