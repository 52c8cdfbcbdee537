import type { RunResult } from '../../world/run-result.js';
import type { ReportBounds } from './json.js';
import { allocationChart } from './allocation-chart.js';
import type { ReportChart } from './chart-kit.js';
import { jctChart } from './jct-chart.js';
import { costChart, instancesChart, migrationsChart } from './over-time-charts.js';

/**
 * The report's five charts (cumulative cost, running instances, resource allocation, JCT distribution,
 * migrations); each scheduler has the same colour in all of them, and in every report.
 */
export function reportCharts(results: readonly RunResult[], bounds?: ReportBounds): ReportChart[] {
  return [
    costChart(results, bounds),
    instancesChart(results),
    allocationChart(results),
    jctChart(results),
    migrationsChart(results),
  ];
}
