import type { LineSeriesOption } from 'echarts';
import type { RunResult } from '../../world/run-result.js';
import { seriesStyle } from '../../report/palette.js';
import { AXIS_NAME, BASELINE, round, WIDTH, type ReportChart } from './chart-kit.js';

/** The policy a run belongs to: a value-of-time sweep names its runs `eva@vot=2`, the policy is `eva`. */
export function policyOf(runName: string): string {
  const at = runName.indexOf('@');
  return at < 0 ? runName : runName.slice(0, at);
}

/** A run's point on the cost–time plane. */
interface FrontierPoint {
  readonly meanJctHours: number;
  readonly cost: number;
  readonly valueOfTime: number | undefined;
  readonly run: string;
}

/**
 * Cost against mean job completion time, one point per run: where each policy sits in the trade-off a user makes
 * between dollars and waiting. A policy swept over values of time (`simulate --value-of-time a,b,c`) is a line
 * through its runs in the order of the value, each point labelled with it; a baseline is one point. Costs are
 * relative to No-Packing's when it ran (as the summary table), else in dollars. Lower and further left is better: a
 * point below and left of another dominates it.
 */
export function frontierChart(results: readonly RunResult[]): ReportChart {
  const baseline = results.find((r) => r.summary.scheduler === BASELINE)?.summary.totalCost;
  const relative = baseline !== undefined && baseline > 0;
  const byPolicy = new Map<string, FrontierPoint[]>();
  for (const r of results) {
    const policy = policyOf(r.summary.scheduler);
    const list = byPolicy.get(policy) ?? [];
    list.push({
      meanJctHours: r.summary.meanJctHours,
      cost: relative ? r.summary.totalCost / (baseline as number) : r.summary.totalCost,
      valueOfTime: r.summary.valueOfTimePerJobHour,
      run: r.summary.scheduler,
    });
    byPolicy.set(policy, list);
  }
  const series: LineSeriesOption[] = [...byPolicy.entries()].map(([policy, list]) => {
    const style = seriesStyle(policy);
    const sorted = [...list].sort((a, b) => (a.valueOfTime ?? 0) - (b.valueOfTime ?? 0));
    const swept = sorted.some((p) => p.valueOfTime !== undefined) && sorted.length > 1;
    return {
      type: 'line',
      name: policy,
      color: style.color,
      symbol: style.symbol,
      symbolSize: 11,
      showSymbol: true,
      lineStyle: { width: 2, type: style.dash, opacity: swept ? 1 : 0 },
      emphasis: { focus: 'series' },
      label: {
        show: true,
        position: 'top',
        fontSize: 11,
        color: '#333',
        formatter: swept ? '{@[2]}' : policy,
      },
      data: sorted.map((p) => [
        round(p.meanJctHours, 4),
        round(p.cost, relative ? 4 : 2),
        swept ? `$${p.valueOfTime ?? 0}/h` : p.run,
      ]),
    };
  });
  return {
    chart: {
      id: 'chart-frontier',
      title: 'Cost against mean job completion time',
      width: WIDTH,
      height: 460,
      option: {
        legend: { top: 0, type: 'scroll' },
        tooltip: { trigger: 'item', confine: true },
        grid: { left: 90, right: 40, top: 50, bottom: 60 },
        xAxis: { type: 'value', scale: true, name: 'mean job completion time (h)', ...AXIS_NAME },
        yAxis: {
          type: 'value',
          scale: true,
          name: relative ? 'cost (No-Packing = 1)' : 'cost ($)',
          ...AXIS_NAME,
          nameGap: 56,
        },
        series,
      },
    },
    caption:
      'Each run at its mean job completion time and cost; lower left is better, and a point below and left of ' +
      "another dominates it. A value-of-time sweep (--value-of-time a,b,c) draws a policy's runs as a line, each " +
      'point labelled with what an hour of a job’s completion time was worth to it.',
  };
}
