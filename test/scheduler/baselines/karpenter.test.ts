import { describe, expect, it } from 'vitest';
import { parseCatalog } from '../../../src/core/catalog.js';
import { KarpenterScheduler } from '../../../src/scheduler/baselines/karpenter.js';
import { catalog, layout, snapshot } from './fixtures.js';

const karpenter = (balanced = false) =>
  new KarpenterScheduler(catalog, { policy: balanced ? 'Balanced' : 'WhenEmptyOrUnderutilized' });

describe('KarpenterScheduler provisioning', () => {
  it('places pending tasks first-fit-decreasing onto existing capacity, then onto the cheapest new type', () => {
    // p2 ([0,4,8]) goes first and fills i1; p1 gets a c7i.large. In arrival order p1 would take i1 and p2 a c7i.xlarge.
    const plan = karpenter().plan(
      snapshot({
        instances: [{ id: 'i1', type: 'c7i.2xlarge' }],
        jobs: [
          { id: 'a', demand: [0, 4, 8], on: 'i1' },
          { id: 'p1', demand: [0, 1, 2], arrivalSeconds: 1 },
          { id: 'p2', demand: [0, 4, 8], arrivalSeconds: 2 },
        ],
      }),
    );
    expect(layout(plan.configuration)).toEqual(['i1:c7i.2xlarge[a-0,p2-0]', 'new-1:c7i.large[p1-0]']);
  });

  it('groups pending tasks on one new instance and never launches a GPU type for CPU-only tasks', () => {
    // [0,4,8] together: cheapest fitting non-GPU type is c7i.xlarge ($0.1785).
    const plan = karpenter().plan(
      snapshot({
        jobs: [
          { id: 'c1', demand: [0, 2, 4] },
          { id: 'c2', demand: [0, 2, 4] },
        ],
      }),
    );
    expect(layout(plan.configuration)).toEqual(['new-1:c7i.xlarge[c1-0,c2-0]']);
    const gpu = karpenter().plan(snapshot({ jobs: [{ id: 'g', demand: [1, 4, 10] }] }));
    expect(layout(gpu.configuration)).toEqual(['new-1:p3.2xlarge[g-0]']);
  });

  it('deletes empty instances', () => {
    const plan = karpenter().plan(snapshot({ instances: [{ id: 'e', type: 'c7i.large' }], jobs: [] }));
    expect(plan.configuration.instances).toEqual([]);
  });
});

describe('KarpenterScheduler WhenEmpty (consolidationPolicy, or do-not-disrupt batch jobs)', () => {
  const whenEmpty = () => new KarpenterScheduler(catalog, { policy: 'WhenEmpty' });

  it('never moves a running task, even where the default policy deletes the instance', () => {
    const snap = snapshot({
      instances: [
        { id: 'i1', type: 'c7i.2xlarge' },
        { id: 'i2', type: 'c7i.2xlarge' },
      ],
      jobs: [
        { id: 'a', demand: [0, 2, 4], on: 'i1' },
        { id: 'b', demand: [0, 6, 12], on: 'i2' },
      ],
    });
    expect(layout(karpenter().plan(snap).configuration)).toHaveLength(1);
    const plan = whenEmpty().plan(snap);
    expect(layout(plan.configuration)).toEqual(['i1:c7i.2xlarge[a-0]', 'i2:c7i.2xlarge[b-0]']);
    expect(plan.decision.reason).toMatch(/^Karpenter \(WhenEmpty\)/);
    expect(whenEmpty().name).toBe('karpenter-when-empty');
  });

  it('still deletes empty instances and packs pending tasks like the other policies', () => {
    const plan = whenEmpty().plan(
      snapshot({
        instances: [
          { id: 'e', type: 'c7i.large' },
          { id: 'i1', type: 'c7i.2xlarge' },
        ],
        jobs: [
          { id: 'a', demand: [0, 4, 8], on: 'i1' },
          { id: 'p', demand: [0, 4, 8], arrivalSeconds: 1 },
        ],
      }),
    );
    expect(layout(plan.configuration)).toEqual(['i1:c7i.2xlarge[a-0,p-0]']);
  });
});

describe('KarpenterScheduler consolidation', () => {
  it('deletes an instance whose tasks fit on existing capacity', () => {
    const plan = karpenter().plan(
      snapshot({
        instances: [
          { id: 'i1', type: 'c7i.2xlarge' },
          { id: 'i2', type: 'c7i.2xlarge' },
        ],
        jobs: [
          { id: 'a', demand: [0, 2, 4], on: 'i1' },
          // Pinned: i2 is no candidate, but a destination with [0,2,4] free.
          { id: 'b', demand: [0, 6, 12], on: 'i2', reconfigurable: false },
        ],
      }),
    );
    expect(layout(plan.configuration)).toEqual(['i2:c7i.2xlarge[a-0,b-0]']);
    expect(plan.decision.reason).toContain('delete i1 (c7i.2xlarge) saving $0.3570/h');
  });

  it('replaces an instance by one strictly cheaper instance', () => {
    const plan = karpenter().plan(
      snapshot({
        instances: [{ id: 'i1', type: 'c7i.xlarge' }],
        jobs: [{ id: 'a', demand: [0, 2, 4], on: 'i1' }],
      }),
    );
    expect(layout(plan.configuration)).toEqual(['new-1:c7i.large[a-0]']);
    expect(plan.decision.candidates[0]?.movedJobs).toEqual(['a']);
  });

  it('keeps an instance when no strictly cheaper type fits its tasks', () => {
    const plan = karpenter().plan(
      snapshot({
        instances: [{ id: 'i1', type: 'c7i.xlarge' }],
        jobs: [{ id: 'a', demand: [0, 4, 8], on: 'i1' }],
      }),
    );
    expect(layout(plan.configuration)).toEqual(['i1:c7i.xlarge[a-0]']);
    expect(plan.decision.reason).toContain('no consolidation');
  });

  it('does not replace with an equally priced type, only a strictly cheaper one', () => {
    const custom = (price: number) =>
      parseCatalog({
        schemaVersion: 1,
        region: 'us-east-1',
        types: [
          { name: 'xa.large', family: 'xa', gpus: 0, vcpus: 4, memoryGiB: 8, costPerHour: 1, delays },
          { name: 'xb.large', family: 'xb', gpus: 0, vcpus: 4, memoryGiB: 8, costPerHour: price, delays },
        ],
      });
    const snap = snapshot({
      instances: [{ id: 'i1', type: 'xa.large' }],
      jobs: [{ id: 'a', demand: [0, 2, 4], on: 'i1' }],
    });
    expect(layout(new KarpenterScheduler(custom(1)).plan(snap).configuration)).toEqual(['i1:xa.large[a-0]']);
    expect(layout(new KarpenterScheduler(custom(0.99)).plan(snap).configuration)).toEqual([
      'new-1:xb.large[a-0]',
    ]);
  });

  it('on spot nodes (karpenter-spot) consolidates by deletion only: no spot-to-spot replacement', () => {
    const spotKarpenter = new KarpenterScheduler(catalog, { spotNodes: true });
    // The replace above (c7i.xlarge → c7i.large) is off without the SpotToSpotConsolidation gate.
    const lone = snapshot({
      instances: [{ id: 'i1', type: 'c7i.xlarge' }],
      jobs: [{ id: 'a', demand: [0, 2, 4], on: 'i1' }],
    });
    expect(layout(spotKarpenter.plan(lone).configuration)).toEqual(['i1:c7i.xlarge[a-0]']);
    // Two half-empty nodes: one is deleted onto the other instead of both merging onto a new cheaper one.
    const two = snapshot({
      instances: [
        { id: 'i1', type: 'c7i.2xlarge' },
        { id: 'i2', type: 'c7i.2xlarge' },
      ],
      jobs: [
        { id: 'a', demand: [0, 2, 4], on: 'i1' },
        { id: 'b', demand: [0, 2, 4], on: 'i2' },
      ],
    });
    expect(layout(spotKarpenter.plan(two).configuration)).toHaveLength(1);
    expect(layout(spotKarpenter.plan(two).configuration)[0]).toMatch(/^i[12]:c7i\.2xlarge\[a-0,b-0\]$/);
  });

  it('merges several instances into one cheaper replacement (multi-node)', () => {
    // Two c7i.2xlarge ($0.714/h together) each hosting [0,2,4] → one c7i.xlarge ($0.1785/h).
    const plan = karpenter().plan(
      snapshot({
        instances: [
          { id: 'i1', type: 'c7i.2xlarge' },
          { id: 'i2', type: 'c7i.2xlarge' },
        ],
        jobs: [
          { id: 'a', demand: [0, 2, 4], on: 'i1' },
          { id: 'b', demand: [0, 2, 4], on: 'i2' },
        ],
      }),
    );
    expect(layout(plan.configuration)).toEqual(['new-1:c7i.xlarge[a-0,b-0]']);
  });

  it('leaves instances of pinned or protected jobs, and launching instances, alone', () => {
    const snap = (now: number) =>
      snapshot({
        now,
        instances: [
          { id: 'w', type: 'c7i.4xlarge' },
          { id: 'l', type: 'c7i.4xlarge', state: 'launching' },
        ],
        jobs: [
          { id: 'a', demand: [0, 2, 4], on: 'w', runningSinceSeconds: 0, noMoveSeconds: 1800 },
          { id: 'b', demand: [0, 2, 4], on: 'l' },
        ],
      });
    const during = karpenter().plan(snap(600));
    expect(layout(during.configuration)).toEqual(['l:c7i.4xlarge[b-0]', 'w:c7i.4xlarge[a-0]']);
    expect(during.decision.pinned.map((p) => p.jobId)).toEqual(['a']);
    // After the window, w's task moves onto l's free room (delete w; l itself is still launching).
    const after = karpenter().plan(snap(1800));
    expect(layout(after.configuration)).toEqual(['l:c7i.4xlarge[a-0,b-0]']);
  });
});

describe('KarpenterScheduler Balanced (k = 2)', () => {
  it('approves a replace whose savings share beats half its disruption share', () => {
    // Fleet $0.714/h, disruption 6 (3 instances × (1 + 1 task)). Replace i1 (c7i.2xlarge → c7i.large):
    // savings 0.26775/0.714 = 0.375, disruption 2/6 = 0.333 → score 1.125 ≥ 0.5.
    const plan = karpenter(true).plan(
      snapshot({
        instances: [
          { id: 'i1', type: 'c7i.2xlarge' },
          { id: 'p1', type: 'c7i.xlarge' },
          { id: 'p2', type: 'c7i.xlarge' },
        ],
        jobs: [
          { id: 'a', demand: [0, 1, 2], on: 'i1' },
          { id: 'b', demand: [0, 4, 8], on: 'p1', reconfigurable: false },
          { id: 'c', demand: [0, 4, 8], on: 'p2', reconfigurable: false },
        ],
      }),
    );
    expect(layout(plan.configuration)).toContain('new-1:c7i.large[a-0]');
    expect(plan.decision.reason).toContain('score 1.13 ≥ 0.50');
  });

  it('rejects a marginal replace that plain consolidation would make', () => {
    // i1 (c7i.xlarge) hosts 3 small tasks; replacing it by a c7i.large saves 0.08925/0.357 = 0.25 of the fleet's
    // cost for 4/6 of its disruption: score 0.375 < 0.5.
    const snap = snapshot({
      instances: [
        { id: 'i1', type: 'c7i.xlarge' },
        { id: 'p', type: 'c7i.xlarge' },
      ],
      jobs: [
        { id: 'a', demand: [0, 0.5, 1], on: 'i1' },
        { id: 'b', demand: [0, 0.5, 1], on: 'i1' },
        { id: 'c', demand: [0, 0.5, 1], on: 'i1' },
        { id: 'd', demand: [0, 4, 8], on: 'p', reconfigurable: false },
      ],
    });
    expect(layout(karpenter(true).plan(snap).configuration)).toEqual([
      'i1:c7i.xlarge[a-0,b-0,c-0]',
      'p:c7i.xlarge[d-0]',
    ]);
    expect(layout(karpenter(false).plan(snap).configuration)).toEqual([
      'new-1:c7i.large[a-0,b-0,c-0]',
      'p:c7i.xlarge[d-0]',
    ]);
  });
});

const delays = {
  instantiateSeconds: 10,
  workerStartSeconds: 60,
  workerRegisterSeconds: 80,
  terminateSeconds: 1,
};
