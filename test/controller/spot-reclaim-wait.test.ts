import { describe, expect, it } from 'vitest';
import type { Market } from '../../src/core/market.js';
import { computeCostReport } from '../../src/controller/cost-accounting.js';
import { SPOT_RECLAIM_MARGIN_SECONDS } from '../../src/controller/reconcile/effects/terminations.js';
import { CloudOnlyTaskControl } from '../../src/controller/seams.js';
import type { PlannedInstance } from '../../src/scheduler/types.js';
import { catalog, handPlan, reconcilerFor, rig } from './controller-fixtures.js';

/**
 * EC2 charges nothing for a spot instance it interrupts within its first hour, but charges its owner for one the owner
 * terminates: an empty instance with a spot interruption notice is left for EC2 to take, for a while.
 */
describe('an empty instance with a spot interruption notice', () => {
  async function noticed(
    market: Market,
    ageSeconds: number,
    notice: 'spot-interruption' | 'rebalance',
    /** The notice's time as recorded, when not the reclaim time in ISO form. */
    timeText?: string,
  ) {
    const r = rig();
    const reconciler = reconcilerFor(r, new CloudOnlyTaskControl());
    const planned: PlannedInstance & { readonly market: Market } = {
      id: 'new-1',
      typeName: 'c7i.xlarge',
      isNew: true,
      taskIds: [],
      market,
    };
    const { plan, diff } = handPlan(r, { instances: [planned] });
    reconciler.applyPlan(plan, diff);
    await reconciler.progress();
    const inst = r.store.listInstances()[0];
    if (inst?.cloudId === undefined) throw new Error('nothing launched');
    r.clock.advance(ageSeconds);
    // EC2 acts two minutes after its notice.
    const reclaimAt = r.clock.nowSeconds() + 120;
    const time = new Date(reclaimAt * 1000).toISOString();
    if (notice === 'rebalance') r.controller.drain(inst.id);
    r.controller.interruptionFromQueue(inst.cloudId, {
      kind: notice === 'rebalance' ? 'rebalance-recommendation' : 'spot-interruption',
      time: timeText ?? time,
    });
    expect(r.store.getInstance(inst.id)?.state).toBe('draining');
    return { r, reconciler, id: inst.id, cloudId: inst.cloudId, reclaimAt };
  }

  it('on spot in its first hour is left for EC2 until the notice’s time and a margin, then terminated', async () => {
    const { r, reconciler, id, reclaimAt } = await noticed('spot', 1200, 'spot-interruption');
    await reconciler.progress();
    expect(r.store.getInstance(id)?.state).toBe('draining');
    r.clock.advance(reclaimAt + SPOT_RECLAIM_MARGIN_SECONDS - 1 - r.clock.nowSeconds());
    await reconciler.progress();
    expect(r.store.getInstance(id)?.state).toBe('draining');
    expect(r.cloud.live()).toHaveLength(1);
    // EC2 never acted on it: it is not kept.
    r.clock.advance(1);
    await reconciler.progress();
    expect(r.store.getInstance(id)?.state).toBe('terminated');
    expect(r.cloud.live()).toHaveLength(0);
  });

  it('with a recorded time that is no real date, is left for EC2 until two minutes after the notice and a margin', async () => {
    // 30 February reads as 2 March to Date.parse, far from the clock's 2023: taken at its word, the reclaim would fall
    // outside the first hour and the instance would be terminated (and billed) at once.
    const { r, reconciler, id, reclaimAt } = await noticed(
      'spot',
      1200,
      'spot-interruption',
      '2026-02-30T00:00:00Z',
    );
    await reconciler.progress();
    expect(r.store.getInstance(id)?.state).toBe('draining');
    r.clock.advance(reclaimAt + SPOT_RECLAIM_MARGIN_SECONDS - 1 - r.clock.nowSeconds());
    await reconciler.progress();
    expect(r.store.getInstance(id)?.state).toBe('draining');
    r.clock.advance(1);
    await reconciler.progress();
    expect(r.store.getInstance(id)?.state).toBe('terminated');
  });

  it('taken by EC2 meanwhile, it is billed nothing', async () => {
    const { r, reconciler, id } = await noticed('spot', 1200, 'spot-interruption');
    await reconciler.progress();
    r.clock.advance(120);
    for (const c of r.cloud.live()) c.state = 'terminated';
    await reconciler.syncWithCloud();
    expect(r.store.getInstance(id)?.state).toBe('terminated');
    expect(computeCostReport(r.store, catalog, r.clock.nowSeconds()).totalCost).toBe(0);
  });

  for (const [what, market, age, notice] of [
    ['on demand', 'on-demand', 1200, 'spot-interruption'],
    ['past its first hour', 'spot', 3600, 'spot-interruption'],
    ['reclaimed only after its first hour', 'spot', 3500, 'spot-interruption'],
    ['drained on a rebalance recommendation', 'spot', 1200, 'rebalance'],
  ] as const)
    it(`${what}, is terminated at once`, async () => {
      const { r, reconciler, id } = await noticed(market, age, notice);
      await reconciler.progress();
      expect(r.store.getInstance(id)?.state).toBe('terminated');
    });
});
