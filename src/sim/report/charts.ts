import type { RunResult } from '../../world/run-result.js';
import type { ReportBounds } from './json.js';
import { allocationChart } from './allocation-chart.js';
import { costBreakdownChart } from './cost-breakdown-chart.js';
import type { ReportChart } from './chart-kit.js';
import { jctChart } from './jct-chart.js';
import { costChart, instancesChart, migrationsChart } from './over-time-charts.js';
import { appPerformanceChart } from './app-performance-chart.js';
import { frontierChart } from './frontier-chart.js';

/**
 * The report's charts (cumulative cost, where the money went, running instances, resource allocation, JCT distribution, cost against mean JCT,
 * migrations, and
 * with latency-sensitive jobs their application performance); each scheduler has the same colour in all of them,
 * and in every report.
 */
export function reportCharts(
  results: readonly RunResult[],
  bounds?: ReportBounds,
  options: { readonly capped?: boolean } = {},
): ReportChart[] {
  const performance = appPerformanceChart(results);
  const breakdown = costBreakdownChart(results);
  return [
    costChart(results, bounds, options.capped ?? false),
    ...(breakdown === undefined ? [] : [breakdown]),
    instancesChart(results),
    allocationChart(results),
    jctChart(results),
    frontierChart(results),
    migrationsChart(results),
    ...(performance === undefined ? [] : [performance]),
  ];
}
