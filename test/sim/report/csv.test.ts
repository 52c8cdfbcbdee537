import { describe, expect, it } from 'vitest';
import { runsCsv } from '../../../src/sim/report/csv.js';
import { withNormalizedCosts } from '../../../src/sim/report/normalize.js';
import { fakeRun, twoRuns } from './run-fixtures.js';

const HEADER =
  'scheduler,jobs,totalCost,normalizedCost,meanJctHours,medianJctHours,p95JctHours,peakCostPerHour,' +
  'migrationsPerJob,instancesLaunched,fullReconfigFraction,wallSeconds';

describe('runs.csv', () => {
  it('has the summary fields as header and one row per scheduler, in run order', () => {
    const results = withNormalizedCosts(twoRuns());
    const lines = runsCsv(results).trimEnd().split('\n');
    expect(lines[0]).toBe(HEADER);
    expect(lines).toHaveLength(3);
    expect(lines[1]).toBe('no-packing,2,9,1,2.5,2.5,2.95,3,0,2,0,0.25');
    expect(lines[2]?.split(',')).toEqual([
      'eva',
      '3',
      '6',
      String(6 / 9),
      '2.5',
      '2.5',
      '2.95',
      '2',
      '0',
      '1',
      '0',
      '0.25',
    ]);
  });

  it('leaves normalizedCost empty when it is null and quotes names with commas or quotes', () => {
    const csv = runsCsv([fakeRun('odd,"name"', 1, 1, 1, [1])]);
    const row = csv.split('\n')[1] ?? '';
    expect(row.startsWith('"odd,""name""",1,1,,')).toBe(true);
  });

  it('ends with the value of time in a sweep, as report.json does, and leaves it empty for runs without one', () => {
    const at = (name: string, valueOfTimePerJobHour?: number | 'auto') => {
      const run = fakeRun(name, 1, 1, 1, [1]);
      return { ...run, summary: { ...run.summary, valueOfTimePerJobHour } };
    };
    const lines = runsCsv([at('eva@vot=2', 2), at('eva@vot=auto', 'auto'), at('no-packing')])
      .trimEnd()
      .split('\n');
    expect(lines[0]).toBe(`${HEADER},valueOfTimePerJobHour`);
    expect(lines.slice(1).map((l) => l.split(',').at(-1))).toEqual(['2', 'auto', '']);
    // Without a value of time anywhere, no such column.
    expect(runsCsv(twoRuns()).split('\n')[0]).toBe(HEADER);
  });
});
