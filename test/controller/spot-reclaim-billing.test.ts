import { describe, expect, it, vi } from 'vitest';
import type { Market } from '../../src/core/market.js';
import { IncrementalCostReport } from '../../src/controller/incremental-cost-report.js';
import {
  attributeCosts,
  computeCostReport,
  reclaimedBySpot,
  type BilledInstance,
} from '../../src/controller/cost-accounting.js';
import { CloudOnlyTaskControl } from '../../src/controller/seams.js';
import type { PlannedInstance } from '../../src/scheduler/types.js';
import { catalog, CPU_SMALL, handPlan, jobSpec, reconcilerFor, rig } from './controller-fixtures.js';

/**
 * EC2 charges nothing for a spot instance it interrupts within its first hour; one its owner terminates, or one
 * interrupted later, is charged for the seconds it ran.
 */
/** A rig with one job's task on one c7i.xlarge bought in `market`, launched and running. */
async function oneInstanceLaunched(market: Market) {
  const r = rig();
  const job = r.controller.submit(jobSpec('cheap', CPU_SMALL), 'research');
  const reconciler = reconcilerFor(r, new CloudOnlyTaskControl());
  const planned: PlannedInstance & { readonly market: Market } = {
    id: 'new-1',
    typeName: 'c7i.xlarge',
    isNew: true,
    taskIds: [`${job.id}.0`],
    market,
  };
  const { plan, diff } = handPlan(r, { instances: [planned] });
  reconciler.applyPlan(plan, diff);
  await reconciler.progress();
  const inst = r.store.listInstances()[0];
  const cloud = r.cloud.live()[0];
  if (inst === undefined || cloud === undefined) throw new Error('nothing launched');
  return { r, job, reconciler, inst, cloud };
}

describe('a spot instance EC2 reclaims', () => {
  const instance = (seconds: number, reclaimed: boolean): BilledInstance => ({
    id: 'inst-1',
    typeName: 'c7i.xlarge',
    costPerHour: 0.36,
    fromSeconds: 1000,
    terminatedAtSeconds: 1000 + seconds,
    reclaimedBySpot: reclaimed,
  });
  const report = (inst: BilledInstance) =>
    attributeCosts({
      instances: [inst],
      placements: [
        {
          taskId: 'job-1.0',
          jobId: 'job-1',
          instanceId: 'inst-1',
          fromSeconds: 1000,
          toSeconds: 1000 + 20,
          kind: 'work',
        },
      ],
      reservationPrice: () => 0.36,
      jobs: new Map([['job-1', { id: 'job-1', name: 'j', team: 't' }]]),
      sinceSeconds: 0,
      nowSeconds: 10_000,
    });

  it('within its first hour is billed nothing, not even the minute', () => {
    for (const seconds of [30, 1800, 3599]) {
      const r = report(instance(seconds, true));
      expect(r.totalCost).toBe(0);
      expect(r.byJob[0]?.cost ?? 0).toBe(0);
      expect(r.idleCost).toBe(0);
      expect(r.byInstance[0]).toMatchObject({ cost: 0, billedSeconds: seconds });
    }
  });

  it('after its first hour, or ended by its owner, is billed as any instance', () => {
    expect(report(instance(3600, true)).totalCost).toBeCloseTo(0.36, 12);
    expect(report(instance(1800, false)).totalCost).toBeCloseTo(0.18, 12);
    // Ended by its owner within the minute: the minimum.
    expect(report(instance(30, false)).totalCost).toBeCloseTo(0.006, 12);
  });

  for (const bySpot of [true, false])
    it(`is recorded only when EC2's reason says it interrupted it (${String(bySpot)})`, async () => {
      const { r, reconciler, inst, cloud } = await oneInstanceLaunched('spot');
      // The cloud lists it ended 20 minutes in, with EC2's reason: a spot interruption, or someone else's terminate.
      const list = r.cloud.list.bind(r.cloud);
      vi.spyOn(r.cloud, 'list').mockImplementation(async (...args) =>
        (await list(...args)).map((c) =>
          c.instanceId === cloud.id ? { ...c, endedBySpotInterruption: bySpot } : c,
        ),
      );
      r.clock.advance(1200);
      cloud.state = 'shutting-down';
      cloud.endedAt = new Date(r.clock.nowSeconds() * 1000);
      r.clock.advance(300);
      await reconciler.syncWithCloud();
      expect(r.store.getInstance(inst.id)?.state).toBe('terminated');
      expect(reclaimedBySpot(r.store, inst.id)).toBe(bySpot);
      const costs = computeCostReport(r.store, catalog, r.clock.nowSeconds());
      if (bySpot) expect(costs.totalCost).toBe(0);
      else expect(costs.totalCost).toBeGreaterThan(0);
    });

  for (const market of ['spot', 'on-demand'] as const)
    it(`is recorded when the sync finds it gone, and billed by that record (${market})`, async () => {
      const { r, job, reconciler, inst, cloud } = await oneInstanceLaunched(market);
      // EC2 takes it back 20 minutes in; the controller notices 5 minutes later.
      r.clock.advance(1200);
      cloud.state = 'terminated';
      cloud.endedAt = new Date(r.clock.nowSeconds() * 1000);
      r.clock.advance(300);
      await reconciler.syncWithCloud();
      expect(r.store.getInstance(inst.id)?.state).toBe('terminated');
      expect(reclaimedBySpot(r.store, inst.id)).toBe(market === 'spot');
      const costs = computeCostReport(r.store, catalog, r.clock.nowSeconds());
      if (market === 'spot') expect(costs.totalCost).toBe(0);
      else expect(costs.totalCost).toBeGreaterThan(0);
      // The incremental report (`fleetwise jobs`' costs, the hourly reports) bills it alike.
      const incremental = new IncrementalCostReport().report(r.store, catalog, r.clock.nowSeconds());
      expect(incremental.totalCost).toBeCloseTo(costs.totalCost, 9);
      expect(incremental.byJob.find((j) => j.id === job.id)?.cost ?? 0).toBeCloseTo(
        costs.byJob.find((j) => j.id === job.id)?.cost ?? 0,
        9,
      );
    });
});
