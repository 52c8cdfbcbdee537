import type { EChartsOption, LineSeriesOption } from 'echarts';
import type { RunResult } from '../../world/run-result.js';
import { minMaxIndices } from './downsample.js';
import { SECONDS_PER_HOUR } from './series-metrics.js';
import { type Chart } from '../../report/chart.js';
import { seriesStyle } from '../../report/palette.js';

/**
 * What report.html's charts share: sizes, point thinning, axes, lines over time labelled at their ends, panels.
 */
/** A chart of report.html and the sentence under it. */
export interface ReportChart {
  readonly chart: Chart;
  readonly caption: string;
}

/** The timed lower bound in the cumulative-cost chart: dashed grey, apart from the runs' colours. */
export const BOUND_LINE_NAME = 'lower bound (fluid fleet, no delays)';

/** The static SVGs' width; the page scales them, and live charts take the page's width. */
export const WIDTH = 1120;
/** Points per line after thinning: about two per horizontal pixel of a full-width chart. */
export const BUCKETS = 800;
/** The same for a small panel (a third of the width). */
export const SMALL_BUCKETS = 300;
export const BASELINE = 'no-packing';

export const AXIS_NAME = { nameLocation: 'middle', nameGap: 30, nameTextStyle: { color: '#333' } } as const;
export const TOOLTIP_AXIS = { trigger: 'axis', confine: true } as const;

/** `[x, y]` pairs thinned for drawing; `bucketXs` are the x positions as drawn (log10 on a log axis). */
export function points(
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
export function round(value: number, digits: number): number {
  return Number(value.toFixed(digits));
}

/**
 * A shared axis end and tick step, 1, 2 or 5 × 10^k with the end on a tick: panels that share a scale need it fixed,
 * and an end off the ticks gets a label of its own that overprints the last tick's.
 */
export function niceAxis(max: number, ticks = 5): { max: number; interval: number } {
  if (!(max > 0)) return { max: 1, interval: 0.2 };
  const raw = max / ticks;
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  const f = raw / magnitude;
  const interval = (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * magnitude;
  return { max: Number((Math.ceil(max / interval - 1e-9) * interval).toPrecision(12)), interval };
}

export function hoursOf(r: RunResult): number[] {
  return r.series.timeSeconds.map((t) => t / SECONDS_PER_HOUR);
}

/** The time axis all charts share: from 0 to past the last run's end. */
export const timeAxis = (results: readonly RunResult[]): { max: number; interval: number } =>
  niceAxis(Math.max(0, ...results.map((r) => (r.series.timeSeconds.at(-1) ?? 0) / SECONDS_PER_HOUR)));

/** One line per run over time, in the run's colour and labelled at its end (no need to look the colour up). */
export function timeLines(
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
export function labelEnds(
  series: LineSeriesOption[],
  names: readonly string[],
  values: readonly string[],
): void {
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

export function overTimeOption(
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

export interface PanelGrid {
  readonly columns: number;
  readonly panelHeight: number;
  readonly left: number;
  readonly top: number;
  readonly gapX: number;
  readonly gapY: number;
  readonly right: number;
}

export function panelBox(
  g: PanelGrid,
  index: number,
): { left: number; top: number; width: number; height: number } {
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
