import type { EChartsOption, GraphicComponentOption, LegendComponentOption, LineSeriesOption } from 'echarts';
import type { RunResult } from '../../world/run-result.js';
import { minMaxIndices } from './downsample.js';
import { spreadEndLabels } from './end-labels.js';
import { SECONDS_PER_HOUR } from './series-metrics.js';
import { type Chart, fmt } from '../../report/chart.js';
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
/** The work bound, marked at the end of the cumulative-cost chart in its place under caps (over-time-charts.ts). */
export const WORK_BOUND_MARK_NAME = 'work bound (any schedule, total)';

/** The static SVGs' width; the page scales them, and live charts take the page's width. */
export const WIDTH = 1120;
/** Points per line after thinning: about two per horizontal pixel of a full-width chart. */
export const BUCKETS = 800;
/** The same for a small panel (a third of the width). */
export const SMALL_BUCKETS = 300;
export const BASELINE = 'no-packing';

export const AXIS_NAME = { nameLocation: 'middle', nameGap: 30, nameTextStyle: { color: '#333' } } as const;
export const TOOLTIP_AXIS = { trigger: 'axis', confine: true } as const;

/**
 * The legend of lines told apart by dash and marker as well as by colour (palette.ts): ECharts draws each entry as its
 * series' marker on its series' dash, and at its 25 px default the marker covers a dash's gaps, so that every entry
 * looks alike. Wide enough for a dash to show on both sides of the marker.
 */
const LINE_LEGEND = { top: 0, type: 'scroll', itemWidth: 46, itemHeight: 10 } as const;

/**
 * That legend for the given series names, in order, one entry per name (several series may share one). A line
 * drawn without a marker (`symbol: 'none'`: the lower bound) gets none in its entry either, where ECharts would draw
 * a circle.
 */
export function lineLegend(
  names: readonly string[],
  series: readonly { readonly name?: unknown; readonly symbol?: unknown }[] = [],
): LegendComponentOption {
  const unmarked = new Set(series.filter((s) => s.symbol === 'none').map((s) => String(s.name)));
  return {
    ...LINE_LEGEND,
    data: [...new Set(names)].map((name) =>
      unmarked.has(name) ? { name, itemStyle: { opacity: 0 } } : { name },
    ),
  };
}

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
      // The marker shows in the legend only, on the run's dash: the lines overlap where runs spend alike.
      symbol: style.symbol,
      showSymbol: false,
      color: style.color,
      lineStyle: { width: 2, type: style.dash },
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
 * "a, b: 0", which would otherwise be drawn on top of each other. Only equal values merge: totals that merely print
 * alike (rounded) would hide which run was cheaper.
 */
export function labelEnds(
  series: LineSeriesOption[],
  names: readonly string[],
  values: readonly number[],
  text: (value: number) => string,
): void {
  const byValue = new Map<number, number[]>();
  values.forEach((v, i) => byValue.set(v, [...(byValue.get(v) ?? []), i]));
  series.forEach((s, i) => {
    const value = values[i] as number;
    const group = byValue.get(value) ?? [i];
    s.endLabel =
      group[0] === i
        ? { ...s.endLabel, formatter: `${group.map((k) => names[k]).join(', ')}: ${text(value)}` }
        : { ...s.endLabel, show: false };
  });
}

/** The over-time charts' plot area inside the chart (pixels); the right margin holds the end labels, and widens for long ones. */
const OVER_TIME_GRID = { left: 80, right: 190, top: 44, bottom: 50 } as const;
/** The widest right margin: past it a long label is cut, rather than the plot squeezed. */
const MAX_RIGHT_MARGIN = 420;
/** An end label's line: 12 px bold text with its 1 px padding, and a little air. */
const END_LABEL_LINE_HEIGHT = 17;
/** An end label's width per character (12 px bold sans-serif, generous) and its padding and distance from the line. */
const END_LABEL_CHAR_WIDTH = 7.4;
const END_LABEL_EXTRA_WIDTH = 11;

export function overTimeOption(
  results: readonly RunResult[],
  series: LineSeriesOption[],
  yName: string,
  yLabel: string,
  valueFormatter: (value: unknown) => string,
  height: number,
): EChartsOption {
  const x = timeAxis(results);
  // A y axis of known extent, so that where each line ends is known here and its label can be moved off the others.
  const y = niceAxis(Math.max(0, ...series.flatMap((s) => drawnPoints(s).map((p) => p[1]))));
  const right = placeEndLabels(series, x.max, y.max, height);
  return {
    legend: lineLegend(
      series.map((s) => String(s.name)),
      series,
    ),
    tooltip: { ...TOOLTIP_AXIS, valueFormatter },
    grid: { ...OVER_TIME_GRID, right },
    xAxis: { type: 'value', name: 'time (hours)', ...AXIS_NAME, min: 0, ...x },
    yAxis: {
      type: 'value',
      name: yName,
      ...AXIS_NAME,
      nameGap: 58,
      min: 0,
      ...y,
      axisLabel: { formatter: yLabel },
    },
    series,
  };
}

/** A line's drawn points (`[x, y]`, both finite; gaps left out), as `points` makes them. */
function drawnPoints(series: LineSeriesOption): [number, number][] {
  const data = (series.data ?? []) as readonly unknown[];
  return data.flatMap((point): [number, number][] =>
    Array.isArray(point) && Number.isFinite(point[0]) && Number.isFinite(point[1])
      ? [[point[0] as number, point[1] as number]]
      : [],
  );
}

/**
 * Offset the shown end labels so that none overprints another (end-labels.ts), and answer the right margin that
 * holds the longest of those ending at the right (merged labels, "a, b, c: 0", run long). Placed at the static width;
 * a page drawn narrower squeezes the plot sideways only, so the vertical spacing holds there too.
 */
function placeEndLabels(series: LineSeriesOption[], xMax: number, yMax: number, height: number): number {
  const plotHeight = height - OVER_TIME_GRID.top - OVER_TIME_GRID.bottom;
  const shown = series.flatMap((s) => {
    const label = s.endLabel;
    const text = typeof label?.formatter === 'string' ? label.formatter : String(s.name ?? '');
    const end = drawnPoints(s).at(-1);
    if (label?.show !== true || end === undefined) return [];
    const width = text.length * END_LABEL_CHAR_WIDTH + END_LABEL_EXTRA_WIDTH;
    return [{ series: s, xShare: end[0] / xMax, y: plotHeight - (end[1] / yMax) * plotHeight, width }];
  });
  // What sticks out past the plot of a label at x: its width less the plot to its right.
  const plainWidth = WIDTH - OVER_TIME_GRID.left - OVER_TIME_GRID.right;
  const overhang = Math.max(0, ...shown.map((l) => l.width - (1 - l.xShare) * plainWidth));
  const right = Math.round(Math.min(MAX_RIGHT_MARGIN, Math.max(OVER_TIME_GRID.right, overhang + 8)));
  const plotWidth = WIDTH - OVER_TIME_GRID.left - right;
  const offsets = spreadEndLabels(
    shown.map((l) => ({ x: l.xShare * plotWidth, y: l.y, width: l.width })),
    END_LABEL_LINE_HEIGHT,
    plotHeight,
  );
  shown.forEach((l, i) => {
    const dy = Math.round(offsets[i] ?? 0);
    if (dy !== 0) l.series.endLabel = { ...l.series.endLabel, offset: [0, dy] };
  });
  return right;
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
 * The narrowest a chart of `panels` panels can be drawn without cutting one off: to the right end of the last column
 * in use and the grid's margin. Panels are placed in pixels, so a page narrower than this scrolls the chart; one
 * wider than the columns in use leaves the blank room to their right on the page rather than in a scroll box.
 */
export function panelsMinWidth(g: PanelGrid, panels: number): number {
  const last = panelBox(g, Math.max(1, Math.min(panels, g.columns)) - 1);
  return Math.ceil(last.left + last.width + g.right);
}

/**
 * Running instances, one panel per run (six step lines on one plot are unreadable); no-packing's count, which
 * launches an instance per job, is drawn faint grey behind the others for scale.
 */

/**
 * A label's width per character, generous, for 13 px bold sans-serif (DejaVu Sans Bold averages 7.7 px) and 12 px
 * regular: room for a name is planned with these, since neither ECharts in Node nor the page measures before layout.
 */
export const BOLD_CHAR_WIDTH = 8;
export const SMALL_CHAR_WIDTH = 7;

/**
 * Names cut to at most `maxChars` characters in the middle ("eva-laten…-migration"): their ends are what tells
 * schedulers apart (the family in front, a variant or a `@vot=` value at the back), so cutting the end made
 * eva-latency-blind and eva-latency-no-migration both "eva-laten…". Distinct names stay distinct: when two cuts
 * coincide the cut moves, and when no cut keeps them apart the names stay whole.
 */
export function shortenNames(names: readonly string[], maxChars: number): string[] {
  const max = Math.max(5, Math.floor(maxChars));
  if (names.every((n) => n.length <= max)) return [...names];
  const cut = (name: string, head: number): string =>
    name.length <= max ? name : `${name.slice(0, head)}…${name.slice(name.length - (max - 1 - head))}`;
  const unique = [...new Set(names)];
  const middle = Math.floor((max - 1) / 2);
  // Heads from the middle outwards: the first that keeps every name apart.
  const heads = Array.from({ length: max - 1 }, (_, i) => i + 1).sort(
    (a, b) => Math.abs(a - middle) - Math.abs(b - middle) || a - b,
  );
  for (const head of heads)
    if (new Set(unique.map((n) => cut(n, head))).size === unique.length)
      return names.map((n) => cut(n, head));
  return [...names];
}

/**
 * A text drawn at (x, y) (its top; its left, or its right with `align: 'right'`), cut to `width` pixels if it still
 * runs longer; hovering it shows `full`, the text before any shortening. ECharts' titles take no tooltip.
 */
export function labelText(opts: {
  readonly text: string;
  readonly full: string;
  readonly x: number;
  readonly y: number;
  readonly width: number;
  readonly color: string;
  readonly bold?: boolean;
  readonly align?: 'left' | 'right';
}): GraphicComponentOption {
  return {
    type: 'text',
    x: opts.x,
    y: opts.y,
    // Hovering shows the whole text, by the page's `tip` formatter: an element's name, as text (never as markup).
    name: opts.full,
    tooltip: { formatter: fmt('tip') },
    style: {
      text: opts.text,
      fill: opts.color,
      fontSize: opts.bold === false ? 12 : 13,
      fontWeight: opts.bold === false ? 'normal' : 600,
      align: opts.align ?? 'left',
      verticalAlign: 'top',
      width: Math.max(1, Math.floor(opts.width)),
      overflow: 'truncate',
    },
  };
}
