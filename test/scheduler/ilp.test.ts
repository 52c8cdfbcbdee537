import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Catalog, InstanceType } from '../../src/core/catalog.js';
import { Rng } from '../../src/core/random.js';
import { fits, type FamilyDemand, type Resources } from '../../src/core/resources.js';
import { packFromScratch } from '../../src/scheduler/full-reconfiguration.js';
import { solveMinCostConfiguration } from '../../src/scheduler/ilp.js';
import type { IlpTask } from '../../src/scheduler/ilp-model.js';
import { validateConfiguration } from '../../src/scheduler/ilp-result.js';
import { PriceBook, sumOn } from '../../src/scheduler/reservation-price.js';

const delays = {
  instantiateSeconds: 0,
  workerStartSeconds: 0,
  workerRegisterSeconds: 0,
  terminateSeconds: 0,
};

function type(name: string, capacity: Resources, costPerHour: number): InstanceType {
  return { name, family: name.split('.')[0] as string, capacity, costPerHour, delays };
}

function catalogOf(...types: InstanceType[]): Catalog {
  return { provider: 'test', region: 'test', types };
}

/** The instance hosting each task, by type name. */
function typeOfTask(result: {
  configuration?: { instances: readonly { typeName: string; taskIds: readonly string[] }[] } | undefined;
}): Record<string, string> {
  const out: Record<string, string> = {};
  for (const inst of result.configuration?.instances ?? [])
    for (const id of inst.taskIds) out[id] = inst.typeName;
  return out;
}

describe('solveMinCostConfiguration: Eva Table 3', () => {
  // Eva §4.2, Table 3: four types, four tasks; every demand is `any`.
  const catalog = catalogOf(
    type('a.x', [4, 16, 244], 12),
    type('b.x', [1, 4, 61], 3),
    type('c.x', [0, 8, 32], 0.8),
    type('d.x', [0, 4, 16], 0.4),
  );
  const tasks: IlpTask[] = [
    { id: 't1', demand: { any: [2, 8, 24] } },
    { id: 't2', demand: { any: [1, 4, 10] } },
    { id: 't3', demand: { any: [0, 6, 20] } },
    { id: 't4', demand: { any: [0, 4, 12] } },
  ];

  for (const formulation of ['patterns', 'assignment'] as const) {
    it(`finds $12.80/h: t1, t2, t4 on A and t3 on C (${formulation})`, async () => {
      const r = await solveMinCostConfiguration({ catalog, tasks, timeLimitSeconds: 10, formulation });
      expect(r.status).toBe('optimal');
      expect(r.formulation).toBe(formulation);
      expect(r.costPerHour).toBeCloseTo(12.8, 9);
      expect(r.lowerBoundCostPerHour).toBeCloseTo(12.8, 9);
      expect(r.configuration?.instances).toHaveLength(2);
      expect(typeOfTask(r)).toEqual({ t1: 'a.x', t2: 'a.x', t4: 'a.x', t3: 'c.x' });
      const a = r.configuration?.instances.find((i) => i.typeName === 'a.x');
      expect(a?.taskIds).toEqual(['t1', 't2', 't4']);
      expect(r.configuration?.instances.every((i) => i.isNew && /^new-\d+$/.test(i.id))).toBe(true);
    });
  }

  it('keeps the id of an existing instance of a planned type, preferring the one with more of its tasks', async () => {
    const r = await solveMinCostConfiguration({
      catalog,
      tasks,
      timeLimitSeconds: 10,
      existing: [
        { id: 'i-a-empty', typeName: 'a.x', taskIds: [] },
        { id: 'i-a-t2', typeName: 'a.x', taskIds: ['t2'] },
        { id: 'i-b', typeName: 'b.x', taskIds: ['t3'] },
      ],
    });
    const ids = r.configuration?.instances.map((i) => [i.id, i.typeName, i.isNew]);
    expect(ids).toContainEqual(['i-a-t2', 'a.x', false]);
    expect(ids).toContainEqual(['new-1', 'c.x', true]);
    expect(ids).toHaveLength(2);
  });
});

describe('solveMinCostConfiguration: per-family demands', () => {
  // A GPU family `g` and a CPU family `c`. The CPU task needs more vCPUs on g (as Eva's CPU workloads on P3).
  const catalog = catalogOf(type('g.big', [1, 16, 64], 3), type('c.small', [0, 4, 8], 0.2));
  const gpuTask: IlpTask = { id: 'gpu', demand: { any: [1, 4, 10] } };
  const solve = async (
    cpuDemand: FamilyDemand,
  ): Promise<Awaited<ReturnType<typeof solveMinCostConfiguration>>> => {
    const r = await solveMinCostConfiguration({
      catalog,
      tasks: [gpuTask, { id: 'cpu', demand: cpuDemand }],
      timeLimitSeconds: 10,
    });
    expect(r.status).toBe('optimal');
    return r;
  };

  it('packs the CPU task with the GPU task when its g-family vector still fits', async () => {
    const r = await solve({ any: [0, 4, 8] });
    expect(r.costPerHour).toBeCloseTo(3, 9);
    expect(typeOfTask(r)).toEqual({ gpu: 'g.big', cpu: 'g.big' });
  });

  it('splits them when the g-family vector is too large, though the c-family one would fit', async () => {
    // 4 + 14 vCPUs > 16 on g; the same task needs only 4 on c.
    const r = await solve({ g: [0, 14, 8], c: [0, 4, 8] });
    expect(r.costPerHour).toBeCloseTo(3.2, 9);
    expect(typeOfTask(r)).toEqual({ gpu: 'g.big', cpu: 'c.small' });
  });

  it('uses only the families a task declares', async () => {
    const onlyG = await solve({ g: [0, 8, 8] });
    expect(typeOfTask(onlyG)).toEqual({ gpu: 'g.big', cpu: 'g.big' });
    const tooBigOnG = await solve({ g: [0, 14, 8] });
    expect(tooBigOnG.costPerHour).toBeCloseTo(6, 9);
    expect(tooBigOnG.configuration?.instances.map((i) => i.typeName)).toEqual(['g.big', 'g.big']);
  });

  it('reports infeasible, naming the tasks no type can host', async () => {
    const r = await solveMinCostConfiguration({
      catalog,
      tasks: [gpuTask, { id: 'huge', demand: { c: [0, 64, 8] } }],
      timeLimitSeconds: 10,
    });
    expect(r.status).toBe('infeasible');
    expect(r.unhostableTaskIds).toEqual(['huge']);
    expect(r.configuration).toBeUndefined();
  });
});

/** Demands shaped like Eva's workloads (Table 7, per family as in the reference catalog), CPU in the catalog's units. */
const WORKLOAD_DEMANDS: readonly FamilyDemand[] = [
  { p3: [0, 10, 8], c7i: [0, 4, 8], r7i: [0, 4, 8] },
  { any: [1, 4, 10] },
  { p3: [0, 12, 40], c7i: [0, 6, 40], r7i: [0, 6, 40] },
  { any: [4, 4, 10] },
  { p3: [0, 8, 8], c7i: [0, 6, 8], r7i: [0, 6, 8] },
  { any: [1, 8, 50] },
  { p3: [0, 14, 16], c7i: [0, 8, 16], r7i: [0, 8, 16] },
  { any: [1, 4, 24] },
  { any: [2, 8, 60] },
];

const AWS_LIKE = catalogOf(
  type('p3.2xlarge', [1, 8, 61], 3.06),
  type('p3.8xlarge', [4, 32, 244], 12.24),
  type('p3.16xlarge', [8, 64, 488], 24.48),
  type('c7i.xlarge', [0, 4, 8], 0.1785),
  type('c7i.2xlarge', [0, 8, 16], 0.357),
  type('c7i.8xlarge', [0, 32, 64], 1.428),
  type('r7i.large', [0, 2, 16], 0.1323),
  type('r7i.xlarge', [0, 4, 32], 0.2646),
  type('r7i.2xlarge', [0, 8, 64], 0.5292),
  type('r7i.8xlarge', [0, 32, 256], 2.1168),
);

function sampleWorkloadTasks(count: number, seed: number): IlpTask[] {
  const rng = new Rng(seed);
  return Array.from({ length: count }, (_, i) => ({ id: `t${i}`, demand: rng.pick(WORKLOAD_DEMANDS) }));
}

describe('solveMinCostConfiguration: time limit and formulations', () => {
  it('stops at the time limit with the best solution found and a valid lower bound, or with none', async () => {
    const tasks = sampleWorkloadTasks(20, 6);
    const exact = await solveMinCostConfiguration({ catalog: AWS_LIKE, tasks, timeLimitSeconds: 30 });
    expect(exact.status).toBe('optimal');
    // GLPK needs ~30 s to prove this sample optimal in the plain Eva model (it finds a solution within 0.5 s).
    const r = await solveMinCostConfiguration({
      catalog: AWS_LIKE,
      tasks,
      timeLimitSeconds: 1,
      formulation: 'assignment',
    });
    expect(['feasible', 'timeout-no-solution']).toContain(r.status);
    expect(r.solveSeconds).toBeGreaterThanOrEqual(0.9);
    expect(r.solveSeconds).toBeLessThan(2.5);
    if (r.lowerBoundCostPerHour !== undefined)
      expect(r.lowerBoundCostPerHour).toBeLessThanOrEqual((exact.costPerHour as number) + 1e-6);
    if (r.status === 'feasible') {
      if (r.lowerBoundCostPerHour !== undefined)
        expect(r.lowerBoundCostPerHour).toBeLessThanOrEqual(r.costPerHour as number);
      const cost = validateConfiguration(
        r.configuration as NonNullable<typeof r.configuration>,
        tasks,
        AWS_LIKE.types,
      );
      expect(r.costPerHour).toBeCloseTo(cost, 6);
      expect(r.costPerHour as number).toBeGreaterThanOrEqual((exact.costPerHour as number) - 1e-6);
    } else {
      expect(r.configuration).toBeUndefined();
    }
  });

  it('falls back to the assignment model when pattern enumeration exceeds its budget', async () => {
    const tasks = sampleWorkloadTasks(6, 3);
    const auto = await solveMinCostConfiguration({
      catalog: AWS_LIKE,
      tasks,
      timeLimitSeconds: 10,
      patternSearchBudget: 5,
    });
    expect(auto.formulation).toBe('assignment');
    expect(auto.status).toBe('optimal');
    const patterns = await solveMinCostConfiguration({ catalog: AWS_LIKE, tasks, timeLimitSeconds: 10 });
    expect(patterns.formulation).toBe('patterns');
    expect(auto.costPerHour).toBeCloseTo(patterns.costPerHour as number, 6);
    await expect(
      solveMinCostConfiguration({
        catalog: AWS_LIKE,
        tasks,
        timeLimitSeconds: 10,
        formulation: 'patterns',
        patternSearchBudget: 5,
      }),
    ).rejects.toThrow(/budget/);
  });

  it('proves 20-task samples of Eva workloads optimal quickly and never loses to Full Reconfiguration', async () => {
    const book = new PriceBook(AWS_LIKE);
    for (const seed of [11, 12, 13]) {
      const tasks = sampleWorkloadTasks(20, seed);
      const r = await solveMinCostConfiguration({ catalog: AWS_LIKE, tasks, timeLimitSeconds: 20 });
      expect(r.status).toBe('optimal');
      const heuristic = validateConfiguration(packFromScratch(book, tasks), tasks, AWS_LIKE.types);
      expect(r.costPerHour as number).toBeLessThanOrEqual(heuristic + 1e-6);
    }
  });
});

// ───────────── property: exact on small random instances (brute force over all set partitions) ─────────────

const SMALL = catalogOf(
  type('g.one', [1, 8, 32], 3),
  type('g.four', [4, 32, 128], 11),
  type('c.one', [0, 4, 8], 0.2),
  type('c.two', [0, 8, 16], 0.38),
  type('c.four', [0, 16, 32], 0.72),
  type('m.one', [0, 2, 16], 0.13),
  type('m.two', [0, 4, 32], 0.25),
);

function cheapestHostCost(demands: readonly FamilyDemand[]): number {
  let best = Infinity;
  for (const k of SMALL.types) {
    const total = sumOn(demands, k.family);
    if (total !== undefined && fits(total, k.capacity)) best = Math.min(best, k.costPerHour);
  }
  return best;
}

/** Optimal cost by enumerating every partition of the tasks into instances (restricted growth strings). */
function bruteForceOptimum(tasks: readonly IlpTask[]): number {
  let best = Infinity;
  const block: number[] = [];
  const visit = (i: number, blocks: number): void => {
    if (i === tasks.length) {
      let cost = 0;
      for (let b = 0; b < blocks; b++)
        cost += cheapestHostCost(tasks.filter((_, j) => block[j] === b).map((t) => t.demand));
      best = Math.min(best, cost);
      return;
    }
    for (let b = 0; b <= blocks; b++) {
      block[i] = b;
      visit(i + 1, Math.max(blocks, b + 1));
    }
  };
  visit(0, 0);
  return best;
}

const resourcesArb = fc.tuple(
  fc.integer({ min: 0, max: 2 }),
  fc.integer({ min: 1, max: 8 }),
  fc.integer({ min: 1, max: 40 }),
);
const demandArb: fc.Arbitrary<FamilyDemand> = fc.oneof(
  // Shared shapes, so identical tasks (the symmetry the formulations break) are common.
  fc.constantFrom<FamilyDemand>(
    { any: [1, 4, 10] },
    { any: [0, 2, 6] },
    { g: [0, 8, 8], c: [0, 4, 8], m: [0, 4, 8] },
  ),
  resourcesArb.map((r): FamilyDemand => ({ any: r })),
  // A CPU task needing more on the GPU family, and one that cannot run on the memory family.
  fc.tuple(resourcesArb, fc.integer({ min: 0, max: 8 })).map(([r, extra]): FamilyDemand => ({
    g: [r[0], r[1] + extra, r[2]],
    c: [0, r[1], r[2]],
  })),
);

describe('solveMinCostConfiguration: properties', () => {
  it('is optimal, feasible, and no worse than No-Packing or Full Reconfiguration, in both formulations', async () => {
    const book = new PriceBook(SMALL);
    await fc.assert(
      fc.asyncProperty(fc.array(demandArb, { minLength: 1, maxLength: 6 }), async (demands) => {
        fc.pre(demands.every((d) => book.minType(d) !== undefined));
        const tasks = demands.map((demand, i) => ({ id: `t${i}`, demand }));
        const optimum = bruteForceOptimum(tasks);
        const noPacking = tasks.reduce((s, t) => s + book.reservationPrice(t.demand), 0);
        const heuristic = validateConfiguration(packFromScratch(book, tasks), tasks, SMALL.types);
        for (const formulation of ['patterns', 'assignment'] as const) {
          const r = await solveMinCostConfiguration({
            catalog: SMALL,
            tasks,
            timeLimitSeconds: 10,
            formulation,
          });
          expect(r.status).toBe('optimal');
          const config = r.configuration as NonNullable<typeof r.configuration>;
          expect(validateConfiguration(config, tasks, SMALL.types)).toBeCloseTo(r.costPerHour as number, 6);
          expect(r.costPerHour).toBeCloseTo(optimum, 6);
          expect(r.costPerHour as number).toBeLessThanOrEqual(noPacking + 1e-6);
          expect(r.costPerHour as number).toBeLessThanOrEqual(heuristic + 1e-6);
        }
      }),
      { numRuns: 60, seed: 20250101 },
    );
  });

  it('validateConfiguration rejects a task placed twice, a missing task, an overfull instance and a wrong family', () => {
    const tasks: IlpTask[] = [
      { id: 'a', demand: { any: [0, 4, 8] } },
      { id: 'b', demand: { c: [0, 4, 8] } },
    ];
    const inst = (id: string, typeName: string, taskIds: string[]) => ({
      id,
      typeName,
      isNew: true,
      taskIds,
    });
    const check = (instances: ReturnType<typeof inst>[]) => () =>
      validateConfiguration({ instances }, tasks, SMALL.types);
    expect(check([inst('1', 'c.two', ['a', 'b'])])()).toBeCloseTo(0.38, 9);
    expect(check([inst('1', 'c.two', ['a', 'b']), inst('2', 'c.one', ['a'])])).toThrow(/twice/);
    expect(check([inst('1', 'c.one', ['a'])])).toThrow(/not placed: b/);
    expect(check([inst('1', 'c.one', ['a', 'b'])])).toThrow(/exceeds/);
    expect(check([inst('1', 'g.one', ['a', 'b'])])).toThrow(/cannot run on family g/);
  });
});
