import type { LineSeriesOption, ScatterSeriesOption } from 'echarts';
import type { RunResult } from '../../world/run-result.js';
import { jctCdf } from './series-metrics.js';
import { median, percentile } from '../../world/metrics.js';
import { fmt } from '../../report/chart.js';
import { seriesStyle } from '../../report/palette.js';
import {
  type ReportChart,
  WIDTH,
  BUCKETS,
  AXIS_NAME,
  BOLD_CHAR_WIDTH,
  lineLegend,
  points,
  round,
  shortenNames,
} from './chart-kit.js';

const MARKED = [25, 50, 75, 90] as const;

/**
 * The JCT at which `p` percent of the jobs had completed, as the summary table computes its figures: the median as its
 * median (the mean of the two middle values for an even count), any other percentile nearest-rank as its p95 (the
 * smallest JCT with at least p% of the jobs at or below it). Either lies on the CDF's line. Undefined for no jobs.
 */
function jctAt(jcts: readonly number[], p: number): number | undefined {
  if (jcts.length === 0) return undefined;
  return p === 50 ? median(jcts) : percentile(jcts, p);
}

const hoursText = (h: number): string => `${h.toPrecision(3)} h`;

/** The plots' left edge: at least this, and room for the strip's names up to MAX_NAME_WIDTH (pixels). */
const MIN_LEFT = 110;
const MAX_NAME_WIDTH = 200;
/** From a strip name's right end to the plot: the tick and air. */
const NAME_TO_PLOT = 16;

/**
 * The log axis' ends, powers of ten around every drawn time: the CDF and the strip below it share one x label and so
 * one scale; left to ECharts, each picked its own (0.1–1,000 h above, 0.1–100 h below, the strip ending at p90).
 */
function logHoursRange(hours: readonly number[]): { min: number; max: number } | undefined {
  const positive = hours.filter((h) => h > 0 && Number.isFinite(h));
  if (positive.length === 0) return undefined;
  const lo = Math.floor(Math.log10(Math.min(...positive)));
  const hi = Math.max(lo + 1, Math.ceil(Math.log10(Math.max(...positive))));
  // Rounded: 10 ** -5 is 0.000009999999999999999 in floating point.
  return { min: Number((10 ** lo).toPrecision(1)), max: Number((10 ** hi).toPrecision(1)) };
}

/**
 * Job completion times, twice on one log axis. Above, the CDF: each run with its colour, its own dash pattern and a
 * marker at 25, 50, 75 and 90 % of jobs done. Runs often differ by little and the CDFs then lie on top of each
 * other, so below, a row per run: its 10–90 % range (whisker), 25–75 % (bar) and median (marker), which stay apart.
 */
export function jctChart(results: readonly RunResult[]): ReportChart {
  const cdfHeight = 330;
  const rowHeight = 30;
  const stripTop = 44 + cdfHeight + 64;
  const series: (LineSeriesOption | ScatterSeriesOption)[] = [];
  const names = results.map((r) => r.summary.scheduler);
  // The strip's rows are keyed by name; a long one is cut in the middle (whole in the median's tooltip), and both
  // plots start where the longest fits, so that ECharts does not push the strip's plot right of the CDF's.
  const nameWidth = Math.min(MAX_NAME_WIDTH, Math.max(0, ...names.map((n) => n.length)) * BOLD_CHAR_WIDTH);
  const rowNames = shortenNames(names, MAX_NAME_WIDTH / BOLD_CHAR_WIDTH);
  const left = Math.max(MIN_LEFT, Math.ceil(nameWidth + NAME_TO_PLOT));
  const drawn: number[] = [];
  results.forEach((r, index) => {
    const name = r.summary.scheduler;
    const row = rowNames[index] ?? name;
    const style = seriesStyle(name);
    const cdf = jctCdf(r.jobs);
    const positive = cdf.hours.map((h) => Math.max(h, 1e-6));
    drawn.push(...positive);
    // From 0% at the fastest job: without that first step a single job drew no line at all, and the 25% marker of
    // two or three jobs sat below where the line began.
    const fastest = positive[0];
    const xs = fastest === undefined ? [] : [fastest, ...positive];
    const ys = fastest === undefined ? [] : [0, ...cdf.percent];
    series.push({
      type: 'line',
      name,
      step: 'end',
      // The legend draws this line's marker on its dash: the run's key in both plots.
      symbol: style.symbol,
      showSymbol: false,
      silent: true,
      color: style.color,
      lineStyle: { width: 2, type: style.dash },
      emphasis: { focus: 'series' },
      data: points(
        xs,
        ys,
        BUCKETS,
        xs.map((h) => Math.log10(h)),
      ),
    });
    const at = (p: number): number | undefined => jctAt(positive, p);
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
      return;
    // A data item may carry fields of its own: the runtime's `tip` formatter shows this one.
    const median = {
      value: [round(p50, 4), row],
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
          [p10, row],
          [p90, row],
        ],
      },
      {
        type: 'line',
        name,
        ...onStrip,
        lineStyle: { width: 10, opacity: 0.45 },
        data: [
          [p25, row],
          [p75, row],
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
  });
  const logAxis = {
    type: 'log',
    ...logHoursRange(drawn),
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
        legend: lineLegend(names),
        tooltip: { trigger: 'item', confine: true, formatter: fmt('tip') },
        grid: [
          { left, right: 40, top: 44, height: cdfHeight },
          { left, right: 40, top: stripTop, height: rowHeight * Math.max(1, results.length) },
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
            data: rowNames,
            inverse: true,
            axisTick: { show: false },
            splitLine: { show: true, lineStyle: { color: '#f0f0f0' } },
            axisLabel: { fontWeight: 600, width: left - NAME_TO_PLOT / 2, overflow: 'truncate' },
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
