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

  it('counts a difference of rounding alone as none: not lower, not higher, no spread, no test', () => {
    // The same work summed in another order: the runs differ in their last digits only.
    const baseline: ArmFigures[] = [
      { totalCost: 0.1 + 0.2, meanJctHours: 10 },
      { totalCost: 1234.5678, meanJctHours: 20 },
      { totalCost: 2000, meanJctHours: 30 },
    ];
    const arm: ArmFigures[] = [
      { totalCost: 0.3, meanJctHours: 10 * (1 + 3e-15) },
      { totalCost: 1234.5678 * (1 - 4e-15), meanJctHours: 20 * (1 + 5e-16) },
      { totalCost: 2000 * (1 + 2e-14), meanJctHours: 15 },
    ];
    const [cost, jct, ...rest] = pairedDifferences(baseline, arm);
    expect(rest).toEqual([]);
    expect(cost?.percentBySeed).toEqual([0, 0, 0]);
    expect(cost?.differenceBySeed).toEqual([0, 0, 0]);
    expect([cost?.meanPercent, cost?.standardError, cost?.lowerOn, cost?.higherOn]).toEqual([0, 0, 0, 0]);
    expect([cost?.confidence95, cost?.tTestP, cost?.signTestP]).toEqual([null, null, null]);
    // A real difference on one seed is the only one counted.
    expect(jct?.percentBySeed).toEqual([0, 0, -50]);
    expect([jct?.lowerOn, jct?.higherOn]).toEqual([1, 0]);
    expect(jct?.signTestP).toBe(1);
    // A baseline of 0 against an arm within rounding of it is not one a percent cannot be taken of: 0 and 0 say nothing.
    expect(
      pairedDifferences([{ costIdle: 0 }, { costIdle: 5 }], [{ costIdle: 0 }, { costIdle: 5 + 1e-14 }]),
    ).toEqual([
      expect.objectContaining({
        metric: 'costIdle',
        basis: 'percent',
        percentBySeed: [null, 0],
        lowerOn: 0,
        higherOn: 0,
      }),
    ]);
  });

  it('compares the p95 JCT every run reports, and p99 where both ran the queue layer', () => {
    const differences = pairedDifferences(
      [
        { p95JctHours: 10, p99JctHours: 20 },
        { p95JctHours: 12, p99JctHours: 30 },
      ],
      [
        { p95JctHours: 9, p99JctHours: 22 },
        { p95JctHours: 15, p99JctHours: 27 },
      ],
    );
    expect(differences.map((d) => [d.metric, d.percentBySeed])).toEqual([
      ['p95JctHours', [-10, 25]],
      ['p99JctHours', [10, -10]],
    ]);
    expect(oneSidedMetrics([{ p95JctHours: 1, p99JctHours: 2 }], [{ p95JctHours: 1 }])).toEqual([
      { metric: 'p99JctHours', measuredBy: 'baseline' },
    ]);
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
        // Moved: by more than rounding (1e-9 of the larger).
        const moved = pairs.filter(([b, a]) => Math.abs(a - b) > 1e-9 * Math.max(a, b));
        expect(d.lowerOn).toBe(moved.filter(([b, a]) => a < b).length);
        expect(d.higherOn).toBe(moved.filter(([b, a]) => a > b).length);
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
    // The same value but for rounding: no spread.
    expect(meanAndStandardError([-50.00000000000001, -50, -49.99999999999999]).standardError).toBe(0);
    // A spread far below the values but above rounding is one.
    expect(meanAndStandardError([1000, 1000.001]).standardError).toBeCloseTo(0.0005, 9);
  });
});
