import type { RunResult } from '../../world/run-result.js';
import type { ReportBounds } from './json.js';
import { minMaxIndices } from './downsample.js';
import { jctCdf, SECONDS_PER_HOUR, utilizationPercent } from './series-metrics.js';
import type { ChartLine, ChartPanel, ChartSpec, Interpolation, LegendEntry } from '../../report/svg-chart.js';

/** Colour-blind-friendly categorical palette (Tableau 10, then a dark grey), assigned in run order. */
const PALETTE = [
  '#4e79a7',
  '#f28e2b',
  '#e15759',
  '#76b7b2',
  '#59a14f',
  '#edc948',
  '#b07aa1',
  '#ff9da7',
  '#9c755f',
  '#bab0ac',
  '#4d4d4d',
] as const;

export function colorOf(index: number): string {
  return PALETTE[index % PALETTE.length] as string;
}

/** The timed lower bound in the cumulative-cost chart: dashed grey, apart from the runs' palette. */
const BOUND_LINE_NAME = 'lower bound (fluid fleet, no delays)';
const BOUND_COLOR = '#8c8c8c';

/** Points per line after thinning: about two per horizontal pixel of a full-width chart. */
const BUCKETS = 800;

/** `bucketXs`: the x positions as drawn (e.g. log10 of x on a log axis), so thinning is even on screen. */
function line(
  name: string,
  index: number,
  xs: readonly number[],
  ys: readonly number[],
  bucketXs: readonly number[] = xs,
): ChartLine {
  const keep = minMaxIndices(bucketXs, ys, BUCKETS);
  return {
    name,
    color: colorOf(index),
    xs: keep.map((i) => xs[i] as number),
    ys: keep.map((i) => ys[i] as number),
  };
}

function hoursOf(r: RunResult): number[] {
  return r.series.timeSeconds.map((t) => t / SECONDS_PER_HOUR);
}

const TIME_AXIS = { label: 'time (hours)', min: 0, tight: true } as const;

function overTime(
  results: readonly RunResult[],
  yLabel: string,
  interpolation: Interpolation,
  values: (r: RunResult) => readonly number[],
): ChartPanel {
  return {
    x: TIME_AXIS,
    y: { label: yLabel, min: 0 },
    interpolation,
    lines: results.map((r, i) => line(r.summary.scheduler, i, hoursOf(r), values(r))),
  };
}

/**
 * The report's five charts (cumulative cost, running instances, resource allocation, JCT distribution,
 * migrations), one colour per scheduler across all of them.
 */
export function reportCharts(results: readonly RunResult[], bounds?: ReportBounds): ChartSpec[] {
  const legend: LegendEntry[] = results.map((r, i) => ({ name: r.summary.scheduler, color: colorOf(i) }));
  let costPanel = overTime(results, 'cost ($)', 'linear', (r) => r.series.cumulativeCost);
  let costLegend = legend;
  if (bounds !== undefined) {
    const s = bounds.timedSeries;
    const keep = minMaxIndices(s.timeSeconds, s.cumulativeCost, BUCKETS);
    const boundLine: ChartLine = {
      name: BOUND_LINE_NAME,
      color: BOUND_COLOR,
      dashed: true,
      xs: keep.map((i) => (s.timeSeconds[i] as number) / SECONDS_PER_HOUR),
      ys: keep.map((i) => s.cumulativeCost[i] as number),
    };
    costPanel = { ...costPanel, lines: [...costPanel.lines, boundLine] };
    costLegend = [...legend, { name: BOUND_LINE_NAME, color: BOUND_COLOR, dashed: true }];
  }
  const utilizationPanel = (
    title: string,
    allocated: (r: RunResult) => readonly number[],
    capacity: (r: RunResult) => readonly number[],
  ): ChartPanel => ({
    title,
    x: TIME_AXIS,
    y: { label: 'allocated / provisioned (%)', min: 0, max: 100 },
    interpolation: 'step',
    lines: results.map((r, i) =>
      line(r.summary.scheduler, i, hoursOf(r), utilizationPercent(allocated(r), capacity(r))),
    ),
  });
  return [
    {
      id: 'chart-cumulative-cost',
      title: 'Cumulative cost over time',
      legend: costLegend,
      panels: [costPanel],
    },
    {
      id: 'chart-running-instances',
      title: 'Running instances',
      legend,
      panels: [overTime(results, 'instances', 'step', (r) => r.series.runningInstances)],
    },
    {
      id: 'chart-resource-allocation',
      title: 'Resource allocation: demand of placed tasks as a share of provisioned capacity',
      legend,
      panels: [
        utilizationPanel(
          'GPU',
          (r) => r.series.allocatedGpus,
          (r) => r.series.capacityGpus,
        ),
        utilizationPanel(
          'vCPU',
          (r) => r.series.allocatedVcpus,
          (r) => r.series.capacityVcpus,
        ),
        utilizationPanel(
          'Memory',
          (r) => r.series.allocatedMemoryGiB,
          (r) => r.series.capacityMemoryGiB,
        ),
      ],
    },
    {
      id: 'chart-jct-distribution',
      title: 'Job completion time distribution (CDF of completed jobs)',
      legend,
      panels: [
        {
          x: { label: 'job completion time (hours, log scale)', scale: 'log' },
          y: { label: 'jobs completed within (%)', min: 0, max: 100 },
          interpolation: 'step',
          lines: results.map((r, i) => {
            const cdf = jctCdf(r.jobs);
            return line(
              r.summary.scheduler,
              i,
              cdf.hours,
              cdf.percent,
              cdf.hours.map((h) => Math.log10(Math.max(h, 1e-6))),
            );
          }),
        },
      ],
    },
    {
      id: 'chart-migrations',
      title: 'Job migrations (cumulative)',
      legend,
      panels: [overTime(results, 'migrations', 'step', (r) => r.series.migrations)],
    },
  ];
}
