import { describe, expect, it } from 'vitest';
import { summaryTextTable } from '../../../src/sim/report/format.js';
import { withNormalizedCosts } from '../../../src/sim/report/normalize.js';
import {
  jctCdf,
  timeWeightedUtilization,
  utilizationPercent,
} from '../../../src/sim/report/series-metrics.js';
import { fakeRun, twoRuns } from './run-fixtures.js';

describe('series metrics', () => {
  it('weights utilization by how long each sample holds', () => {
    // (1·1 s + 2·2 s) / (2·1 s + 4·2 s) = 5 / 10; the last sample has no duration.
    expect(timeWeightedUtilization([0, 1, 3], [1, 2, 9], [2, 4, 9])).toBe(0.5);
    expect(timeWeightedUtilization([0, 5], [0, 0], [0, 0])).toBeNull();
  });

  it('marks samples with nothing provisioned as gaps', () => {
    expect(utilizationPercent([1, 0], [4, 0])).toEqual([25, Number.NaN]);
  });

  it('builds the JCT CDF from finished jobs only', () => {
    const cdf = jctCdf(fakeRun('eva', 1, 1, 1, [3, null, 1, 2]).jobs);
    expect(cdf.hours).toEqual([1, 2, 3]);
    expect(cdf.percent).toEqual([100 / 3, 200 / 3, 100]);
  });
});

describe('terminal summary table', () => {
  it('adds the queue metrics as columns when a run had a queue; – where a metric does not apply', () => {
    const [a, b] = withNormalizedCosts(twoRuns());
    const queued = {
      ...(b as NonNullable<typeof b>),
      queue: {
        p99JctHours: 4.25,
        unfairness: 12.5,
        predErrAvg: 7.25,
        predErrP99: 80,
        successfulSojournMeanHours: null,
        preemptions: 3,
      },
    };
    const lines = summaryTextTable([a as NonNullable<typeof a>, queued])
      .trimEnd()
      .split('\n');
    expect(lines[0]).toMatch(
      /p99 JCT h\s+unfair\. %\s+pred\. err %\s+p99 pred\. err %\s+succ\. sojourn h\s+preempt\.$/,
    );
    expect(lines[3]).toMatch(/4\.250\s+12\.5\s+7\.3\s+80\.0\s+–\s+3$/);
    expect(lines[2]).toMatch(/–\s+–\s+–\s+–\s+–\s+–$/); // the run without a queue
    expect(summaryTextTable(withNormalizedCosts(twoRuns()))).not.toContain('pred. err');
  });

  it('prints a header, a rule and one aligned row per scheduler', () => {
    const lines = summaryTextTable(withNormalizedCosts(twoRuns())).trimEnd().split('\n');
    expect(lines).toHaveLength(4);
    expect(lines[0]).toMatch(/^scheduler\s+jobs\s+total cost \$\s+norm\. cost/);
    expect(lines[1]).toMatch(/^-+ +-+/);
    expect(lines[2]).toMatch(/^no-packing\s+2\s+9\.00\s+100\.0%\s+2\.500/);
    expect(lines[3]).toMatch(/^eva\s+3\s+6\.00\s+66\.7%/);
    // Numeric columns are right-aligned: each row's "norm. cost" cell ends where the header does.
    const end = (lines[0] ?? '').indexOf('norm. cost') + 'norm. cost'.length;
    expect(lines[2]?.slice(end - 6, end)).toBe('100.0%');
    expect(lines[3]?.slice(end - 5, end)).toBe('66.7%');
  });
});
