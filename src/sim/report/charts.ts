import type {
  EChartsOption,
  GridComponentOption,
  LineSeriesOption,
  ScatterSeriesOption,
  TitleComponentOption,
  XAXisComponentOption,
  YAXisComponentOption,
} from 'echarts';
import type { RunResult } from '../../world/run-result.js';
import type { ReportBounds } from './json.js';
import { minMaxIndices } from './downsample.js';
import { jctCdf, SECONDS_PER_HOUR, timeWeightedUtilization, utilizationPercent } from './series-metrics.js';
import { fmt, type Chart } from '../../report/chart.js';
import { integer } from './format.js';
import { REFERENCE_COLOR, seriesStyle } from '../../report/palette.js';

/** A chart of report.html and the sentence under it. */
export interface ReportChart {
  readonly chart: Chart;
  readonly caption: string;
}

/** The timed lower bound in the cumulative-cost chart: dashed grey, apart from the runs' colours. */
const BOUND_LINE_NAME = 'lower bound (fluid fleet, no delays)';

/** The static SVGs' width; the page scales them, and live charts take the page's width. */
const WIDTH = 1120;
/** Points per line after thinning: about two per horizontal pixel of a full-width chart. */
const BUCKETS = 800;
/** The same for a small panel (a third of the width). */
const SMALL_BUCKETS = 300;
const BASELINE = 'no-packing';

const AXIS_NAME = { nameLocation: 'middle', nameGap: 30, nameTextStyle: { color: '#333' } } as const;
const TOOLTIP_AXIS = { trigger: 'axis', confine: true } as const;

/** `[x, y]` pairs thinned for drawing; `bucketXs` are the x positions as drawn (log10 on a log axis). */
function points(
  xs: readonly number[],
  ys: readonly number[],
  buckets: number,
  bucketXs: readonly number[] = xs,
): [number, number | null][] {
  return minMaxIndices(bucketXs, ys, buckets).map((i) => {
    const y = ys[i] as number;
    return [round(xs[i] as number, 4), Number.isFinite(y) ? round(y, 3) : null];
  });
}

/** Fewer digits in the page's JSON; far below a pixel. */
function round(value: number, digits: number): number {
  return Number(value.toFixed(digits));
}

/**
 * A shared axis end and tick step, 1, 2 or 5 × 10^k with the end on a tick: panels that share a scale need it fixed,
 * and an end off the ticks gets a label of its own that overprints the last tick's.
 */
function niceAxis(max: number, ticks = 5): { max: number; interval: number } {
  if (!(max > 0)) return { max: 1, interval: 0.2 };
  const raw = max / ticks;
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  const f = raw / magnitude;
  const interval = (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * magnitude;
  return { max: Number((Math.ceil(max / interval - 1e-9) * interval).toPrecision(12)), interval };
}

function hoursOf(r: RunResult): number[] {
  return r.series.timeSeconds.map((t) => t / SECONDS_PER_HOUR);
}

/** The time axis all charts share: from 0 to past the last run's end. */
const timeAxis = (results: readonly RunResult[]): { max: number; interval: number } =>
  niceAxis(Math.max(0, ...results.map((r) => (r.series.timeSeconds.at(-1) ?? 0) / SECONDS_PER_HOUR)));

/** One line per run over time, in the run's colour and labelled at its end (no need to look the colour up). */
function timeLines(
  results: readonly RunResult[],
  values: (r: RunResult) => readonly number[],
  step: boolean,
): LineSeriesOption[] {
  return results.map((r) => {
    const style = seriesStyle(r.summary.scheduler);
    return {
      type: 'line',
      name: r.summary.scheduler,
      step: step ? 'end' : false,
      showSymbol: false,
      color: style.color,
      lineStyle: { width: 2 },
      // A backdrop, so a label on the x axis (a run with no migrations) stays legible.
      endLabel: {
        show: true,
        color: style.color,
        fontWeight: 600,
        backgroundColor: 'rgba(255,255,255,0.85)',
        padding: [1, 3],
      },
      labelLayout: { moveOverlap: 'shiftY' },
      emphasis: { focus: 'series' },
      data: points(hoursOf(r), values(r), BUCKETS),
    };
  });
}

/**
 * End labels "name: value". Runs that end on the same value (several with no migrations at all) share one label,
 * "a, b: 0", which would otherwise be drawn on top of each other.
 */
function labelEnds(series: LineSeriesOption[], names: readonly string[], values: readonly string[]): void {
  const byValue = new Map<string, number[]>();
  values.forEach((v, i) => byValue.set(v, [...(byValue.get(v) ?? []), i]));
  series.forEach((s, i) => {
    const group = byValue.get(values[i] as string) ?? [i];
    s.endLabel =
      group[0] === i
        ? { ...s.endLabel, formatter: `${group.map((k) => names[k]).join(', ')}: ${values[i]}` }
        : { ...s.endLabel, show: false };
  });
}

function overTimeOption(
  results: readonly RunResult[],
  series: LineSeriesOption[],
  yName: string,
  yLabel: string,
  valueFormatter: (value: unknown) => string,
): EChartsOption {
  return {
    legend: { top: 0, type: 'scroll' },
    tooltip: { ...TOOLTIP_AXIS, valueFormatter },
    grid: { left: 80, right: 190, top: 44, bottom: 50 },
    xAxis: { type: 'value', name: 'time (hours)', ...AXIS_NAME, min: 0, ...timeAxis(results) },
    yAxis: {
      type: 'value',
      name: yName,
      ...AXIS_NAME,
      nameGap: 58,
      min: 0,
      axisLabel: { formatter: yLabel },
    },
    series,
  };
}

function costChart(results: readonly RunResult[], bounds: ReportBounds | undefined): ReportChart {
  const series = timeLines(results, (r) => r.series.cumulativeCost, false);
  // The end label shows the run's total, formatted here (a label template cannot group digits).
  labelEnds(
    series,
    results.map((r) => r.summary.scheduler),
    results.map((r) => `$${integer(r.summary.totalCost)}`),
  );
  if (bounds !== undefined) {
    const s = bounds.timedSeries;
    series.push({
      type: 'line',
      name: BOUND_LINE_NAME,
      showSymbol: false,
      color: REFERENCE_COLOR,
      lineStyle: { width: 2, type: [6, 4] },
      endLabel: {
        show: true,
        formatter: `lower bound: $${integer(bounds.timedBound)}`,
        color: '#555',
      },
      labelLayout: { moveOverlap: 'shiftY' },
      data: points(
        s.timeSeconds.map((t) => t / SECONDS_PER_HOUR),
        s.cumulativeCost,
        BUCKETS,
      ),
    });
  }
  return {
    chart: {
      id: 'chart-cumulative-cost',
      title: 'Cumulative cost over time',
      width: WIDTH,
      height: 440,
      option: overTimeOption(results, series, 'cost ($)', '${value}', fmt('money')),
    },
    caption:
      'Money spent so far: every instance is billed per second from launch to termination. Each line ends when ' +
      'the run’s last job finished; the label gives the total.' +
      (bounds === undefined
        ? ''
        : ' Dashed grey: the timed lower bound, what a fluid fleet (fractional instances, resized at will) would ' +
          'have spent hosting every job from its arrival for its standalone duration, with no delays and no ' +
          'interference.'),
  };
}

/** Small multiples: one panel per run, laid out in rows of `columns`, sharing axes. */
interface PanelGrid {
  readonly columns: number;
  readonly panelHeight: number;
  readonly left: number;
  readonly top: number;
  readonly gapX: number;
  readonly gapY: number;
  readonly right: number;
}

function panelBox(g: PanelGrid, index: number): { left: number; top: number; width: number; height: number } {
  const width = (WIDTH - g.left - g.right - g.gapX * (g.columns - 1)) / g.columns;
  const row = Math.floor(index / g.columns);
  const column = index % g.columns;
  return {
    left: g.left + column * (width + g.gapX),
    top: g.top + row * (g.panelHeight + g.gapY),
    width,
    height: g.panelHeight,
  };
}

/**
 * Running instances, one panel per run (six step lines on one plot are unreadable); no-packing's count, which
 * launches an instance per job, is drawn faint grey behind the others for scale.
 */
function instancesChart(results: readonly RunResult[]): ReportChart {
  const g: PanelGrid = { columns: 3, panelHeight: 150, left: 50, top: 30, gapX: 40, gapY: 58, right: 20 };
  const rows = Math.ceil(results.length / g.columns);
  const baseline = results.find((r) => r.summary.scheduler === BASELINE);
  const y = niceAxis(Math.max(1, ...results.map((r) => Math.max(0, ...r.series.runningInstances))), 3);
  const x = timeAxis(results);
  const lastRow = Math.floor((results.length - 1) / g.columns);
  const titles: TitleComponentOption[] = [];
  const grids: GridComponentOption[] = [];
  const xAxes: XAXisComponentOption[] = [];
  const yAxes: YAXisComponentOption[] = [];
  const series: LineSeriesOption[] = [];
  results.forEach((r, i) => {
    const box = panelBox(g, i);
    const style = seriesStyle(r.summary.scheduler);
    const peak = Math.max(0, ...r.series.runningInstances);
    titles.push({
      text: `${r.summary.scheduler}  (peak ${peak}, ${r.summary.instancesLaunched} launched)`,
      left: box.left,
      top: box.top - 26,
      textStyle: { fontSize: 13, fontWeight: 600, color: style.color },
    });
    grids.push({ left: box.left, top: box.top, width: box.width, height: box.height });
    xAxes.push({
      type: 'value',
      gridIndex: i,
      min: 0,
      ...x,
      ...(Math.floor(i / g.columns) === lastRow ? { name: 'time (hours)', ...AXIS_NAME, nameGap: 24 } : {}),
    });
    yAxes.push({ type: 'value', gridIndex: i, min: 0, ...y });
    if (baseline !== undefined && baseline !== r)
      series.push({
        type: 'line',
        name: `${BASELINE} (for scale)`,
        xAxisIndex: i,
        yAxisIndex: i,
        step: 'end',
        showSymbol: false,
        silent: true,
        color: '#c8c8c8',
        lineStyle: { width: 1 },
        data: points(hoursOf(baseline), baseline.series.runningInstances, SMALL_BUCKETS),
      });
    series.push({
      type: 'line',
      name: r.summary.scheduler,
      xAxisIndex: i,
      yAxisIndex: i,
      step: 'end',
      showSymbol: false,
      color: style.color,
      lineStyle: { width: 1.5 },
      areaStyle: { opacity: 0.25 },
      data: points(hoursOf(r), r.series.runningInstances, SMALL_BUCKETS),
    });
  });
  return {
    chart: {
      id: 'chart-running-instances',
      title: 'Running instances',
      width: WIDTH,
      height: g.top + rows * (g.panelHeight + g.gapY),
      option: {
        tooltip: { ...TOOLTIP_AXIS, valueFormatter: fmt('integer') },
        title: titles,
        grid: grids,
        xAxis: xAxes,
        yAxis: yAxes,
        series,
      },
    },
    caption:
      'Instances provisioned (launching or running) at each moment, one panel per scheduler on the same axes.' +
      (baseline === undefined ? '' : ' Grey behind each panel: no-packing, one instance per job, for scale.'),
  };
}

const DIMENSIONS = [
  { title: 'GPU', allocated: 'allocatedGpus', capacity: 'capacityGpus' },
  { title: 'vCPU', allocated: 'allocatedVcpus', capacity: 'capacityVcpus' },
  { title: 'Memory', allocated: 'allocatedMemoryGiB', capacity: 'capacityMemoryGiB' },
] as const;

/**
 * Utilization as small multiples: a row per run, a column per resource, each panel one filled step line with the
 * run's time-weighted mean marked, so each run reads on its own and rows compare at a glance.
 */
function allocationChart(results: readonly RunResult[]): ReportChart {
  const g: PanelGrid = { columns: 3, panelHeight: 62, left: 130, top: 34, gapX: 36, gapY: 22, right: 20 };
  const x = timeAxis(results);
  const titles: TitleComponentOption[] = [];
  const grids: GridComponentOption[] = [];
  const xAxes: XAXisComponentOption[] = [];
  const yAxes: YAXisComponentOption[] = [];
  const series: LineSeriesOption[] = [];
  const lastRow = results.length - 1;
  DIMENSIONS.forEach((dim, column) => {
    const box = panelBox(g, column);
    titles.push({
      text: `${dim.title} (allocated ÷ provisioned)`,
      left: box.left,
      top: 4,
      textStyle: { fontSize: 13, fontWeight: 600 },
    });
  });
  results.forEach((r, row) => {
    const style = seriesStyle(r.summary.scheduler);
    const first = panelBox(g, row * g.columns);
    titles.push({
      text: r.summary.scheduler,
      left: 8,
      top: first.top + first.height / 2 - 8,
      textStyle: {
        fontSize: 13,
        fontWeight: 600,
        color: style.color,
        width: g.left - 40,
        overflow: 'truncate',
      },
    });
    DIMENSIONS.forEach((dim, column) => {
      const index = row * g.columns + column;
      const box = panelBox(g, index);
      const allocated = r.series[dim.allocated];
      const capacity = r.series[dim.capacity];
      const mean = timeWeightedUtilization(r.series.timeSeconds, allocated, capacity);
      grids.push({ left: box.left, top: box.top, width: box.width, height: box.height });
      xAxes.push({
        type: 'value',
        gridIndex: index,
        min: 0,
        ...x,
        axisLabel: { show: row === lastRow },
        ...(row === lastRow ? { name: 'time (hours)', ...AXIS_NAME, nameGap: 24 } : {}),
      });
      yAxes.push({
        type: 'value',
        gridIndex: index,
        min: 0,
        max: 100,
        interval: 50,
        axisLabel: { formatter: '{value}%', fontSize: 10 },
      });
      series.push({
        type: 'line',
        name: `${r.summary.scheduler} ${dim.title}`,
        xAxisIndex: index,
        yAxisIndex: index,
        step: 'end',
        showSymbol: false,
        color: style.color,
        lineStyle: { width: 1 },
        areaStyle: { opacity: 0.3 },
        data: points(hoursOf(r), utilizationPercent(allocated, capacity), SMALL_BUCKETS),
        ...(mean === null
          ? {}
          : {
              markLine: {
                silent: true,
                symbol: 'none',
                lineStyle: { color: '#222', type: [4, 3], width: 1 },
                label: {
                  formatter: `mean ${(100 * mean).toFixed(0)}%`,
                  position: 'insideEndTop',
                  fontSize: 10,
                },
                data: [{ yAxis: round(100 * mean, 2) }],
              },
            }),
      });
    });
  });
  const rows = results.length;
  return {
    chart: {
      id: 'chart-resource-allocation',
      title: 'Resource allocation: demand of placed tasks as a share of provisioned capacity',
      width: WIDTH,
      height: g.top + rows * (g.panelHeight + g.gapY) + 30,
      option: {
        tooltip: { ...TOOLTIP_AXIS, valueFormatter: fmt('percent') },
        title: titles,
        grid: grids,
        xAxis: xAxes,
        yAxis: yAxes,
        series,
      },
    },
    caption:
      'Σ demand of the tasks placed on instances ÷ Σ capacity of the provisioned instances, per scheduler (rows) and ' +
      'resource (columns); dashed: the time-weighted mean (the table’s utilization). A gap means nothing was ' +
      'provisioned.',
  };
}

const MARKED = [25, 50, 75, 90] as const;

/** The value below which `p` percent of the sorted `values` lie (nearest rank). */
function percentile(sorted: readonly number[], p: number): number | undefined {
  return sorted[Math.max(0, Math.ceil((p / 100) * sorted.length) - 1)];
}

const hoursText = (h: number): string => `${h.toPrecision(3)} h`;

/**
 * Job completion times, twice on one log axis. Above, the CDF: each run with its colour, its own dash pattern and a
 * marker at 25, 50, 75 and 90 % of jobs done. Runs often differ by little and the CDFs then lie on top of each
 * other, so below, a row per run: its 10–90 % range (whisker), 25–75 % (bar) and median (marker), which stay apart.
 */
function jctChart(results: readonly RunResult[]): ReportChart {
  const cdfHeight = 330;
  const rowHeight = 30;
  const stripTop = 44 + cdfHeight + 64;
  const series: (LineSeriesOption | ScatterSeriesOption)[] = [];
  const names = results.map((r) => r.summary.scheduler);
  for (const r of results) {
    const name = r.summary.scheduler;
    const style = seriesStyle(name);
    const cdf = jctCdf(r.jobs);
    const positive = cdf.hours.map((h) => Math.max(h, 1e-6));
    series.push({
      type: 'line',
      name,
      step: 'end',
      showSymbol: false,
      silent: true,
      color: style.color,
      lineStyle: { width: 2, type: style.dash },
      emphasis: { focus: 'series' },
      data: points(
        positive,
        cdf.percent,
        BUCKETS,
        positive.map((h) => Math.log10(h)),
      ),
    });
    const at = (p: number): number | undefined => percentile(positive, p);
    series.push({
      type: 'scatter',
      name,
      symbol: style.symbol,
      symbolSize: 9,
      color: style.color,
      itemStyle: { borderColor: style.color, borderWidth: 1.5 },
      data: MARKED.flatMap((p) => {
        const h = at(p);
        return h === undefined
          ? []
          : [{ value: [round(h, 4), p], tip: `${name}: ${p}% of jobs completed within ${hoursText(h)}` }];
      }),
    });
    const [p10, p25, p50, p75, p90] = [10, 25, 50, 75, 90].map(at);
    if (p10 === undefined || p25 === undefined || p50 === undefined || p75 === undefined || p90 === undefined)
      continue;
    // A data item may carry fields of its own: the runtime's `tip` formatter shows this one.
    const median = {
      value: [round(p50, 4), name],
      tip:
        `${name}: median ${hoursText(p50)}\n` +
        `25–75%: ${hoursText(p25)} – ${hoursText(p75)}\n10–90%: ${hoursText(p10)} – ${hoursText(p90)}`,
    };
    const onStrip = {
      xAxisIndex: 1,
      yAxisIndex: 1,
      silent: true,
      showSymbol: false,
      color: style.color,
    } as const;
    series.push(
      {
        type: 'line',
        name,
        ...onStrip,
        lineStyle: { width: 1.5 },
        data: [
          [p10, name],
          [p90, name],
        ],
      },
      {
        type: 'line',
        name,
        ...onStrip,
        lineStyle: { width: 10, opacity: 0.45 },
        data: [
          [p25, name],
          [p75, name],
        ],
      },
      {
        type: 'scatter',
        name,
        xAxisIndex: 1,
        yAxisIndex: 1,
        symbol: style.symbol,
        symbolSize: 12,
        color: style.color,
        itemStyle: { borderColor: '#222', borderWidth: 1 },
        data: [median],
      },
    );
  }
  const logAxis = {
    type: 'log',
    minorTick: { show: true },
    minorSplitLine: { show: true, lineStyle: { color: '#f2f2f2' } },
  } as const;
  return {
    chart: {
      id: 'chart-jct-distribution',
      title: 'Job completion time distribution (CDF of completed jobs)',
      width: WIDTH,
      height: stripTop + rowHeight * Math.max(1, results.length) + 56,
      option: {
        legend: { top: 0, type: 'scroll', data: names },
        tooltip: { trigger: 'item', confine: true, formatter: fmt('tip') },
        grid: [
          { left: 110, right: 40, top: 44, height: cdfHeight },
          { left: 110, right: 40, top: stripTop, height: rowHeight * Math.max(1, results.length) },
        ],
        xAxis: [
          { ...logAxis, gridIndex: 0, name: 'job completion time (hours, log scale)', ...AXIS_NAME },
          { ...logAxis, gridIndex: 1, name: 'job completion time (hours, log scale)', ...AXIS_NAME },
        ],
        yAxis: [
          {
            type: 'value',
            gridIndex: 0,
            name: 'jobs completed within (%)',
            ...AXIS_NAME,
            nameGap: 44,
            min: 0,
            max: 100,
            axisLabel: { formatter: '{value}%' },
          },
          {
            type: 'category',
            gridIndex: 1,
            data: names,
            inverse: true,
            axisTick: { show: false },
            splitLine: { show: true, lineStyle: { color: '#f0f0f0' } },
            axisLabel: { fontWeight: 600 },
          },
        ],
        series,
      },
    },
    caption:
      'Above: share of completed jobs whose completion time (end − arrival) is at most x; further right = slower; ' +
      'markers at 25, 50, 75 and 90% of jobs. Below, per scheduler: median (marker), middle half of the jobs (bar) ' +
      'and 10–90% (line). Hover a marker for its values; click a legend entry to hide a scheduler.',
  };
}

function migrationsChart(results: readonly RunResult[]): ReportChart {
  const series = timeLines(results, (r) => r.series.migrations, true);
  labelEnds(
    series,
    results.map((r) => r.summary.scheduler),
    results.map((r) => integer(r.series.migrations.at(-1) ?? 0)),
  );
  return {
    chart: {
      id: 'chart-migrations',
      title: 'Job migrations (cumulative)',
      width: WIDTH,
      height: 400,
      option: overTimeOption(results, series, 'migrations', '{value}', fmt('integer')),
    },
    caption: 'Total number of job migrations (moves of a started job to other instances) so far.',
  };
}

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
