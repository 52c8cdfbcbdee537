import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { orderingKey, orderQueue, type OrderableJob } from '../../src/queue/ordering.js';
import {
  distribution,
  expectedRemainingSeconds,
  sevcikRank,
  successRank,
  successSpecSchema,
  toDistribution,
} from '../../src/queue/success.js';

describe('success model (digest success-ranked-ordering.md)', () => {
  it('S1 ranks: R(J1) = 10.3333, R(J2) = 10.5; SR ranks 4 and 4.2', () => {
    const j1 = distribution([1, 10], [0.25, 0.75]);
    const j2 = distribution([3, 6], [0.6, 0.4]);
    expect(successRank(j1)).toBeCloseTo(31 / 3, 12);
    expect(successRank(j2)).toBeCloseTo(10.5, 12);
    expect(sevcikRank(j1)).toBeCloseTo(4, 12);
    expect(sevcikRank(j2)).toBeCloseTo(4.2, 12);
    expect(sevcikRank(j1, 1)).toBeCloseTo(9, 12);
  });

  it('S7: stages (2, 3, 5) with continuation (.5, .8) → x (2, 5, 10), p (.5, .1, .4); remaining ranks 13.75, 8.75, 5', () => {
    const d = toDistribution({ kind: 'stages', stageSeconds: [2, 3, 5], continueProbabilities: [0.5, 0.8] });
    expect(d.checkpointsSeconds).toEqual([2, 5, 10]);
    expect(d.endProbabilities.map((p) => Math.round(p * 1e12) / 1e12)).toEqual([0.5, 0.1, 0.4]);
    expect(d.successProbability).toBeCloseTo(0.4, 12);
    expect([0, 1, 2].map((m) => successRank(d, m))).toEqual([
      expect.closeTo(13.75, 12),
      expect.closeTo(8.75, 12),
      expect.closeTo(5, 12),
    ]);
    expect([0, 1, 2].map((m) => expectedRemainingSeconds(d, m))).toEqual([
      expect.closeTo(5.5, 12),
      expect.closeTo(7, 12),
      expect.closeTo(5, 12),
    ]);
  });

  it('a bare success probability and size rank as size / p', () => {
    const d = toDistribution({ kind: 'success', successProbability: 0.5, expectedSizeSeconds: 30 });
    expect(successRank(d)).toBe(60);
  });

  it('rejects specs that name the wrong field', () => {
    const r = successSpecSchema.safeParse({
      kind: 'stages',
      stageSeconds: [1, 2],
      continueProbabilities: [],
    });
    expect(r.success).toBe(false);
    expect(JSON.stringify(r.error?.issues)).toContain('continueProbabilities');
  });

  it('property: success-rank re-ranks monotonically (never worse after surviving a checkpoint)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.double({ min: 0.01, max: 100, noNaN: true }), { minLength: 1, maxLength: 6 }),
        fc.array(fc.double({ min: 0.01, max: 1, noNaN: true }), { minLength: 5, maxLength: 5 }),
        (stages, cont) => {
          const d = toDistribution({
            kind: 'stages',
            stageSeconds: stages,
            continueProbabilities: cont.slice(0, stages.length - 1),
          });
          for (let m = 0; m + 1 < stages.length; m++)
            expect(successRank(d, m + 1)).toBeLessThanOrEqual(successRank(d, m) * (1 + 1e-9));
          // Scaling every size scales the rank (RANK is scale-invariant as an order).
          const scaled = toDistribution({
            kind: 'stages',
            stageSeconds: stages.map((s) => s * 3),
            continueProbabilities: cont.slice(0, stages.length - 1),
          });
          expect(Math.abs(successRank(scaled) / (3 * successRank(d)) - 1)).toBeLessThan(1e-9);
        },
      ),
    );
  });
});

const q = (
  id: string,
  arrivalSeconds: number,
  remainingWorkSeconds: number,
  extra: Partial<OrderableJob> = {},
): OrderableJob => ({
  id,
  arrivalSeconds,
  remainingWorkSeconds,
  ...extra,
});

describe('orderings inside a class', () => {
  it('fifo by arrival, ties by id', () => {
    const jobs = [q('b', 5, 1), q('a', 5, 9), q('c', 1, 50)];
    expect(orderQueue('fifo', jobs, 10).map((j) => j.id)).toEqual(['c', 'a', 'b']);
  });

  it('srpt: shortest remaining first, aged by λ·waited (Murmuration digest §7.3, λ = 1)', () => {
    const jobs = [q('big', 0, 100), q('small', 90, 20)];
    // at t = 90: big key 100 − 90 = 10 < small 20 − 0 → big first
    expect(orderQueue('srpt', jobs, 90).map((j) => j.id)).toEqual(['big', 'small']);
    // without aging the small job would overtake
    expect(orderQueue('srpt', jobs, 90, { srptAgingPerSecond: 0 }).map((j) => j.id)).toEqual([
      'small',
      'big',
    ]);
    // a preempted job ages from when it re-entered the queue
    expect(orderingKey('srpt', q('p', 0, 50, { waitingSinceSeconds: 80 }), 90)).toBe(40);
  });

  it('success-rank uses declared stages, else remaining / default p', () => {
    const risky = q('risky', 0, 10, { success: distribution([1, 10], [0.9, 0.1]) }); // rank 1.9/.1 = 19
    const sure = q('sure', 1, 12); // 12 / .75 = 16
    expect(orderQueue('success-rank', [risky, sure], 5).map((j) => j.id)).toEqual(['sure', 'risky']);
    expect(orderingKey('success-rank', { ...risky, stagesDone: 1 }, 5)).toBeCloseTo(9, 9); // survived the risky stage: .1·9/.1
  });

  it('success-rank counts every task of a job that declares a model, as it does for one that does not', () => {
    // 16 tasks of 1 h stages passing at .9 hold 16 times the room of one: behind a one-task 2-hour job (2/.75 h).
    const wide = q('wide', 0, 16 * 3600, {
      success: distribution([3600, 3600], [0.9, 0.9]),
      taskCount: 16,
    });
    const single = q('single', 1, 7200);
    expect(orderingKey('success-rank', wide, 5)).toBeCloseTo(
      16 * orderingKey('success-rank', { ...wide, taskCount: 1 }, 5),
      6,
    );
    expect(orderQueue('success-rank', [wide, single], 5).map((j) => j.id)).toEqual(['single', 'wide']);
  });

  it('property: srpt aging bounds waiting — a job that waited ≥ remaining/λ is never overtaken by a newcomer', () => {
    fc.assert(
      fc.property(
        fc.double({ min: 0.001, max: 1e4, noNaN: true }),
        fc.double({ min: 0.1, max: 5, noNaN: true }),
        fc.double({ min: 0.01, max: 2, noNaN: true }), // strictly past the bound: floating-point ties at it are noise
        fc.array(fc.double({ min: 0, max: 1e5, noNaN: true }), { minLength: 1, maxLength: 8 }),
        (remaining, lambda, extraFactor, newcomers) => {
          const waited = (remaining / lambda) * (1 + extraFactor);
          const now = 1e6;
          const old = q('old', now - waited, remaining);
          const fresh = newcomers.map((w, i) => q(`n${i}`, now, w));
          const order = orderQueue('srpt', [...fresh, old], now, { srptAgingPerSecond: lambda });
          expect(order[0]?.id).toBe('old');
        },
      ),
    );
  });
});
