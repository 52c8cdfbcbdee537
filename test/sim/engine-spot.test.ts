import { describe, expect, it } from 'vitest';
import type { Catalog } from '../../src/core/catalog.js';
import { SpotBaseline } from '../../src/scheduler/baselines/spot-baseline.js';
import { EvaScheduler } from '../../src/scheduler/eva.js';
import type { Scheduler } from '../../src/scheduler/types.js';
import { runSimulation } from '../../src/sim/run-simulation.js';
import { constantPairwise } from '../../src/world/ground-truth.js';
import type { SimulationOptions } from '../../src/sim/run-simulation.js';
import { testCatalog, testSpotMarket, trace, traceJob, traceTask } from './sim-fixtures.js';

/** small.x at $3.6/h on demand; on spot $1.08/h in zone a (>20%) and $1.44/h in zone b (<5%). */
function spotCatalog(): Catalog {
  const base = testCatalog();
  return {
    ...base,
    spot: testSpotMarket(
      { typeName: 'small.x', zone: 'testa', pricePerHour: 1.08, interruption: '>20%' },
      { typeName: 'small.x', zone: 'testb', pricePerHour: 1.44, interruption: '<5%' },
      { typeName: 'big.x', zone: 'testa', pricePerHour: 3.24, interruption: '>20%' },
    ),
  };
}

/** One 20-hour single-task job, checkpointing every 30 minutes. */
const longJob = trace(traceJob('J', { iterations: 72_000 }));
/** The same job whose checkpoint takes 1 + 200 s to kill and upload: more than a spot notice's two minutes. */
const slowSaveJob = trace(
  traceJob('J', { iterations: 72_000, tasks: [traceTask('node0', { uploadDelaySeconds: 200 })] }),
);

function run(scheduler: Scheduler, extra: Partial<SimulationOptions>) {
  return runSimulation({
    trace: longJob,
    scheduler,
    catalog: spotCatalog(),
    groundTruth: constantPairwise(1),
    checkpointIntervalSeconds: 1800,
    ...extra,
  });
}

describe('spot capacity in the simulator', () => {
  it('bills a spot instance at its pool price, and reports every instance-hour on spot', () => {
    const result = run(new EvaScheduler(spotCatalog(), { spot: true }), {
      spot: { seed: 1, noticeHandling: 'checkpoint-and-drain' },
    });
    // Price-capacity-optimized: the <5% pool in testb at $1.44/h, not the cheaper >20% one. At a rate of
    // 3.5e-5 per hour, the 20-hour job is most likely never interrupted with this seed.
    expect(result.spot).toEqual({
      interruptions: 0,
      lostWorkHours: 0,
      spotShare: 1,
      rebalanceRecommendations: 0,
    });
    const hours = result.summary.totalCost / 1.44;
    expect(hours).toBeGreaterThan(20);
    expect(hours).toBeLessThan(20.2);
    expect(result.jobs[0]?.endSeconds).not.toBeNull();
  });

  it('without the spot market, buys on demand and reports no spot metrics', () => {
    const result = run(new EvaScheduler(testCatalog(), { spot: true }), {});
    expect(result.spot).toBeUndefined();
    expect(result.summary.totalCost / 3.6).toBeGreaterThan(20);
  });

  it('reclaims instances in bursts; a notice checkpoint loses at most the notice, an eviction up to its interval', () => {
    // 60 bursts per pool per 30 days: about one every 12 hours for the job's pool.
    const bursts = { seed: 7, burstsPerPoolPerMonth: 60 };
    const fleetwise = run(new EvaScheduler(spotCatalog(), { spot: true }), {
      spot: { ...bursts, noticeHandling: 'checkpoint-and-drain' },
    });
    const evict = { spot: { ...bursts, noticeHandling: 'drain-and-evict' as const } };
    const baseline = run(new SpotBaseline(spotCatalog(), 'karpenter-spot'), {
      ...evict,
      trace: slowSaveJob,
    });
    // Its checkpoint fits in the notice (5 s to kill and upload): each eviction's SIGTERM saves the job's progress.
    const saving = run(new SpotBaseline(spotCatalog(), 'karpenter-spot'), evict);
    expect(saving.summary.instancesLaunched).toBeGreaterThan(1);
    expect(saving.spot?.lostWorkHours).toBe(0);
    expect(saving.summary.migrationsPerJob).toBe(0);
    for (const r of [fleetwise, baseline, saving]) {
      expect(r.jobs[0]?.endSeconds, r.summary.scheduler).not.toBeNull();
      expect(r.spot?.spotShare).toBe(1);
    }
    // fleetwise drains a noticed instance and moves the job off at once (checkpointed): EC2 takes back little or
    // nothing of it, and a reclaim that does land loses at most the notice.
    expect(fleetwise.summary.migrationsPerJob).toBeGreaterThan(0);
    const notices = fleetwise.spot?.interruptions ?? 0;
    expect(fleetwise.spot?.lostWorkHours ?? 1).toBeLessThanOrEqual((notices * 120) / 3600 + 1e-9);
    // Karpenter evicts the job at each notice; its checkpoint takes longer than the notice (201 s), so the job goes
    // back to its last periodic checkpoint: something lost, at most 30 minutes per instance it was evicted from (one
    // notice per instance), and nothing moved with a checkpoint.
    const evictedFrom = baseline.summary.instancesLaunched - 1;
    expect(evictedFrom).toBeGreaterThan(0);
    expect(baseline.summary.migrationsPerJob).toBe(0);
    expect(baseline.spot?.lostWorkHours ?? 0).toBeGreaterThan(fleetwise.spot?.lostWorkHours ?? 0);
    expect(baseline.spot?.lostWorkHours ?? 0).toBeLessThanOrEqual((evictedFrom * 1800) / 3600 + 1e-9);
    // Work lost is work done again: the job ends later than its 20 hours plus setup.
    expect(baseline.jobs[0]?.jctSeconds ?? 0).toBeGreaterThan(
      72_000 + (baseline.spot?.lostWorkHours ?? 0) * 3600,
    );
  });

  it('skypilot-spot relaunches away from the zone it lost', () => {
    const result = run(new SpotBaseline(spotCatalog(), 'skypilot-spot'), {
      spot: { seed: 7, burstsPerPoolPerMonth: 60, noticeHandling: 'none' },
    });
    expect(result.spot?.interruptions).toBeGreaterThan(0);
    // It starts in testa, the cheaper pool ($1.08/h), and a reclaim there sends it to testb ($1.44/h) only until the
    // next one there: on average it pays less per hour than testb's price.
    expect(result.summary.totalCost / (result.jobs[0]?.jctSeconds ?? 1)).toBeLessThan(1.44 / 3600);
  });

  it('is deterministic given the seed', () => {
    const once = () =>
      run(new SpotBaseline(spotCatalog(), 'karpenter-spot'), {
        spot: { seed: 3, burstsPerPoolPerMonth: 60, noticeHandling: 'drain-and-evict' },
      });
    expect(once().spot).toEqual(once().spot);
    expect(once().summary.totalCost).toBe(once().summary.totalCost);
  });

  it('a rebalance recommendation reaches the plan at once: the flagged instance is in the snapshot of a round run then', () => {
    const eva = new EvaScheduler(spotCatalog(), { spot: true });
    const flagged: number[] = [];
    const watching: Scheduler = {
      name: eva.name,
      observe: (snapshot, observations) => eva.observe(snapshot, observations),
      plan: (snapshot) => {
        if (snapshot.instances.some((i) => i.rebalanceRecommended === true))
          flagged.push(snapshot.nowSeconds);
        return eva.plan(snapshot);
      },
    };
    const result = run(watching, {
      spot: { seed: 7, burstsPerPoolPerMonth: 60, noticeHandling: 'checkpoint-and-drain', rebalanceShare: 1 },
    });
    expect(result.spot?.rebalanceRecommendations).toBeGreaterThan(0);
    // Rounds are every 300 s; a round off that grid is the one the recommendation asked for.
    expect(flagged.some((t) => t % 300 !== 0)).toBe(true);
    const without = run(new EvaScheduler(spotCatalog(), { spot: true }), {
      spot: { seed: 7, burstsPerPoolPerMonth: 60, noticeHandling: 'checkpoint-and-drain' },
    });
    expect(without.spot?.rebalanceRecommendations).toBe(0);
  });
});
