import { describe, expect, it } from 'vitest';
import type { ClusterSnapshot, SchedInstance } from '../../src/core/model.js';
import { RebalanceRiskTracker } from '../../src/scheduler/rebalance-risk.js';
import { REBALANCE_INTERRUPTION_RATE_PER_HOUR } from '../../src/scheduler/spot-cost.js';

/** Instances by id, flagged or not, at a time; no jobs (the tracker reads instances only). */
function snapshot(nowSeconds: number, instances: Record<string, boolean>): ClusterSnapshot {
  return {
    nowSeconds,
    jobs: [],
    tasks: [],
    instances: Object.entries(instances).map(([id, flagged]): SchedInstance => ({
      id,
      typeName: 'p3.2xlarge',
      state: 'running',
      taskIds: [],
      market: 'spot',
      ...(flagged ? { rebalanceRecommended: true } : {}),
    })),
  };
}

const keep = (...ids: string[]) => ({
  instances: ids.map((id) => ({ id, typeName: 'p3.2xlarge', isNew: false, taskIds: [] })),
});

describe('the reclaim rate of instances recommended for rebalancing, learned', () => {
  it('starts at the prior: one reclaim in two hours', () => {
    expect(new RebalanceRiskTracker().ratePerHour()).toBe(REBALANCE_INTERRUPTION_RATE_PER_HOUR);
  });

  it('counts a flagged instance gone while the plan kept it as a reclaim, over the hours it was seen flagged', () => {
    const t = new RebalanceRiskTracker();
    t.observe(snapshot(0, { a: true, b: false }));
    t.notePlan(keep('a', 'b'));
    t.observe(snapshot(3600, { a: true, b: false }));
    t.notePlan(keep('a', 'b'));
    t.observe(snapshot(3900, { b: false }));
    // (1 reclaim + the prior's 1) / (1 h seen + half the 300 s it went in + the prior's 2 h).
    expect(t.ratePerHour()).toBeCloseTo(2 / (1 + 150 / 3600 + 2), 12);
  });

  it('counts none for a flagged instance the plan dropped, and lowers the rate as false alarms add hours', () => {
    const t = new RebalanceRiskTracker();
    t.observe(snapshot(0, { a: true }));
    t.notePlan(keep('a'));
    t.observe(snapshot(36_000, { a: true })); // 10 h flagged, still there
    t.notePlan(keep()); // its tasks moved off: dropped
    t.observe(snapshot(36_300, {}));
    expect(t.ratePerHour()).toBeCloseTo(1 / 12, 12);
    // An unflagged instance adds nothing, gone or not.
    t.observe(snapshot(40_000, { c: false }));
    t.notePlan(keep('c'));
    t.observe(snapshot(41_000, {}));
    expect(t.ratePerHour()).toBeCloseTo(1 / 12, 12);
  });

  it('counts only the kept instances the snapshot names reclaimed when it tells exits apart; the others are censored', () => {
    const t = new RebalanceRiskTracker();
    t.observe(snapshot(0, { a: true, b: true }));
    t.notePlan(keep('a', 'b'));
    t.observe(snapshot(3600, { a: true, b: true }));
    t.notePlan(keep('a', 'b'));
    // Both gone; only a was reclaimed (b drained by an operator, say).
    t.observe({ ...snapshot(3900, {}), reclaimedInstanceIds: ['a'] });
    expect(t.ratePerHour()).toBeCloseTo(2 / (2 + 150 / 3600 + 2), 12);
  });

  it('survives a restart: its state round-trips through JSON, and state saved before it starts from the prior', () => {
    const t = new RebalanceRiskTracker();
    t.observe(snapshot(0, { a: true }));
    t.notePlan(keep('a'));
    t.observe(snapshot(7200, { a: true }));
    t.notePlan(keep('a'));
    const restored = RebalanceRiskTracker.fromJSON(JSON.parse(JSON.stringify(t.toJSON())));
    for (const x of [t, restored]) x.observe(snapshot(9000, {}));
    expect(restored.ratePerHour()).toBe(t.ratePerHour());
    expect(t.ratePerHour()).toBeCloseTo(2 / (2 + 900 / 3600 + 2), 12);
    expect(RebalanceRiskTracker.fromJSON(undefined).ratePerHour()).toBe(REBALANCE_INTERRUPTION_RATE_PER_HOUR);
  });
});
