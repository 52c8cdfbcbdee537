import { describe, expect, it } from 'vitest';
import { costBreakdownChart } from '../../../src/sim/report/cost-breakdown-chart.js';
import { reportHtml } from '../../../src/sim/report/html.js';
import { COST_PARTS, type CostBreakdown } from '../../../src/world/cost-ledger.js';
import type { RunResult } from '../../../src/world/run-result.js';
import { fakeRun } from './run-fixtures.js';

const EVA: CostBreakdown = {
  working: 5.004,
  slowdown: 0.5,
  starting: 0.1,
  preparing: 0.2,
  checkpointing: 0.05,
  bootAndShutdown: 0.146,
  idle: 0,
};
const NO_PACKING: CostBreakdown = { ...EVA, slowdown: 0, idle: 3.5 };

function runs(): RunResult[] {
  return [
    { ...fakeRun('no-packing', 3, 3, 2, [1, 2]), costBreakdown: NO_PACKING },
    { ...fakeRun('eva', 2, 3, 1, [1, 3]), costBreakdown: EVA },
  ];
}

describe('where the money went', () => {
  it('stacks one bar per run, a series per part in dollars to the cent', () => {
    const chart = costBreakdownChart(runs())?.chart;
    expect(chart?.id).toBe('chart-cost-breakdown');
    const option = chart?.option as {
      yAxis: { data: string[] };
      series: { name: string; stack: string; data: number[] }[];
    };
    expect(option.yAxis.data).toEqual(['no-packing', 'eva']);
    expect(option.series.map((s) => s.stack)).toEqual(COST_PARTS.map(() => 'cost'));
    expect(option.series[0]).toMatchObject({ name: 'working', data: [5, 5] });
    expect(option.series[1]).toMatchObject({ name: 'co-location slowdown', data: [0, 0.5] });
    expect(option.series.at(-1)).toMatchObject({ name: 'idle room', data: [3.5, 0] });
  });

  it('is left out when no run has the ledger, and is in the report when one has', () => {
    const bare = runs().map(({ costBreakdown: _, ...r }) => r);
    expect(costBreakdownChart(bare)).toBeUndefined();
    expect(reportHtml(bare, {})).not.toContain('id="chart-cost-breakdown"');
    expect(reportHtml(runs(), {})).toContain('<div class="chart" id="chart-cost-breakdown"');
  });
});
