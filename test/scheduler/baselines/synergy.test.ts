import { describe, expect, it } from 'vitest';
import { SynergyScheduler } from '../../../src/scheduler/baselines/synergy.js';
import { catalog, layout, snapshot } from './fixtures.js';

describe('SynergyScheduler', () => {
  it('refuses a placement whose TNRP/price is below 1 and opens the cheapest type instead', () => {
    // Two 1-GPU tasks (RP = p3.2xlarge $3.06) on a p3.8xlarge: TNRP = 2 × 3.06 × 0.95 = 5.814; 5.814 / 12.24 = 0.475 < 1.
    const plan = new SynergyScheduler(catalog).plan(
      snapshot({
        instances: [{ id: 'big', type: 'p3.8xlarge' }],
        jobs: [
          { id: 'g1', demand: [1, 4, 10], on: 'big' },
          { id: 'g2', demand: [1, 4, 10] },
        ],
      }),
    );
    expect(layout(plan.configuration)).toEqual(['big:p3.8xlarge[g1-0]', 'new-1:p3.2xlarge[g2-0]']);
  });

  it('packs where TNRP/price ≥ 1, and learns from observed throughputs that it may (ratio exactly 1)', () => {
    const synergy = new SynergyScheduler(catalog);
    const before = snapshot({
      instances: [{ id: 'x', type: 'c7i.xlarge' }],
      jobs: [
        { id: 'a', demand: [0, 2, 4], on: 'x' },
        { id: 'b', demand: [0, 2, 4] },
      ],
    });
    // Default rates: 2 × 0.08925 × 0.95 / 0.1785 = 0.95 < 1 → b gets its own c7i.large.
    expect(layout(synergy.plan(before).configuration)).toEqual(['new-1:c7i.large[b-0]', 'x:c7i.xlarge[a-0]']);

    // Observed: a and b together on one instance, both at full speed.
    const together = snapshot({
      instances: [{ id: 'y', type: 'c7i.xlarge' }],
      jobs: [
        { id: 'a', demand: [0, 2, 4], on: 'y' },
        { id: 'b', demand: [0, 2, 4], on: 'y' },
      ],
    });
    synergy.observe(together, [
      { taskId: 'a-0', normalizedThroughput: 1 },
      { taskId: 'b-0', normalizedThroughput: 1 },
    ]);
    expect(synergy.table.rate('a', ['b'])).toBe(1);
    // Now 2 × 0.08925 × 1 / 0.1785 = 1 ≥ 1 → b joins a.
    expect(layout(synergy.plan(before).configuration)).toEqual(['x:c7i.xlarge[a-0,b-0]']);
  });

  it('packs onto an instance launched earlier in the same round', () => {
    // a → new c7i.large; b: TNRP(a, b) / 0.08925 = 2 × 0.08925 × 0.95 / 0.08925 = 1.9 ≥ 1 and [0,2,4] fits.
    const plan = new SynergyScheduler(catalog).plan(
      snapshot({
        jobs: [
          { id: 'a', demand: [0, 1, 2] },
          { id: 'b', demand: [0, 1, 2] },
        ],
      }),
    );
    expect(layout(plan.configuration)).toEqual(['new-1:c7i.large[a-0,b-0]']);
  });

  it('picks the best ratio among instances that fit', () => {
    // On `small` (c7i.xlarge): (0.08925·0.95 + 0.08925·0.95)/0.1785 = 0.95 → refused.
    // On `mid` (c7i.2xlarge hosting a [0,6,12], RP c7i.2xlarge 0.357): (0.357·0.95 + 0.08925·0.95)/0.357 = 1.1875.
    // On `gpu` (p3.2xlarge hosting g, RP 3.06): (3.06·0.95 + 0.08925·0.95)/3.06 ≈ 0.978 → refused.
    const plan = new SynergyScheduler(catalog).plan(
      snapshot({
        instances: [
          { id: 'small', type: 'c7i.xlarge' },
          { id: 'gpu', type: 'p3.2xlarge' },
          { id: 'mid', type: 'c7i.2xlarge' },
        ],
        jobs: [
          { id: 's', demand: [0, 2, 4], on: 'small' },
          { id: 'g', demand: [1, 4, 10], on: 'gpu' },
          { id: 'a', demand: [0, 6, 12], on: 'mid' },
          { id: 'n', demand: [0, 2, 4] },
        ],
      }),
    );
    expect(layout(plan.configuration)).toContain('mid:c7i.2xlarge[a-0,n-0]');
    expect(plan.decision.candidates[0]?.newInstances).toBe(0);
  });

  it('never moves a committed task and lets empty instances go', () => {
    const plan = new SynergyScheduler(catalog).plan(
      snapshot({
        instances: [
          { id: 'big', type: 'c7i.4xlarge' },
          { id: 'empty', type: 'c7i.large' },
        ],
        jobs: [{ id: 'a', demand: [0, 2, 4], on: 'big' }],
      }),
    );
    expect(layout(plan.configuration)).toEqual(['big:c7i.4xlarge[a-0]']);
    expect(plan.decision.candidates[0]?.movedJobs).toEqual([]);
  });
});
