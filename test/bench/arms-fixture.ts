import type { ArmsReport } from '../../src/bench/arms-report.js';
import { pairedDifferences, type ArmFigures } from '../../src/bench/paired-arms.js';

/** The catalog every arm of the fixture runs. */
export const FIXTURE_CATALOG = '/catalogs/us-east-1.json';

/**
 * A `bench arms` report by hand: four seeds under caps, a baseline `a` and two arms, all on one catalog. `b` costs −1%, +2%, 0% and −2%
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
    catalogs: { a: FIXTURE_CATALOG, b: FIXTURE_CATALOG, c: FIXTURE_CATALOG },
    capShare: 0.6,
    peaksFrom: null,
    referenceCatalog: FIXTURE_CATALOG,
    uncappedPeakBySeed: caps.map((cap) => cap / 0.6),
    capBySeed: caps,
    uncappedPeakByCatalog: { [FIXTURE_CATALOG]: caps.map((cap) => cap / 0.6) },
    capBySeedByArm: { a: caps, b: caps, c: caps },
    runs: { a, b, c },
    comparisons: { b: pairedDifferences(a, b), c: pairedDifferences(a, c) },
  };
}

/** Another catalog, at twice the fixture's prices. */
export const DEARER_CATALOG = '/catalogs/dearer.json';

/**
 * The fixture with arm `c` on `DEARER_CATALOG`: its uncapped peaks twice the others', and so its caps; its peak 95% of
 * its own cap (47.5% of the baseline's).
 */
export function armsFixtureOnTwoCatalogs(): ArmsReport {
  const fixture = armsFixture();
  const caps = fixture.capBySeed.map((cap) => 2 * (cap as number));
  const a = fixture.runs['a'] ?? [];
  const c = (fixture.runs['c'] ?? []).map((r, i) => ({ ...r, peakCostPerHour: 0.95 * (caps[i] as number) }));
  return {
    ...fixture,
    catalogs: { ...fixture.catalogs, c: DEARER_CATALOG },
    uncappedPeakByCatalog: {
      ...fixture.uncappedPeakByCatalog,
      [DEARER_CATALOG]: caps.map((cap) => cap / 0.6),
    },
    capBySeedByArm: { ...fixture.capBySeedByArm, c: caps },
    runs: { ...fixture.runs, c },
    comparisons: { ...fixture.comparisons, c: pairedDifferences(a, c) },
  };
}
