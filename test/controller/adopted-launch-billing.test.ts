import { describe, expect, it } from 'vitest';
import { computeCostReport } from '../../src/controller/cost-accounting.js';
import { InjectedCrash } from '../../src/controller/faults.js';
import { MemoryStateStore } from '../../src/controller/memory-state-store.js';
import { CloudOnlyTaskControl } from '../../src/controller/seams.js';
import type { PlannedInstance } from '../../src/scheduler/types.js';
import {
  catalog,
  CPU_SMALL,
  CrashAt,
  handPlan,
  jobSpec,
  priceOf,
  reconcilerFor,
  rig,
} from './controller-fixtures.js';

/**
 * An instance launched before a crash and found after it (by its launch token, in the cloud sync or by the retried
 * launch) has been billed by EC2 from its launch time, not from when the restarted controller found it.
 */
describe('an instance found by its launch token', () => {
  for (const found of ['by the cloud sync', 'by the retried launch'] as const)
    it(`is billed from EC2's launch time, found ${found}`, async () => {
      const r = rig();
      const job = r.controller.submit(jobSpec('cheap', CPU_SMALL), 'research');
      const control = new CloudOnlyTaskControl();
      const crashing = reconcilerFor(r, control, { faults: new CrashAt('launch:after-call') });
      const planned: PlannedInstance = {
        id: 'new-1',
        typeName: 'c7i.xlarge',
        isNew: true,
        taskIds: [`${job.id}.0`],
      };
      const { plan, diff } = handPlan(r, { instances: [planned] });
      crashing.applyPlan(plan, diff);
      const launchedAt = r.clock.nowSeconds();
      await expect(crashing.progress()).rejects.toThrow(InjectedCrash);
      const cloud = r.cloud.live()[0];
      if (cloud === undefined) throw new Error('no instance launched');
      cloud.launchedAtMs = launchedAt * 1000;
      // The controller comes back an hour later.
      r.clock.advance(3600);
      const restarted = reconcilerFor(r, control);
      if (found === 'by the cloud sync') await restarted.syncWithCloud();
      await restarted.progress();
      const inst = r.store.listInstances()[0];
      expect(inst?.cloudId).toBe(cloud.id);
      expect(inst?.launchedAtSeconds).toBe(launchedAt);
      r.clock.advance(3600);
      const report = computeCostReport(r.store, catalog, r.clock.nowSeconds());
      expect(report.byInstance[0]?.billedSeconds).toBe(7200);
      expect(report.totalCost).toBeCloseTo(2 * priceOf('c7i.xlarge'), 9);
    });
});

describe('the launch time a change carries', () => {
  it('is kept within the request and now', () => {
    let now = 1_000_000;
    const store = new MemoryStateStore({ nowSeconds: () => now });
    const early = store.createInstance({ typeName: 'c7i.xlarge' });
    const late = store.createInstance({ typeName: 'c7i.xlarge' });
    const exact = store.createInstance({ typeName: 'c7i.xlarge' });
    now += 600;
    // A cloud clock behind the request's, or ahead of now, is bounded; one in between is taken as given.
    expect(
      store.setInstanceState(early.id, 'launching', { cloudId: 'i-1', launchedAtSeconds: 0 })
        .launchedAtSeconds,
    ).toBe(1_000_000);
    expect(
      store.setInstanceState(late.id, 'launching', { cloudId: 'i-2', launchedAtSeconds: now + 60 })
        .launchedAtSeconds,
    ).toBe(now);
    expect(
      store.setInstanceState(exact.id, 'launching', { cloudId: 'i-3', launchedAtSeconds: 1_000_100 })
        .launchedAtSeconds,
    ).toBe(1_000_100);
    // Only the first launch counts: a later change does not move it.
    now += 60;
    expect(store.setInstanceState(exact.id, 'running', { launchedAtSeconds: now }).launchedAtSeconds).toBe(
      1_000_100,
    );
  });
});
