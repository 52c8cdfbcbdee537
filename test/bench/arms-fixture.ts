import type { ArmsReport } from '../../src/bench/arms-report.js';
import { pairedDifferences, type ArmFigures } from '../../src/bench/paired-arms.js';

/**
 * A `bench arms` report by hand: four seeds under caps, a baseline `a` and two arms. `b` costs −1%, +2%, 0% and −2%
 * (mean −0.25%) and halves the mean JCT; `c` measures no barrier-idle cost.
 */
export function armsFixture(): ArmsReport {
  const seeds = [4, 5, 6, 7];
  const caps = [100, 120, 90, 110];
  const a: ArmFigures[] = [1000, 2000, 1500, 1000].map((cost, i) => ({
    totalCost: cost,
    meanJctHours: 10 + i,
    barrierIdleCost: 50,
    peakCostPerHour: 0.6 * (caps[i] as number),
  }));
  const b: ArmFigures[] = [990, 2040, 1500, 980].map((cost, i) => ({
    totalCost: cost,
    meanJctHours: (10 + i) / 2,
    barrierIdleCost: 2,
    peakCostPerHour: 0.999 * (caps[i] as number),
  }));
  const c: ArmFigures[] = [1010, 2000, 1490, 1005].map((cost, i) => ({
    totalCost: cost,
    meanJctHours: 10 + i + 1,
    peakCostPerHour: 0.95 * (caps[i] as number),
  }));
  return {
    seeds,
    common: ['--format', 'alibaba', '--jobs', '1500', '--scheduler', 'eva'],
    arms: [
      { name: 'a', args: ['--queue', 'fifo'] },
      { name: 'b', args: ['--queue', 'srpt', '--co-start', 'on'] },
      { name: 'c', args: ['--queue', 'srpt'] },
    ],
    builds: {},
    baseline: 'a',
    capShare: 0.6,
    peaksFrom: null,
    uncappedPeakBySeed: caps.map((cap) => cap / 0.6),
    capBySeed: caps,
    runs: { a, b, c },
    comparisons: { b: pairedDifferences(a, b), c: pairedDifferences(a, c) },
  };
}
