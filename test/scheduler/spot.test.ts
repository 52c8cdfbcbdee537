import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { loadCatalogFile } from '../../src/cloud/catalog-file.js';
import {
  applyPriceOverrides,
  catalogToFile,
  findType,
  parseCatalog,
  setupSeconds,
  type InstanceType,
} from '../../src/core/catalog.js';
import type { ClusterSnapshot, SchedInstance, SchedJob, SchedTask } from '../../src/core/model.js';
import type { FamilyDemand } from '../../src/core/resources.js';
import {
  interruptionRatePerHour,
  SPOT_PREFERENCES,
  spotInZones,
  spotOffering,
  type SpotOffering,
} from '../../src/core/spot.js';
import { planCapViolation, planCapViolations } from '../../src/round/plan-caps.js';
import { placeWaitingJobs } from '../../src/round/place-waiting.js';
import { diffConfiguration } from '../../src/scheduler/actions.js';
import { ColocationTable } from '../../src/scheduler/colocation-table.js';
import { EvaScheduler } from '../../src/scheduler/eva.js';
import { plannedPricePerHour } from '../../src/scheduler/market-choice.js';
import type { PackTask } from '../../src/scheduler/packing.js';
import { fullReconfiguration } from '../../src/scheduler/reconfiguration.js';
import { PriceBook } from '../../src/scheduler/reservation-price.js';
import {
  expectedSpotCostPerHour,
  interruptionDelaySeconds,
  workAtRiskSeconds,
} from '../../src/scheduler/spot-cost.js';

const catalog = loadCatalogFile();

describe('the catalog spot model', () => {
  it('bundles a spot price and interruption class per (type, zone), with its date and source, and round-trips', () => {
    const spot = catalog.spot;
    expect(spot?.snapshotDate).toMatch(/^\d{4}-\d{2}-\d{2}$/);
    expect(spot?.source).toContain('catalog refresh');
    for (const t of catalog.types) {
      const offerings = spot?.offerings.filter((o) => o.typeName === t.name) ?? [];
      expect(offerings.length, t.name).toBeGreaterThan(0);
      for (const o of offerings) expect(o.pricePerHour).toBeLessThan(t.costPerHour);
    }
    expect(parseCatalog(catalogToFile(catalog))).toEqual(catalog);
  });

  it('plans spot only in the pools of the zones the fleet can launch in', () => {
    // The cluster's subnets are in us-east-1a and us-east-1c: p3.2xlarge's best pool (us-east-1b) is out of reach.
    const market = spotInZones(catalog.spot, ['us-east-1a', 'us-east-1c']);
    expect(new Set(market?.offerings.map((o) => o.zone))).toEqual(new Set(['us-east-1a', 'us-east-1c']));
    expect(spotOffering(market, 'p3.2xlarge')?.zone).not.toBe('us-east-1b');
    const limited = { ...catalog, spot: market };
    const snapshot: ClusterSnapshot = {
      nowSeconds: 0,
      jobs: [
        { id: 'j', taskIds: ['j-t'], reconfigurable: true, arrivalSeconds: 0, migrationDelaySeconds: 60 },
      ],
      tasks: [{ id: 'j-t', jobId: 'j', key: 'w', demand: { any: [1, 4, 15] } }],
      instances: [],
    };
    const plan = new EvaScheduler(limited, { spot: true }).plan(snapshot);
    const spot = plan.configuration.instances.filter((i) => i.market === 'spot');
    expect(spot.length).toBeGreaterThan(0);
    for (const i of spot) expect(['us-east-1a', 'us-east-1c']).toContain(i.placement?.zone);
    // With every pool, the plan takes us-east-1b.
    const unlimited = new EvaScheduler(catalog, { spot: true }).plan(snapshot).configuration.instances;
    expect(unlimited.some((i) => i.market === 'spot' && i.placement?.zone === 'us-east-1b')).toBe(true);
  });

  it('picks the pool a price-capacity-optimized launch gets: least interrupted, then cheapest', () => {
    // p3.2xlarge: us-east-1b is 15-20%, the others >20%: the least interrupted wins over the cheaper.
    expect(spotOffering(catalog.spot, 'p3.2xlarge')?.zone).toBe('us-east-1b');
    expect(spotOffering(catalog.spot, 'p3.2xlarge', 'us-east-1c')?.zone).toBe('us-east-1c');
    expect(spotOffering(catalog.spot, 'p3.2xlarge', undefined, ['us-east-1b'])?.interruption).toBe('>20%');
  });

  it('applies price overrides to spot prices: the spot discount, and per-type spot prices', () => {
    const discounted = applyPriceOverrides(catalog, {
      spotDiscountPercent: 10,
      spotPricePerType: { 'c7i.large': 0.01 },
    });
    const before = spotOffering(catalog.spot, 'p3.2xlarge', 'us-east-1a') as SpotOffering;
    expect(spotOffering(discounted.spot, 'p3.2xlarge', 'us-east-1a')?.pricePerHour).toBeCloseTo(
      before.pricePerHour * 0.9,
      10,
    );
    // The spot discount is not off on-demand prices, nor a Savings Plan's (`discountPercent`) off spot prices.
    expect(discounted.types.find((t) => t.name === 'p3.2xlarge')?.costPerHour).toBe(
      catalog.types.find((t) => t.name === 'p3.2xlarge')?.costPerHour,
    );
    const savingsPlan = applyPriceOverrides(catalog, { discountPercent: 28 });
    expect(savingsPlan.spot?.offerings).toEqual(catalog.spot?.offerings);
    expect(savingsPlan.types.find((t) => t.name === 'p3.2xlarge')?.costPerHour).toBeCloseTo(
      (catalog.types.find((t) => t.name === 'p3.2xlarge')?.costPerHour ?? 0) * 0.72,
      12,
    );
    expect(() => applyPriceOverrides(catalog, { spotDiscountPercent: 100 })).toThrow(
      /spotDiscountPercent: must be under 100/,
    );
    expect(() => applyPriceOverrides(catalog, { spotDiscountPercent: -1 })).toThrow(
      /spotDiscountPercent: must be ≥ 0/,
    );
    expect(
      discounted.spot?.offerings.filter((o) => o.typeName === 'c7i.large').map((o) => o.pricePerHour),
    ).toEqual([0.01, 0.01, 0.01]);
    expect(() => applyPriceOverrides(catalog, { spotPricePerType: { 'x9.huge': 1 } })).toThrow(
      /spotPricePerType.x9.huge/,
    );
  });

  it('rejects an offering of an unknown type, twice the same pool, or an unknown class, naming the field', () => {
    const file = catalogToFile(catalog);
    const offering = { type: 'p3.2xlarge', zone: 'us-east-1a', pricePerHour: 1, interruption: '<5%' };
    const spot = { snapshotDate: '2026-11-24', source: 'test', offerings: [offering, offering] };
    expect(() => parseCatalog({ ...file, spot })).toThrow(
      /spot.offerings.1: p3.2xlarge in us-east-1a is offered twice/,
    );
    expect(() =>
      parseCatalog({ ...file, spot: { ...spot, offerings: [{ ...offering, type: 'x9.huge' }] } }),
    ).toThrow(/spot.offerings.0.type: x9.huge is not a type/);
    expect(() =>
      parseCatalog({ ...file, spot: { ...spot, offerings: [{ ...offering, interruption: '30%' }] } }),
    ).toThrow(/interruption/);
  });
});

describe('the expected cost of a spot instance', () => {
  // One single-task job on a p3.2xlarge: reservation price $3.06/h, migration delay 120 s, relaunch 173 s (the
  // catalog's 22 + 51 + 100), last checkpoint 10 minutes ago.
  const job: SchedJob = {
    id: 'j',
    taskIds: ['t'],
    reconfigurable: true,
    arrivalSeconds: 0,
    runningSinceSeconds: 1000,
    migrationDelaySeconds: 120,
    lastCheckpointSeconds: 4400,
    checkpointIntervalSeconds: 1800,
    expectedRemainingSeconds: 36_000,
  };
  const at = [{ job, rpPerHour: 3.06 }];
  const pool = (interruption: SpotOffering['interruption']): SpotOffering => ({
    typeName: 'p3.2xlarge',
    zone: 'us-east-1a',
    pricePerHour: 0.95,
    interruption,
  });

  it('is the price plus the interruption rate times the work since the checkpoint, restore and relaunch', () => {
    // At risk: 600 s of work + 120 s restore + 173 s relaunch = 893 s × $3.06/3600 per s = $0.75905.
    // >20% a month: λ = −ln(0.75)/730 = 3.9409e-4 /h → +$2.9913e-4/h; <5%: λ = −ln(0.975)/730 = 3.4682e-5 /h →
    // +$2.6325e-5/h.
    expect(workAtRiskSeconds(job, 5000)).toBe(600);
    expect(interruptionRatePerHour('>20%')).toBeCloseTo(3.9409e-4, 8);
    expect(interruptionRatePerHour('<5%')).toBeCloseTo(3.4682e-5, 9);
    expect(expectedSpotCostPerHour(pool('>20%'), at, 5000, 173)).toBeCloseTo(0.95 + 2.9913e-4, 8);
    expect(expectedSpotCostPerHour(pool('<5%'), at, 5000, 173)).toBeCloseTo(0.95 + 2.6325e-5, 9);
  });

  it('puts the whole work at risk without checkpoints or inside the no-move window', () => {
    // Ran 4000 s, 36,000 s to go: 40,000 s at risk.
    expect(workAtRiskSeconds({ ...job, checkpointIntervalSeconds: 0 }, 5000)).toBe(40_000);
    expect(workAtRiskSeconds({ ...job, noMoveSeconds: 7200 }, 5000)).toBe(40_000);
    expect(workAtRiskSeconds({ ...job, noMoveSeconds: 3600 }, 5000)).toBe(600);
    // Initializing (its progress begins at 5060 s) inside its window: its whole 36,000 s, none of it done.
    expect(workAtRiskSeconds({ ...job, noMoveSeconds: 3600, runningSinceSeconds: 5060 }, 5000)).toBe(36_000);
    // Never ran: half a checkpoint interval.
    const fresh: SchedJob = { ...job, runningSinceSeconds: undefined, lastCheckpointSeconds: undefined };
    expect(workAtRiskSeconds(fresh, 5000)).toBe(900);
    // Nor is a job that never ran inside a no-move window.
    expect(workAtRiskSeconds({ ...fresh, noMoveSeconds: 3600 }, 5000)).toBe(900);
  });
});

const DEMANDS: FamilyDemand[] = [
  { any: [1, 8, 30] },
  { any: [1, 4, 15] },
  { any: [4, 16, 64] },
  { any: [0, 4, 8] },
  { any: [0, 2, 20] },
];

const jobDraft = fc.record({
  demand: fc.integer({ min: 0, max: DEMANDS.length - 1 }),
  tasks: fc.constantFrom(1, 1, 2),
  spot: fc.constantFrom(...SPOT_PREFERENCES),
  placedOn: fc.option(
    fc.record({
      market: fc.constantFrom('on-demand', 'spot' as const),
      zone: fc.constantFrom('us-east-1a', 'us-east-1b', 'us-east-1c'),
    }),
  ),
});

/** Quotas on the on-demand and spot groups of the catalog's families (p: P3, standard: C7i/R7i). */
const quotaDraft = fc.uniqueArray(
  fc.record({
    group: fc.constantFrom('p', 'p-spot', 'standard', 'standard-spot'),
    maxGpus: fc.option(fc.integer({ min: 0, max: 6 }), { nil: undefined }),
    maxVcpus: fc.option(fc.integer({ min: 0, max: 40 }), { nil: undefined }),
  }),
  { maxLength: 3, selector: (q) => q.group },
);

describe('caps with mixed markets', () => {
  it('no plan exceeds a cap (the $/hour one counting spot at its pool price, quotas on spot and on demand), and never-spot jobs stay on demand (property)', () => {
    fc.assert(
      fc.property(
        fc.array(jobDraft, { minLength: 1, maxLength: 14 }),
        fc.double({ min: 0.5, max: 30, noNaN: true }),
        quotaDraft,
        fc.option(fc.integer({ min: 1, max: 8 }), { nil: undefined }),
        (drafts, maxCostPerHour, quotas, maxInstances) => {
          const jobs: SchedJob[] = [];
          const tasks: SchedTask[] = [];
          const instances: SchedInstance[] = [];
          drafts.forEach((d, i) => {
            const taskIds = Array.from({ length: d.tasks }, (_, k) => `j${i}-t${k}`);
            jobs.push({
              id: `j${i}`,
              taskIds,
              reconfigurable: true,
              arrivalSeconds: i,
              runningSinceSeconds: d.placedOn === null ? undefined : 100,
              migrationDelaySeconds: 60,
              lastCheckpointSeconds: d.placedOn === null ? undefined : 500,
              expectedRemainingSeconds: 20_000,
              spot: d.spot,
            });
            for (const id of taskIds) {
              const placed = d.placedOn;
              if (placed !== null) {
                // Each placed task alone on a p3.8xlarge (fits every demand here) of the drawn market and zone.
                instances.push({
                  id: `i-${id}`,
                  typeName: 'p3.8xlarge',
                  state: 'running',
                  taskIds: [id],
                  market: placed.market,
                  placement: { zone: placed.zone },
                });
              }
              tasks.push({
                id,
                jobId: `j${i}`,
                key: `w${d.demand}_node0`,
                demand: DEMANDS[d.demand] as FamilyDemand,
                instanceId: placed === null ? undefined : `i-${id}`,
              });
            }
          });
          const snapshot: ClusterSnapshot = { nowSeconds: 1000, jobs, tasks, instances };
          const caps = { maxCostPerHour, quotas, ...(maxInstances === undefined ? {} : { maxInstances }) };
          const plan = new EvaScheduler(catalog, { spot: true, caps }).plan(snapshot);
          const cost = plan.configuration.instances.reduce((s, i) => s + plannedPricePerHour(catalog, i), 0);
          expect(cost).toBeLessThanOrEqual(maxCostPerHour + 1e-9);
          const diff = diffConfiguration(snapshot, plan.configuration, catalog);
          expect(planCapViolation(plan.configuration, diff, catalog, caps)).toBeUndefined();
          // Quotas only: planCapViolations prices every instance on demand, the $ cap is checked above at market prices.
          expect(planCapViolations(plan.configuration, catalog, { quotas })).toEqual([]);
          const spotOf = new Map(jobs.map((j) => [j.id, j.spot]));
          const spotQuota = quotas.some((q) => q.group.endsWith('-spot'));
          for (const inst of plan.configuration.instances) {
            const existing = instances.find((i) => i.id === inst.id);
            if (existing !== undefined) expect(inst.market ?? 'on-demand').toBe(existing.market);
            else if (inst.taskIds.some((t) => spotOf.get(t.split('-')[0] as string) === 'never'))
              expect(inst.market ?? 'on-demand').toBe('on-demand');
            // Spot is always cheaper at these risks; only a spot quota sends a new instance on demand.
            else if (!spotQuota) expect(inst.market).toBe('spot');
          }
        },
      ),
      { numRuns: 60, seed: 19 },
    );
  });
});

describe('spot quotas', () => {
  it('counts a spot instance against its group spot quota (p-spot), an on-demand one against the on-demand quota', () => {
    const configuration = {
      instances: [
        { id: 'new-1', typeName: 'p3.8xlarge', isNew: true, taskIds: [], market: 'spot' as const },
        { id: 'new-2', typeName: 'p3.2xlarge', isNew: true, taskIds: [] },
      ],
    };
    const diff = { actions: [], movedJobIds: [], startedJobIds: [], queuedJobIds: [] };
    const check = (quotas: { group: string; maxGpus: number }[]) =>
      planCapViolation(configuration, diff, catalog, { quotas });
    // 4 GPUs on spot, 1 on demand.
    expect(
      check([
        { group: 'p-spot', maxGpus: 4 },
        { group: 'p', maxGpus: 1 },
      ]),
    ).toBeUndefined();
    expect(check([{ group: 'p-spot', maxGpus: 3 }])).toMatch(/p-spot/);
    expect(check([{ group: 'p', maxGpus: 0 }])).toMatch(/\bp\b/);
  });
});

describe('eva packing on spot', () => {
  it('repacks half-empty spot instances as it would on demand: task prices are spot prices too', () => {
    // Two 1-GPU jobs, each alone on a spot p3.16xlarge (8 GPUs, $7.29/h in us-east-1b), early on (Eva's horizon T is
    // the 1,000 s elapsed). Moving both to one spot p3.8xlarge saves $10.93/h × T = $3.04; the move costs the jobs'
    // delays at their task prices, times the payback margin 8. At on-demand task prices ($3.06/h each) that is
    // 8 × $0.89 and Eva stays; at spot task prices (under a third of it) the move pays and Eva repacks.
    const jobs: SchedJob[] = ['a', 'b'].map((id) => ({
      id,
      taskIds: [`${id}-t`],
      reconfigurable: true,
      arrivalSeconds: 0,
      runningSinceSeconds: 0,
      migrationDelaySeconds: 60,
      lastCheckpointSeconds: 900,
      checkpointIntervalSeconds: 1800,
      expectedRemainingSeconds: 72_000,
    }));
    const snapshot: ClusterSnapshot = {
      nowSeconds: 1000,
      jobs,
      tasks: jobs.map((j) => ({
        id: `${j.id}-t`,
        jobId: j.id,
        key: 'w0_node0',
        demand: { any: [1, 4, 15] },
        instanceId: `i-${j.id}`,
      })),
      instances: jobs.map((j) => ({
        id: `i-${j.id}`,
        typeName: 'p3.16xlarge',
        state: 'running',
        taskIds: [`${j.id}-t`],
        market: 'spot',
        placement: { zone: 'us-east-1b' },
      })),
    };
    const before = snapshot.instances.reduce(
      (s, i) => s + plannedPricePerHour(catalog, { ...i, isNew: false }),
      0,
    );
    const plan = new EvaScheduler(catalog, { spot: true }).plan(snapshot);
    const after = plan.configuration.instances.reduce((s, i) => s + plannedPricePerHour(catalog, i), 0);
    expect(plan.configuration.instances.every((i) => i.typeName !== 'p3.16xlarge')).toBe(true);
    expect(after).toBeLessThan(before / 4);
    expect(plan.configuration.instances.every((i) => i.market === 'spot')).toBe(true);
  });
});

describe('a rebalance recommendation', () => {
  // Each job alone on a spot p3.2xlarge in us-east-1b. `lost` never checkpoints (4,000 s done, 36,000 s to go: all of
  // it is at risk, a risk premium of $17/h at λ = 0.5/h); `saved` checkpointed a minute ago (its premium is $0.15/h,
  // less than its move would cost over the horizon).
  const job = (id: string, extra: Partial<SchedJob>): SchedJob => ({
    id,
    taskIds: [`${id}-t`],
    reconfigurable: true,
    arrivalSeconds: 0,
    runningSinceSeconds: 1000,
    migrationDelaySeconds: 120,
    expectedRemainingSeconds: 36_000,
    ...extra,
  });
  const snapshotWith = (rebalanceRecommended: boolean): ClusterSnapshot => {
    const jobs = [
      job('lost', { checkpointIntervalSeconds: 0 }),
      job('saved', { checkpointIntervalSeconds: 1800, lastCheckpointSeconds: 4940 }),
    ];
    return {
      nowSeconds: 5000,
      jobs,
      tasks: jobs.map((j) => ({
        id: `${j.id}-t`,
        jobId: j.id,
        key: `w${j.id}_node0`,
        demand: { any: [1, 8, 61] },
        instanceId: `i-${j.id}`,
      })),
      instances: jobs.map((j) => ({
        id: `i-${j.id}`,
        typeName: 'p3.2xlarge',
        state: 'running',
        taskIds: [`${j.id}-t`],
        market: 'spot',
        placement: { zone: 'us-east-1b' },
        rebalanceRecommended,
      })),
    };
  };
  const hostOf = (plan: ReturnType<EvaScheduler['plan']>, taskId: string) =>
    plan.configuration.instances.find((i) => i.taskIds.includes(taskId));

  it('moves a task off when its risk outweighs the move (priced), and leaves a freshly checkpointed one', () => {
    const calm = new EvaScheduler(catalog, { spot: true }).plan(snapshotWith(false));
    expect(hostOf(calm, 'lost-t')?.id).toBe('i-lost');
    expect(hostOf(calm, 'saved-t')?.id).toBe('i-saved');
    const warned = new EvaScheduler(catalog, { spot: true }).plan(snapshotWith(true));
    expect(hostOf(warned, 'lost-t')?.isNew).toBe(true);
    expect(hostOf(warned, 'saved-t')?.id).toBe('i-saved');
    expect(warned.configuration.instances.some((i) => i.id === 'i-lost')).toBe(false);
    // Its own candidate: Partial Reconfiguration would move `saved` too (its premium makes its instance inefficient).
    expect(warned.decision.chosen).toBe('rebalance');
  });

  it('leaves the task where it is once past recommendations have mostly been false alarms (the learned rate)', () => {
    const learned = new EvaScheduler(catalog, { spot: true });
    // 500 h of flagged instances seen, none reclaimed: one reclaim in about 502 h, not in 2 h.
    learned.importState({
      ...learned.exportState(),
      rebalanceRisk: { reclaims: 0, exposureSeconds: 500 * 3600, flagged: [], kept: [] },
    });
    const plan = learned.plan(snapshotWith(true));
    expect(hostOf(plan, 'lost-t')?.id).toBe('i-lost');
    expect(hostOf(plan, 'saved-t')?.id).toBe('i-saved');
  });
});

describe('a bound on the delay one interruption may cause', () => {
  // A new 1-GPU job, never run: an interruption would lose half its 30-minute checkpoint interval (900 s), plus its
  // 120 s restore and the replacement's 173 s launch: 1,193 s.
  const snapshotWith = (extra: Partial<SchedJob>): ClusterSnapshot => ({
    nowSeconds: 0,
    jobs: [
      {
        id: 'j',
        taskIds: ['j-t'],
        reconfigurable: true,
        arrivalSeconds: 0,
        migrationDelaySeconds: 120,
        checkpointIntervalSeconds: 1800,
        expectedRemainingSeconds: 36_000,
        ...extra,
      },
    ],
    tasks: [{ id: 'j-t', jobId: 'j', key: 'w_node0', demand: { any: [1, 8, 61] } }],
    instances: [],
  });
  const marketOf = (extra: Partial<SchedJob>) =>
    new EvaScheduler(catalog, { spot: true }).plan(snapshotWith(extra)).configuration.instances[0]?.market;

  it('buys on demand when one interruption would delay the job past it, even if it prefers spot', () => {
    expect(marketOf({})).toBe('spot');
    expect(marketOf({ spotMaxDelaySeconds: 1200 })).toBe('spot');
    expect(marketOf({ spotMaxDelaySeconds: 1100 })).toBeUndefined();
    expect(marketOf({ spotMaxDelaySeconds: 1100, spot: 'preferred' })).toBeUndefined();
  });

  // The same new job next to `a`, running since 100 s on a spot p3.8xlarge (4 GPUs, 1 used) and checkpointed at
  // 900 s: an interruption now would delay `a` 100 s of work + 120 s restore + the relaunch.
  const running: SchedJob = {
    id: 'a',
    taskIds: ['a-t'],
    reconfigurable: true,
    arrivalSeconds: 0,
    runningSinceSeconds: 100,
    lastCheckpointSeconds: 900,
    migrationDelaySeconds: 120,
    checkpointIntervalSeconds: 1800,
    expectedRemainingSeconds: 36_000,
  };
  const besideSpot = (a: Partial<SchedJob>, j: Partial<SchedJob>): ClusterSnapshot => ({
    nowSeconds: 1000,
    jobs: [
      { ...running, ...a },
      {
        id: 'j',
        taskIds: ['j-t'],
        reconfigurable: true,
        arrivalSeconds: 990,
        migrationDelaySeconds: 120,
        checkpointIntervalSeconds: 1800,
        expectedRemainingSeconds: 36_000,
        ...j,
      },
    ],
    tasks: [
      { id: 'a-t', jobId: 'a', key: 'w_node0', demand: { any: [1, 8, 61] }, instanceId: 'i-spot' },
      { id: 'j-t', jobId: 'j', key: 'w_node0', demand: { any: [1, 8, 61] } },
    ],
    instances: [
      {
        id: 'i-spot',
        typeName: 'p3.8xlarge',
        state: 'running',
        taskIds: ['a-t'],
        market: 'spot',
        placement: { zone: 'us-east-1b' },
      },
    ],
  });
  const hostOf = (snapshot: ClusterSnapshot, taskId: string) => {
    const host = new EvaScheduler(catalog, { spot: true })
      .plan(snapshot)
      .configuration.instances.find((i) => i.taskIds.includes(taskId));
    return host === undefined ? undefined : { id: host.isNew ? 'new' : host.id, market: host.market };
  };

  it('keeps the job out of the free room of a spot instance already running, as it buys its new one on demand', () => {
    expect(hostOf(besideSpot({}, {}), 'j-t')).toEqual({ id: 'i-spot', market: 'spot' });
    expect(hostOf(besideSpot({}, { spotMaxDelaySeconds: 1200 }), 'j-t')).toEqual({
      id: 'i-spot',
      market: 'spot',
    });
    expect(hostOf(besideSpot({}, { spotMaxDelaySeconds: 1100 }), 'j-t')).toEqual({
      id: 'new',
      market: undefined,
    });
    expect(hostOf(besideSpot({}, { spotMaxDelaySeconds: 1100, spot: 'preferred' }), 'j-t')).toEqual({
      id: 'new',
      market: undefined,
    });
  });

  it('leaves a job past its bound on the spot instance it already runs on', () => {
    const snapshot = besideSpot({ spotMaxDelaySeconds: 300 }, {});
    expect(hostOf(snapshot, 'a-t')).toEqual({ id: 'i-spot', market: 'spot' });
    expect(hostOf(snapshot, 'j-t')).toEqual({ id: 'i-spot', market: 'spot' });
  });

  it('lets Full Reconfiguration repack a task kept off spot onto the spot instance it is on, and no other', () => {
    // A full spot p3.8xlarge: `a` (kept off spot) and three others, worth its price together at a co-location rate
    // of 1. Repacked from scratch, the set may go back on it (no task moves); a task kept off spot that is not on it
    // may not take its place.
    const book = new PriceBook(catalog);
    const demand: FamilyDemand = { any: [1, 8, 61] };
    const task = (id: string, extra: Partial<PackTask>): PackTask => ({
      id,
      jobId: id,
      key: 'w_node0',
      demand,
      rp: book.reservationPrice(demand),
      jobTaskCount: 1,
      ...extra,
    });
    const repacked = (kept: PackTask) => {
      const tasks = [kept, ...['b', 'c', 'd'].map((id) => task(id, { currentInstanceId: 'i-spot' }))];
      const drafts = fullReconfiguration({
        book,
        model: { table: new ColocationTable(1), throughputAware: true, multiTaskAware: true },
        tasks: new Map(tasks.map((t) => [t.id, t])),
        instances: [
          {
            id: 'i-spot',
            type: findType(catalog, 'p3.8xlarge'),
            taskIds: tasks.flatMap((t) => (t.currentInstanceId === 'i-spot' ? [t.id] : [])),
          },
        ],
        pinnedTaskIds: new Set(),
        maxMovedJobs: Number.POSITIVE_INFINITY,
        spotInstanceIds: new Set(['i-spot']),
      });
      return drafts.map((d) => ({ id: d.isNew ? 'new' : d.id, taskIds: [...d.taskIds].sort() }));
    };
    expect(repacked(task('a', { currentInstanceId: 'i-spot', onDemandOnly: true }))).toEqual([
      { id: 'i-spot', taskIds: ['a', 'b', 'c', 'd'] },
    ]);
    const elsewhere = repacked(task('a', { onDemandOnly: true }));
    expect(elsewhere.find((d) => d.taskIds.includes('a'))?.id).toBe('new');
  });

  it('keeps the job off paid spot room between rounds too', () => {
    const c7i = findType(catalog, 'c7i.2xlarge');
    const demand: FamilyDemand = { c7i: [0, 4, 8] };
    const job: SchedJob = {
      id: 'j',
      taskIds: ['j/t0'],
      reconfigurable: true,
      arrivalSeconds: 0,
      migrationDelaySeconds: 120,
      checkpointIntervalSeconds: 1800,
      expectedRemainingSeconds: 600,
    };
    // Never run: half its checkpoint interval at risk, its restore, and the launch of its reservation-price type.
    const delay = interruptionDelaySeconds(
      job,
      100,
      setupSeconds(new PriceBook(catalog).minType(demand) as InstanceType),
    );
    const placed = (spotMaxDelaySeconds: number, spot: boolean) =>
      placeWaitingJobs({
        nowSeconds: 100,
        jobs: [
          {
            id: 'j',
            taskSeconds: 600,
            tasks: [{ id: 'j/t0', demand, key: 'j_node0' }],
            scheduled: { ...job, spotMaxDelaySeconds },
          },
        ],
        instances: [
          {
            id: 'i-1',
            type: c7i,
            readyAtSeconds: 100,
            tasks: [{ demand, key: 'occupant_node0' }],
            spot,
          },
        ],
        prices: new PriceBook(catalog),
        admitted: () => ['j'],
        bind: false,
        capHoldsJobsBack: true,
      }).map((p) => p.jobId);
    expect(placed(delay + 1, true)).toEqual(['j']);
    expect(placed(delay - 1, true)).toEqual([]);
    expect(placed(delay - 1, false)).toEqual(['j']);
  });

  it('keeps a job of several tasks off spot by the launch of its slowest task, in a round and between rounds', () => {
    // Two tasks whose reservation-price types set up in different times: p3.2xlarge (173 s) for the CPU-heavy one and
    // p3.8xlarge (229 s) for the 4-GPU one. The bound leaves 200 s for the replacement's launch: past it, as the job
    // starts only once its slower instance is up. A spot p3.16xlarge already running has room for both.
    const cpu: FamilyDemand = { any: [1, 8, 61] };
    const gpu: FamilyDemand = { any: [4, 32, 244] };
    const book = new PriceBook(catalog);
    expect(setupSeconds(book.minType(cpu) as InstanceType)).toBe(173);
    expect(setupSeconds(book.minType(gpu) as InstanceType)).toBe(229);
    const job: SchedJob = {
      id: 'j',
      taskIds: ['j/0', 'j/1'],
      reconfigurable: true,
      arrivalSeconds: 0,
      migrationDelaySeconds: 120,
      checkpointIntervalSeconds: 1800,
      expectedRemainingSeconds: 600,
    };
    const boundFor = (launchSeconds: number) => interruptionDelaySeconds(job, 100, 0) + launchSeconds;
    const other: SchedJob = { ...job, id: 'o', taskIds: ['o/0'], runningSinceSeconds: 50 };

    const roundHosts = (spotMaxDelaySeconds: number) => {
      const plan = new EvaScheduler(catalog, { spot: true }).plan({
        nowSeconds: 100,
        jobs: [other, { ...job, spotMaxDelaySeconds }],
        tasks: [
          { id: 'o/0', jobId: 'o', key: 'o_node0', demand: cpu, instanceId: 'i-spot' },
          { id: 'j/0', jobId: 'j', key: 'j_node0', demand: cpu },
          { id: 'j/1', jobId: 'j', key: 'j_node1', demand: gpu },
        ],
        instances: [
          {
            id: 'i-spot',
            typeName: 'p3.16xlarge',
            state: 'running',
            taskIds: ['o/0'],
            market: 'spot',
            placement: { zone: 'us-east-1b' },
          },
        ],
      });
      return ['j/0', 'j/1'].map((taskId) => {
        const host = plan.configuration.instances.find((i) => i.taskIds.includes(taskId));
        return host?.isNew === true ? 'new' : host?.id;
      });
    };
    expect(roundHosts(boundFor(240))).toEqual(['i-spot', 'i-spot']);
    expect(roundHosts(boundFor(200))).toEqual(['new', 'new']);

    const betweenRounds = (spotMaxDelaySeconds: number) =>
      placeWaitingJobs({
        nowSeconds: 100,
        jobs: [
          {
            id: 'j',
            taskSeconds: 600,
            tasks: [
              { id: 'j/0', demand: cpu, key: 'j_node0' },
              { id: 'j/1', demand: gpu, key: 'j_node1' },
            ],
            scheduled: { ...job, spotMaxDelaySeconds },
          },
        ],
        instances: [
          {
            id: 'i-spot',
            type: findType(catalog, 'p3.16xlarge'),
            readyAtSeconds: 100,
            tasks: [{ demand: cpu, key: 'o_node0' }],
            spot: true,
          },
        ],
        prices: book,
        admitted: () => ['j'],
        bind: false,
        capHoldsJobsBack: true,
      }).flatMap((p) => p.placements.map((x) => x.instanceId));
    expect(betweenRounds(boundFor(200))).toEqual([]);
    // With room for the slower launch in its bound, the job takes the spot instance's room.
    expect(betweenRounds(boundFor(240))).toEqual(['i-spot', 'i-spot']);
  });
});
