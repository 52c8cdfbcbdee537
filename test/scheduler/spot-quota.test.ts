import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { loadCatalogFile } from '../../src/cloud/catalog-file.js';
import type { Caps, ClusterSnapshot, SchedJob } from '../../src/core/model.js';
import { planCapViolation, planCapViolations } from '../../src/round/plan-caps.js';
import { diffConfiguration } from '../../src/scheduler/actions.js';
import { EvaScheduler } from '../../src/scheduler/eva.js';
import type { DraftInstance } from '../../src/scheduler/full-reconfiguration.js';
import { planMarkets } from '../../src/scheduler/eva-cap-price.js';
import { plannedPricePerHour } from '../../src/scheduler/market-choice.js';
import type { PackTask } from '../../src/scheduler/packing.js';
import { draftWithTasks } from '../../src/scheduler/reconfiguration.js';
import { PriceBook } from '../../src/scheduler/reservation-price.js';
import { executeRun } from '../../src/sim/run-request.js';

const catalog = loadCatalogFile();
const book = new PriceBook(catalog);
const DEMAND = { any: [1, 4, 15] as [number, number, number] };

/** A 1-GPU job not yet run, 10 h to go, checkpointing every `checkpointIntervalSeconds` (0: never). */
function job(id: string, checkpointIntervalSeconds: number): SchedJob {
  return {
    id,
    taskIds: [`${id}-t`],
    reconfigurable: true,
    arrivalSeconds: 0,
    migrationDelaySeconds: 120,
    checkpointIntervalSeconds,
    expectedRemainingSeconds: 36_000,
  };
}

function snapshotOf(jobs: readonly SchedJob[]): ClusterSnapshot {
  return {
    nowSeconds: 0,
    jobs: [...jobs],
    tasks: jobs.map((j) => ({ id: `${j.id}-t`, jobId: j.id, key: `w${j.id}`, demand: DEMAND })),
    instances: [],
  };
}

function packTask(j: SchedJob): PackTask {
  return { id: `${j.id}-t`, jobId: j.id, key: `w${j.id}`, demand: DEMAND, rp: 3.06, jobTaskCount: 1 };
}

describe('a spot quota on a plan', () => {
  it('buys on demand the new spot instance that saves least, until the spot quota holds', () => {
    // Two new p3.2xlarge, both worth buying spot alone. An interruption loses `risky` (on new-2) its whole 10 h and
    // `safe` (on new-1) a quarter hour, so spot saves less on new-2, though new-1 comes first by id. p-spot: 1 GPU.
    const safe = job('safe', 1800);
    const risky = job('risky', 0);
    const type = book.type('p3.2xlarge');
    const drafts = [
      draftWithTasks({ id: 'new-1', type, isNew: true }, [packTask(safe)]),
      draftWithTasks({ id: 'new-2', type, isNew: true }, [packTask(risky)]),
    ];
    const rp = new Map([
      ['safe', 3.06],
      ['risky', 3.06],
    ]);
    const markets = planMarkets(catalog, snapshotOf([safe, risky]), true, rp);
    expect(drafts.map((d) => markets.planned(d).market)).toEqual(['spot', 'spot']);
    const caps: Caps = { quotas: [{ group: 'p-spot', maxGpus: 1 }] };
    const bought = markets.pricePerHour.buy(drafts, caps);
    expect(drafts.map((d) => bought.planned(d).market)).toEqual(['spot', undefined]);
    // The on-demand instance is priced on demand: the $ cap sees what the fallback costs.
    expect(drafts.map((d) => bought.pricePerHour(d))).toEqual([
      markets.pricePerHour(drafts[0] as DraftInstance),
      type.costPerHour,
    ]);
    expect(markets.pricePerHour(drafts[0] as DraftInstance)).toBeLessThan(type.costPerHour / 2);
    // Both fit a 2-GPU spot quota; none fits a 0-GPU one.
    const roomy = markets.pricePerHour.buy(drafts, { quotas: [{ group: 'p-spot', maxGpus: 2 }] });
    expect(drafts.map((d) => roomy.planned(d).market)).toEqual(['spot', 'spot']);
    const none = markets.pricePerHour.buy(drafts, { quotas: [{ group: 'p-spot', maxGpus: 0 }] });
    expect(drafts.map((d) => none.planned(d).market)).toEqual([undefined, undefined]);
  });

  it("gives Eva plans the round's check accepts, and names the quota when the on-demand one is full too", () => {
    const jobs = ['a', 'b', 'c'].map((id) => job(id, 1800));
    const snapshot = snapshotOf(jobs);
    const check = (caps: Caps) => {
      const plan = new EvaScheduler(catalog, { spot: true, caps }).plan(snapshot);
      const diff = diffConfiguration(snapshot, plan.configuration, catalog);
      expect(planCapViolation(plan.configuration, diff, catalog, caps)).toBeUndefined();
      return plan;
    };
    // Two GPUs of spot: a third job's instance goes on demand.
    const mixed = check({ quotas: [{ group: 'p-spot', maxGpus: 2 }] });
    const gpus = (market: string) =>
      mixed.configuration.instances
        .filter((i) => (i.market ?? 'on-demand') === market)
        .reduce((s, i) => s + (catalog.types.find((t) => t.name === i.typeName)?.capacity[0] ?? 0), 0);
    expect(gpus('spot')).toBe(2);
    expect(gpus('on-demand')).toBeGreaterThanOrEqual(1);
    expect(mixed.decision.waiting).toEqual([]);
    // No on-demand room either: one job waits, named by the quota it would break.
    const full = check({
      quotas: [
        { group: 'p-spot', maxGpus: 2 },
        { group: 'p', maxGpus: 0 },
      ],
    });
    expect(full.configuration.instances.flatMap((i) => i.taskIds)).toHaveLength(2);
    expect(full.decision.waiting).toHaveLength(1);
    expect(full.decision.waiting[0]?.cap).toBe('quota p maxGpus');
    // A $ cap is held at the prices after the fallback: the on-demand instance does not fit under $4/h.
    const capped = check({ quotas: [{ group: 'p-spot', maxGpus: 2 }], maxCostPerHour: 4 });
    const cost = capped.configuration.instances.reduce((s, i) => s + plannedPricePerHour(catalog, i), 0);
    expect(cost).toBeLessThanOrEqual(4);
    expect(capped.decision.waiting.map((w) => w.cap)).toEqual(['maxCostPerHour']);
  });

  it('lets a simulation under a spot quota finish, in the engine and the controller runtime', async () => {
    const request = {
      scheduler: 'eva' as const,
      trace: { format: 'eva' as const, jobs: 8 },
      spot: {},
      queue: { kind: 'fifo' as const, caps: { quotas: [{ group: 'p-spot', maxGpus: 4 }] }, predict: false },
    };
    const engine = executeRun(request);
    expect(engine.jobs.every((j) => j.jctSeconds !== null)).toBe(true);
    const { executeControllerRun } = await import('../../src/sim/controller-runtime/execute.js');
    const controller = await executeControllerRun({ ...request, runtime: 'controller' });
    expect(controller.jobs.every((j) => j.jctSeconds !== null)).toBe(true);
  }, 60_000);
});

describe('the spot quota fallback (property)', () => {
  it('keeps every cap, and makes no job wait under a spot quota alone that the running spot instances keep', () => {
    fc.assert(
      fc.property(
        fc.array(fc.constantFrom(0, 1, 2), { minLength: 1, maxLength: 8 }),
        fc.array(fc.constantFrom('us-east-1a', 'us-east-1b'), { maxLength: 4 }),
        fc.integer({ min: 0, max: 6 }),
        fc.option(fc.integer({ min: 0, max: 12 }), { nil: undefined }),
        fc.option(fc.double({ min: 1, max: 20, noNaN: true }), { nil: undefined }),
        (demands, running, spotGpus, onDemandGpus, maxCostPerHour) => {
          // New jobs of 1, 2 or 4 GPUs; running ones each on a full spot p3.2xlarge.
          const sizes: [number, number, number][] = [
            [1, 4, 15],
            [2, 16, 100],
            [4, 32, 200],
          ];
          const fresh = demands.map((k, i) => ({
            ...job(`n${i}`, 1800),
            demand: sizes[k] as [number, number, number],
          }));
          const old = running.map((_, i) => ({
            ...job(`r${i}`, 1800),
            runningSinceSeconds: 0,
            lastCheckpointSeconds: 0,
          }));
          const snapshot: ClusterSnapshot = {
            nowSeconds: 600,
            jobs: [...fresh.map(({ demand: _d, ...j }) => j), ...old],
            tasks: [
              ...fresh.map((j) => ({
                id: `${j.id}-t`,
                jobId: j.id,
                key: `w${j.id}`,
                demand: { any: j.demand },
              })),
              ...old.map((j) => ({
                id: `${j.id}-t`,
                jobId: j.id,
                key: `w${j.id}`,
                demand: { any: [1, 8, 61] as [number, number, number] },
                instanceId: `i-${j.id}`,
              })),
            ],
            instances: old.map((j, i) => ({
              id: `i-${j.id}`,
              typeName: 'p3.2xlarge',
              state: 'running' as const,
              taskIds: [`${j.id}-t`],
              market: 'spot' as const,
              placement: { zone: running[i] as string },
            })),
          };
          const caps: Caps = {
            quotas: [
              { group: 'p-spot', maxGpus: spotGpus },
              ...(onDemandGpus === undefined ? [] : [{ group: 'p', maxGpus: onDemandGpus }]),
            ],
            ...(maxCostPerHour === undefined ? {} : { maxCostPerHour }),
          };
          const plan = new EvaScheduler(catalog, { spot: true, caps }).plan(snapshot);
          const diff = diffConfiguration(snapshot, plan.configuration, catalog);
          expect(planCapViolation(plan.configuration, diff, catalog, caps)).toBeUndefined();
          expect(planCapViolations(plan.configuration, catalog, { quotas: caps.quotas })).toEqual([]);
          const cost = plan.configuration.instances.reduce((s, i) => s + plannedPricePerHour(catalog, i), 0);
          expect(cost).toBeLessThanOrEqual((maxCostPerHour ?? Number.POSITIVE_INFINITY) + 1e-9);
          // A spot quota alone that the running spot instances keep never makes a job wait: spot full, new
          // instances are bought on demand.
          if (onDemandGpus === undefined && maxCostPerHour === undefined && running.length <= spotGpus)
            expect(plan.decision.waiting).toEqual([]);
        },
      ),
      { numRuns: 40, seed: 7 },
    );
  });
});
