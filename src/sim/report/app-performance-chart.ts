import type { LineSeriesOption } from 'echarts';
import type { JobOutcome, RunResult } from '../../world/run-result.js';
import { seriesStyle } from '../../report/palette.js';
import { AXIS_NAME, BUCKETS, points, WIDTH, type ReportChart } from './chart-kit.js';

/**
 * Empirical CDF of the latency-sensitive jobs' time-average P_job (NoMora §6.2, Fig. 5): x = performance, y = percent
 * of those jobs at or below it. The area above a curve is the run's appPerformanceMean (digest §6.2).
 */
export function appPerformanceCdf(jobs: readonly JobOutcome[]): { performance: number[]; percent: number[] } {
  const performance = jobs
    .map((j) => j.appPerformance)
    .filter((p): p is number => typeof p === 'number' && Number.isFinite(p))
    .sort((a, b) => a - b);
  return { performance, percent: performance.map((_, i) => (100 * (i + 1)) / performance.length) };
}

/** The chart, or undefined when no run has latency-sensitive jobs. */
export function appPerformanceChart(results: readonly RunResult[]): ReportChart | undefined {
  const runs = results.filter((r) => (r.network?.latencySensitiveJobs ?? 0) > 0);
  if (runs.length === 0) return undefined;
  const series: LineSeriesOption[] = runs.map((r) => {
    const name = r.summary.scheduler;
    const style = seriesStyle(name);
    const cdf = appPerformanceCdf(r.jobs);
    const mean = r.network?.appPerformanceMean;
    return {
      type: 'line',
      name: mean === null || mean === undefined ? name : `${name} (mean ${mean.toFixed(3)})`,
      step: 'end',
      showSymbol: false,
      color: style.color,
      lineStyle: { width: 2, type: style.dash },
      emphasis: { focus: 'series' },
      data: points([0, ...cdf.performance], [0, ...cdf.percent], BUCKETS),
    };
  });
  return {
    chart: {
      id: 'chart-app-performance',
      title: 'Application performance of latency-sensitive jobs (CDF of time-average P_job)',
      width: WIDTH,
      height: 420,
      option: {
        legend: { top: 0, type: 'scroll' },
        tooltip: { trigger: 'axis', confine: true },
        grid: { left: 90, right: 40, top: 44, bottom: 60 },
        xAxis: {
          type: 'value',
          min: 0,
          max: 1,
          name: 'time-average relative performance P_job (1 = as fast as with no network latency)',
          ...AXIS_NAME,
        },
        yAxis: {
          type: 'value',
          min: 0,
          max: 100,
          name: 'jobs at or below (%)',
          ...AXIS_NAME,
          nameGap: 44,
          axisLabel: { formatter: '{value}%' },
        },
        series,
      },
    },
    caption:
      "Each latency-sensitive job's performance averaged over the time it ran (its curve at its round trip, NoMora " +
      '§6); further right is better, and the area above a curve is its mean (appPerformanceMean).',
  };
}
