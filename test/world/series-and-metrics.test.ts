import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { mean, median, percentile, summarize } from '../../src/world/metrics.js';
import { downsampleSeries, emptySeries, SeriesRecorder, type SeriesPoint } from '../../src/world/series.js';

function point(t: number, costPerHour: number, instances: number): SeriesPoint {
  return {
    timeSeconds: t,
    cumulativeCost: t * 0.001,
    costPerHour,
    runningInstances: instances,
    allocatedGpus: 0,
    allocatedVcpus: 0,
    allocatedMemoryGiB: 0,
    capacityGpus: 0,
    capacityVcpus: 0,
    capacityMemoryGiB: 0,
    migrations: 0,
  };
}

describe('SeriesRecorder', () => {
  it('samples only when the state changes, replacing a same-time sample, unless forced', () => {
    const r = new SeriesRecorder();
    r.record(point(0, 0, 0), true);
    r.record(point(10, 0, 0)); // no change
    r.record(point(20, 3, 1));
    r.record(point(20, 6, 2)); // same time: the later state wins
    r.record(point(30, 6, 2), true);
    const s = r.result(2000);
    expect(s.timeSeconds).toEqual([0, 20, 30]);
    expect(s.costPerHour).toEqual([0, 6, 6]);
    expect(s.runningInstances).toEqual([0, 2, 2]);
  });
});

describe('downsampleSeries', () => {
  it('keeps at most maxPoints, the first and last samples and the peaks', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 1000 }), { minLength: 1, maxLength: 5000 }), (costs) => {
        const r = new SeriesRecorder();
        costs.forEach((c, i) => r.record(point(i * 7, c, c % 13), true));
        const s = r.result(200);
        expect(s.timeSeconds.length).toBeLessThanOrEqual(200);
        expect(s.timeSeconds[0]).toBe(0);
        expect(s.timeSeconds.at(-1)).toBe((costs.length - 1) * 7);
        expect(Math.max(...s.costPerHour)).toBe(Math.max(...costs));
        expect(Math.max(...s.runningInstances)).toBe(Math.max(...costs.map((c) => c % 13)));
        for (let i = 1; i < s.timeSeconds.length; i++)
          expect(s.timeSeconds[i] as number).toBeGreaterThan(s.timeSeconds[i - 1] as number);
      }),
      { numRuns: 50 },
    );
  });

  it('returns short series unchanged', () => {
    const s = emptySeries();
    s.timeSeconds.push(1, 2);
    expect(downsampleSeries(s, 10)).toBe(s);
  });
});

describe('metrics', () => {
  it('computes mean, median and nearest-rank percentiles', () => {
    expect(mean([1, 2, 6])).toBe(3);
    expect(median([5, 1, 3])).toBe(3);
    expect(median([4, 1, 3, 2])).toBe(2.5);
    expect(percentile([...Array.from({ length: 20 }, (_, i) => i + 1)], 95)).toBe(19);
    expect(percentile([7], 95)).toBe(7);
    expect([mean([]), median([]), percentile([], 95)]).toEqual([0, 0, 0]);
  });

  it('summarizes JCT in hours, migrations per job and the full-reconfiguration share', () => {
    const s = summarize(
      {
        scheduler: 'x',
        totalCost: 12,
        peakCostPerHour: 3,
        instancesLaunched: 4,
        plannedRounds: 8,
        fullRounds: 2,
        wallSeconds: 0.5,
      },
      [
        {
          id: 'a',
          name: 'a',
          arrivalSeconds: 0,
          startSeconds: 10,
          endSeconds: 3600,
          jctSeconds: 3600,
          migrations: 1,
          successful: true,
          predictedStartSeconds: null,
          predictedEndSeconds: null,
        },
        {
          id: 'b',
          name: 'b',
          arrivalSeconds: 0,
          startSeconds: 10,
          endSeconds: 10800,
          jctSeconds: 10800,
          migrations: 0,
          successful: true,
          predictedStartSeconds: null,
          predictedEndSeconds: null,
        },
      ],
    );
    expect(s).toEqual({
      scheduler: 'x',
      jobs: 2,
      totalCost: 12,
      normalizedCost: null,
      meanJctHours: 2,
      medianJctHours: 2,
      p95JctHours: 3,
      peakCostPerHour: 3,
      migrationsPerJob: 0.5,
      instancesLaunched: 4,
      fullReconfigFraction: 0.25,
      wallSeconds: 0.5,
    });
  });
});
