import { describe, expect, it } from 'vitest';
import { reportJson, runsJson, thinSeries } from '../../../src/sim/report/json.js';
import { SUMMARY_FIELDS, withNormalizedCosts } from '../../../src/sim/report/normalize.js';
import type { RunSeries } from '../../../src/world/run-result.js';
import { fakeRun, twoRuns } from './run-fixtures.js';

describe('normalized cost', () => {
  it('is totalCost relative to no-packing (no-packing = 1)', () => {
    const [np, eva] = withNormalizedCosts(twoRuns());
    expect(np?.summary.normalizedCost).toBe(1);
    expect(eva?.summary.normalizedCost).toBeCloseTo(6 / 9, 12);
  });

  it('is null without a no-packing run, or when no-packing cost nothing', () => {
    expect(withNormalizedCosts([fakeRun('eva', 2, 3, 1, [1])])[0]?.summary.normalizedCost).toBeNull();
    const free = withNormalizedCosts([fakeRun('no-packing', 0, 3, 1, [1]), fakeRun('eva', 2, 3, 1, [1])]);
    expect(free.map((r) => r.summary.normalizedCost)).toEqual([null, null]);
  });
});

describe('simulate --json object', () => {
  it('is {runs:[…]} with exactly the summary fields, in order', () => {
    const json = runsJson(withNormalizedCosts(twoRuns()));
    expect(Object.keys(json)).toEqual(['runs']);
    expect(json.runs.map((r) => r.scheduler)).toEqual(['no-packing', 'eva']);
    for (const run of json.runs) expect(Object.keys(run)).toEqual([...SUMMARY_FIELDS]);
    const roundTrip = JSON.parse(JSON.stringify(json)) as typeof json;
    expect(roundTrip.runs[1]?.totalCost).toBe(6);
  });

  it('drops fields a simulator might add beyond RunSummary', () => {
    const run = fakeRun('eva', 2, 3, 1, [1]);
    const extended = { ...run, summary: { ...run.summary, debug: 'x' } };
    expect(Object.keys(runsJson([extended]).runs[0] ?? {})).not.toContain('debug');
  });
});

describe('report.json', () => {
  it('holds the runs, the settings and per-scheduler series and job outcomes', () => {
    const report = reportJson(withNormalizedCosts(twoRuns()), { trace: 'tiny', seed: 7 });
    expect(report.settings).toEqual({ trace: 'tiny', seed: 7 });
    expect(Object.keys(report.details)).toEqual(['no-packing', 'eva']);
    expect(report.details.eva?.jobs).toHaveLength(3);
    expect(report.details.eva?.series.cumulativeCost).toEqual([0, 2, 4, 6]);
  });

  it('thins long series but keeps them aligned, the peaks, and exact cumulative values', () => {
    const n = 100_000;
    const timeSeconds = Array.from({ length: n }, (_, i) => i * 10);
    const instances = timeSeconds.map((_, i) => (i === 54_321 ? 99 : i % 7));
    const cumulative = timeSeconds.map((t) => t * 0.001);
    const zeros = timeSeconds.map(() => 0);
    const series: RunSeries = {
      timeSeconds,
      cumulativeCost: cumulative,
      costPerHour: instances.map((k) => k * 0.5),
      runningInstances: instances,
      allocatedGpus: zeros,
      allocatedVcpus: zeros,
      allocatedMemoryGiB: zeros,
      capacityGpus: zeros,
      capacityVcpus: zeros,
      capacityMemoryGiB: zeros,
      migrations: zeros,
    };
    const thin = thinSeries(series, 500);
    expect(thin.timeSeconds.length).toBeLessThan(5000);
    for (const values of Object.values(thin)) expect(values).toHaveLength(thin.timeSeconds.length);
    expect(Math.max(...thin.runningInstances)).toBe(99);
    expect(thin.timeSeconds[0]).toBe(0);
    expect(thin.timeSeconds.at(-1)).toBe(timeSeconds.at(-1));
    thin.timeSeconds.forEach((t, i) => expect(thin.cumulativeCost[i]).toBe(t * 0.001));
  });
});
