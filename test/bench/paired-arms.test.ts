import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  meanAndStandardError,
  oneSidedMetrics,
  pairedDifferences,
  type ArmFigures,
} from '../../src/bench/paired-arms.js';

describe('paired differences of simulation arms over seeds', () => {
  it('hand-checked: three seeds, cost −1%, +2% and 0%', () => {
    const baseline: ArmFigures[] = [
      { totalCost: 100, meanJctHours: 10 },
      { totalCost: 200, meanJctHours: 20 },
      { totalCost: 400, meanJctHours: 40 },
    ];
    const arm: ArmFigures[] = [
      { totalCost: 99, meanJctHours: 5 },
      { totalCost: 204, meanJctHours: 10 },
      { totalCost: 400, meanJctHours: 30 },
    ];
    const [cost, jct, ...rest] = pairedDifferences(baseline, arm);
    expect(rest).toEqual([]);
    expect(cost?.metric).toBe('totalCost');
    expect(cost?.percentBySeed).toEqual([-1, 2, 0]);
    // Mean 1/3; sample variance ((−4/3)² + (5/3)² + (−1/3)²) / 2 = 7/3; SE √(7/3 / 3) = 0.8819.
    expect(cost?.meanPercent).toBeCloseTo(1 / 3, 12);
    expect(cost?.standardError).toBeCloseTo(0.881917, 6);
    expect([cost?.minPercent, cost?.maxPercent, cost?.lowerOn, cost?.higherOn, cost?.seeds]).toEqual([
      -1, 2, 1, 1, 3,
    ]);
    expect(jct?.percentBySeed).toEqual([-50, -50, -25]);
    expect(jct?.lowerOn).toBe(3);
  });

  it('leaves out a seed where either run did not measure the metric, or both were 0', () => {
    const [barrier, ...rest] = pairedDifferences(
      [{ barrierIdleCost: 0 }, { barrierIdleCost: 10 }, { barrierIdleCost: 8, p99JctHours: null }],
      [{ barrierIdleCost: 0 }, { barrierIdleCost: 1 }, {}],
    );
    expect(rest).toEqual([]);
    expect(barrier?.basis).toBe('percent');
    expect(barrier?.percentBySeed).toEqual([null, -90, null]);
    expect(barrier?.seeds).toBe(1);
    expect(barrier?.meanPercent).toBe(-90);
    // One seed gives no standard error.
    expect(barrier?.standardError).toBeNull();
  });

  it("takes every seed in the metric's units when on one the baseline was 0 and the arm was not", () => {
    // A percent would drop seed 1, where the arm differs most.
    const [barrier, ...rest] = pairedDifferences(
      [{ barrierIdleCost: 0 }, { barrierIdleCost: 10 }, { barrierIdleCost: 8 }],
      [{ barrierIdleCost: 30 }, { barrierIdleCost: 1 }, {}],
    );
    expect(rest).toEqual([]);
    expect(barrier?.basis).toBe('absolute');
    expect(barrier?.percentBySeed).toEqual([null, -90, null]);
    expect(barrier?.differenceBySeed).toEqual([30, -9, null]);
    expect([barrier?.seeds, barrier?.meanPercent, barrier?.lowerOn, barrier?.higherOn]).toEqual([
      2, 10.5, 1, 1,
    ]);
  });

  it('names the metrics only one side measured, which are not compared', () => {
    expect(
      oneSidedMetrics(
        [{ totalCost: 1, lostWorkHours: 2 }, { totalCost: 1 }],
        [
          { totalCost: 1, barrierIdleCost: null },
          { totalCost: 2, barrierIdleCost: 4 },
        ],
      ),
    ).toEqual([
      { metric: 'barrierIdleCost', measuredBy: 'arm' },
      { metric: 'lostWorkHours', measuredBy: 'baseline' },
    ]);
  });

  it('keeps a metric whose baseline is 0 on every seed, as absolute differences', () => {
    // No-Packing moves no job and loses nothing to slowdown: the arm's moves and slowdown $ still count.
    const differences = pairedDifferences(
      [
        { totalCost: 100, migrationsPerJob: 0, costSlowdown: 0, barrierIdleCost: 0 },
        { totalCost: 200, migrationsPerJob: 0, costSlowdown: 0, barrierIdleCost: 0 },
      ],
      [
        { totalCost: 90, migrationsPerJob: 2.5, costSlowdown: 900, barrierIdleCost: 0 },
        { totalCost: 180, migrationsPerJob: 2.7, costSlowdown: 1100, barrierIdleCost: 0 },
      ],
    );
    // Barrier-idle $ 0 against 0 on every seed says nothing and stays out.
    expect(differences.map((d) => [d.metric, d.basis])).toEqual([
      ['totalCost', 'percent'],
      ['migrationsPerJob', 'absolute'],
      ['costSlowdown', 'absolute'],
    ]);
    const moves = differences[1];
    expect(moves?.percentBySeed).toEqual([null, null]);
    expect(moves?.differenceBySeed).toEqual([2.5, 2.7]);
    expect(moves?.meanPercent).toBeCloseTo(2.6, 12);
    expect([moves?.minPercent, moves?.maxPercent, moves?.higherOn, moves?.seeds]).toEqual([2.5, 2.7, 2, 2]);
    expect(differences[2]?.meanPercent).toBe(1000);
  });

  it('compares spot runs on lost work and spot share, leaving out a seed whose baseline lost nothing', () => {
    const differences = pairedDifferences(
      [
        { lostWorkHours: 0, spotShare: 1 },
        { lostWorkHours: 4, spotShare: 0.5 },
      ],
      [
        { lostWorkHours: 2, spotShare: 0.9 },
        { lostWorkHours: 1, spotShare: 0.6 },
      ],
    );
    expect(differences.map((d) => d.metric)).toEqual(['lostWorkHours', 'spotShare']);
    expect(differences[0]?.percentBySeed).toEqual([null, -75]);
    const [fewer, more] = differences[1]?.percentBySeed ?? [];
    expect(fewer).toBeCloseTo(-10, 12);
    expect(more).toBeCloseTo(20, 12);
  });

  it('refuses runs that are not paired', () => {
    expect(() => pairedDifferences([{ totalCost: 1 }], [])).toThrow(/differ in number/);
  });

  it('property: the mean lies between the extremes, and the signs count the seeds that moved', () => {
    const cost = fc.double({ min: 1, max: 1e6, noNaN: true });
    fc.assert(
      fc.property(fc.array(fc.tuple(cost, cost), { minLength: 1, maxLength: 20 }), (pairs) => {
        const [d] = pairedDifferences(
          pairs.map(([b]) => ({ totalCost: b })),
          pairs.map(([, a]) => ({ totalCost: a })),
        );
        if (d === undefined) return false;
        const mean = d.meanPercent as number;
        expect(mean).toBeGreaterThanOrEqual((d.minPercent as number) - 1e-9);
        expect(mean).toBeLessThanOrEqual((d.maxPercent as number) + 1e-9);
        expect(d.lowerOn).toBe(pairs.filter(([b, a]) => a < b).length);
        expect(d.higherOn).toBe(pairs.filter(([b, a]) => a > b).length);
        return true;
      }),
      { seed: 11 },
    );
  });

  it('standard error of the mean: sample deviation over √n', () => {
    expect(meanAndStandardError([])).toEqual({ mean: null, standardError: null });
    expect(meanAndStandardError([4])).toEqual({ mean: 4, standardError: null });
    // [2, 4, 4, 4, 5, 5, 7, 9]: mean 5, sample variance 32/7.
    const { mean, standardError } = meanAndStandardError([2, 4, 4, 4, 5, 5, 7, 9]);
    expect(mean).toBe(5);
    expect(standardError).toBeCloseTo(Math.sqrt(32 / 7 / 8), 12);
  });
});
