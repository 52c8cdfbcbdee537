import { describe, expect, it } from 'vitest';
import { costBreakdownChart } from '../../../src/sim/report/cost-breakdown-chart.js';
import { runsCsv } from '../../../src/sim/report/csv.js';
import { summaryGroups, summaryTextTable } from '../../../src/sim/report/format.js';
import { reportHtml } from '../../../src/sim/report/html.js';
import { COST_FIELDS, CROSS_ZONE_COST_FIELD, runRecord } from '../../../src/sim/report/normalize.js';
import type { CostBreakdown } from '../../../src/world/cost-ledger.js';
import type { NetworkRunMetrics, RunResult } from '../../../src/world/run-result.js';
import { fakeRun } from './run-fixtures.js';

/** $6 of instances (eva: $2/h for 3 h). */
const EVA_LEDGER: CostBreakdown = {
  working: 4,
  slowdown: 1,
  starting: 0,
  preparing: 0,
  checkpointing: 0,
  bootAndShutdown: 0.5,
  idle: 0.5,
};
/** $9 of instances (no-packing: $3/h for 3 h). */
const NO_PACKING_LEDGER: CostBreakdown = { ...EVA_LEDGER, slowdown: 0, idle: 4.5 };

function network(crossZoneCost: number): NetworkRunMetrics {
  return {
    appPerformanceMean: 0.875,
    crossZoneCost,
    latencySensitiveJobs: 2,
    latencySensitiveMeanJctHours: 2.5,
    latencySensitiveMigrationsPerJob: 0.5,
    latencyMovesPerJob: 0.25,
  };
}

/** A run whose jobs sent `traffic` dollars across zones: the total cost is the instances' bill plus it. */
function withTraffic(r: RunResult, ledger: CostBreakdown, traffic: number): RunResult {
  return {
    ...r,
    summary: { ...r.summary, totalCost: r.summary.totalCost + traffic },
    costBreakdown: ledger,
    network: network(traffic),
  };
}

function networkRuns(): RunResult[] {
  return [
    withTraffic(fakeRun('no-packing', 3, 3, 2, [2, 3]), NO_PACKING_LEDGER, 1),
    withTraffic(fakeRun('eva', 2, 3, 1, [2.5, 3]), EVA_LEDGER, 2),
  ];
}

describe('traffic across zones as a part of the cost', () => {
  it('is a cost field of runs that report the network, so the cost parts add up to the total cost', () => {
    for (const r of networkRuns()) {
      const record = runRecord(r) as unknown as Record<string, number>;
      expect(Object.keys(record).slice(-COST_FIELDS.length - 1)).toEqual([
        ...COST_FIELDS,
        CROSS_ZONE_COST_FIELD,
      ]);
      const parts = [...COST_FIELDS, CROSS_ZONE_COST_FIELD].reduce((a, f) => a + (record[f] as number), 0);
      expect(parts).toBeCloseTo(r.summary.totalCost, 12);
    }
    const csv = runsCsv(networkRuns()).split('\n');
    const header = (csv[0] ?? '').split(',');
    expect(header.at(-1)).toBe(CROSS_ZONE_COST_FIELD);
    expect((csv[2] ?? '').split(',').at(-1)).toBe('2');
  });

  it('leaves the fields of runs without a network as they were', () => {
    const plain = { ...fakeRun('eva', 2, 3, 1, [2.5, 3]), costBreakdown: EVA_LEDGER };
    expect(Object.keys(runRecord(plain))).not.toContain(CROSS_ZONE_COST_FIELD);
    expect(runsCsv([plain]).split('\n')[0]).not.toContain(CROSS_ZONE_COST_FIELD);
    expect(costBreakdownChart([plain])?.chart.option).not.toMatchObject({
      series: expect.arrayContaining([expect.objectContaining({ name: 'traffic across zones' })]) as unknown,
    });
    expect(summaryGroups([plain]).map((g) => g.id)).not.toContain('network');
  });

  it('stacks on the cost breakdown bars, so each ends at the total cost', () => {
    const option = costBreakdownChart(networkRuns())?.chart.option as {
      series: { name: string; data: { value: number; tip: string }[] }[];
    };
    const traffic = option.series.at(-1);
    expect(traffic?.name).toBe('traffic across zones');
    expect(traffic?.data.map((d) => d.value)).toEqual([1, 2]);
    expect(traffic?.data[1]?.tip).toBe('eva: traffic across zones\n$2.00 of $8.00 (25.0%)');
    const bars = [0, 1].map((i) => option.series.reduce((a, s) => a + (s.data[i]?.value ?? 0), 0));
    expect(bars).toEqual(networkRuns().map((r) => r.summary.totalCost));
  });

  it('takes its share of the bill in the lead, of the total cost', () => {
    // eva: $6 of instances + $2 of traffic = $8.
    expect(reportHtml(networkRuns(), {})).toContain(
      'Of its bill, eva spent 50.0% on work, 12.5% on co-location slowdown, 6.3% on idle room and 25.0% on ' +
        'traffic across zones (no-packing: 40.0% on work, 0.0% on co-location slowdown, 45.0% on idle room and ' +
        '10.0% on traffic across zones).',
    );
  });

  it('shows the network metrics in a table of their own', () => {
    const groups = summaryGroups(networkRuns());
    expect(groups.map((g) => g.id)).toEqual(['cost-and-time', 'network', 'fleet']);
    const text = summaryTextTable(networkRuns());
    expect(text).toMatch(/\nNetwork\nscheduler\s+cross-zone \$\s+app perf\./);
    expect(text).toMatch(/\neva\s+2\.00\s+0\.875\s+2\s+2\.500\s+0\.500\s+0\.250\n/);
    expect(reportHtml(networkRuns(), {})).toContain('<table id="summary-network">');
  });
});
