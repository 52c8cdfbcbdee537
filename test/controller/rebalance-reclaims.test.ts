import { describe, expect, it } from 'vitest';
import { buildSnapshot, readSnapshotInputs } from '../../src/controller/snapshot.js';
import { RebalanceRiskTracker } from '../../src/scheduler/rebalance-risk.js';
import { CPU_SMALL, jobSpec, rig } from './controller-fixtures.js';

/**
 * What the controller's snapshot tells the learned rebalance risk of the flagged instances that left: a spot
 * interruption notice and a loss to the cloud are reclaims; an operator's drain is not, and is censored as an
 * instance the plan dropped is (scheduler/rebalance-risk.ts).
 */
describe('reclaims of flagged instances, as the controller tells them', () => {
  it('counts a notice and a cloud loss as reclaims, not a drain', async () => {
    const r = rig();
    for (let i = 0; i < 4; i++) r.controller.submit(jobSpec(`job-${i}`, CPU_SMALL), 'research');
    await r.controller.runRound();
    await r.controller.reconcile();
    const instances = r.store.listInstances({ states: ['running'] });
    expect(instances).toHaveLength(4);
    const [noticed, drained, lost, stays] = instances.map((i) => ({
      id: i.id,
      cloudId: i.cloudId as string,
    }));
    if (noticed === undefined || drained === undefined || lost === undefined || stays === undefined)
      throw new Error('four instances expected');
    for (const i of instances)
      expect(
        r.controller.interruptionFromQueue(i.cloudId as string, { kind: 'rebalance-recommendation' }),
      ).toBe(true);

    const tracker = new RebalanceRiskTracker();
    const observe = (): ReturnType<typeof buildSnapshot> => {
      const snapshot = buildSnapshot(readSnapshotInputs(r.store, r.clock.nowSeconds()));
      tracker.observe(snapshot);
      return snapshot;
    };
    observe();
    r.clock.advance(3600);
    observe();
    tracker.notePlan({
      instances: instances.map((i) => ({ id: i.id, typeName: i.typeName, isNew: false, taskIds: [] })),
    });

    const at = new Date((r.clock.nowSeconds() + 120) * 1000).toISOString();
    expect(r.controller.interruptionFromQueue(noticed.cloudId, { kind: 'spot-interruption', time: at })).toBe(
      true,
    );
    r.controller.drain(drained.id);
    r.cloud.instances.delete(lost.cloudId);
    r.clock.advance(120);
    await r.controller.reconcile();
    expect(r.store.getInstance(lost.id)?.state).toBe('terminated');

    const snapshot = observe();
    expect(snapshot.instances.map((i) => i.id)).toEqual([stays.id]);
    expect(snapshot.reclaimedInstanceIds).toEqual([noticed.id, lost.id].sort());
    // Two reclaims and the prior's one, over 4 h seen flagged, the 120 s the one left was seen, half of that for
    // each reclaimed one, and the prior's 2 h; the drained one adds neither.
    expect(tracker.ratePerHour()).toBeCloseTo(3 / (4 + 240 / 3600 + 2), 12);
  });
});
