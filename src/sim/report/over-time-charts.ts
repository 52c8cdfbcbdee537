import type {
  GraphicComponentOption,
  GridComponentOption,
  LineSeriesOption,
  XAXisComponentOption,
  YAXisComponentOption,
} from 'echarts';
import type { RunResult } from '../../world/run-result.js';
import { SPOT_REFUNDS, type ReportBounds } from './json.js';
import { SECONDS_PER_HOUR } from './series-metrics.js';
import { fmt } from '../../report/chart.js';
import { integer, money } from './format.js';
import { REFERENCE_COLOR, seriesStyle } from '../../report/palette.js';
import {
  type ReportChart,
  BOUND_LINE_NAME,
  WORK_BOUND_MARK_NAME,
  WIDTH,
  BUCKETS,
  SMALL_BUCKETS,
  BASELINE,
  AXIS_NAME,
  TOOLTIP_AXIS,
  points,
  round,
  niceAxis,
  hoursOf,
  timeAxis,
  timeLines,
  labelEnds,
  overTimeOption,
  type PanelGrid,
  panelBox,
  panelsMinWidth,
  BOLD_CHAR_WIDTH,
  SMALL_CHAR_WIDTH,
  shortenNames,
  labelText,
} from './chart-kit.js';

const COST_CHART_HEIGHT = 440;
const MIGRATIONS_CHART_HEIGHT = 400;
/** Between a panel title's name and its figures (pixels). */
const TITLE_GAP = 12;

/**
 * A total at a line's end: to the cent below $1,000, where whole dollars made $0.83 and $0.85 both "$1" and merged
 * their labels; whole dollars above, where cents would only lengthen the label.
 */
function dollars(value: number): string {
  return `$${Math.abs(value) < 1000 ? money(value) : integer(value)}`;
}

/** A total to the cent, as the summary table gives it: runs equal to the cent share one end label. */
const cents = (value: number): number => Math.round(100 * value) / 100;

/**
 * The charts over time: cumulative cost (with a lower bound), running instances per scheduler, migrations.
 *
 * The timed bound holds for schedules where no job waits: under a cap or quota (`capped`) jobs wait, and its curve
 * would run above the capped runs, spending at the pace of a fleet the cap forbids. There the chart marks the work
 * bound at the end instead, which holds for any schedule's total and claims no pace.
 */
export function costChart(
  results: readonly RunResult[],
  bounds: ReportBounds | undefined,
  capped = false,
): ReportChart {
  const series = timeLines(results, (r) => r.series.cumulativeCost, false);
  // The end label shows the run's total, formatted here (a label template cannot group digits).
  labelEnds(
    series,
    results.map((r) => r.summary.scheduler),
    results.map((r) => cents(r.summary.totalCost)),
    dollars,
  );
  if (bounds !== undefined && capped) {
    const end = Math.max(0, ...results.map((r) => (r.series.timeSeconds.at(-1) ?? 0) / SECONDS_PER_HOUR));
    series.push({
      type: 'line',
      name: WORK_BOUND_MARK_NAME,
      symbol: 'diamond',
      symbolSize: 11,
      showSymbol: true,
      color: REFERENCE_COLOR,
      lineStyle: { width: 2, type: [6, 4] },
      endLabel: {
        show: true,
        formatter: `work bound: ${dollars(bounds.workBound)}`,
        color: '#555',
      },
      labelLayout: { moveOverlap: 'shiftY' },
      data: [[round(end, 4), round(bounds.workBound, 3)]],
    });
  } else if (bounds !== undefined) {
    const s = bounds.timedSeries;
    series.push({
      type: 'line',
      name: BOUND_LINE_NAME,
      // No marker in the legend either: the bound is a dashed line only.
      symbol: 'none',
      showSymbol: false,
      color: REFERENCE_COLOR,
      lineStyle: { width: 2, type: [6, 4] },
      endLabel: {
        show: true,
        formatter: `lower bound: ${dollars(bounds.timedBound)}`,
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
      height: COST_CHART_HEIGHT,
      option: overTimeOption(results, series, 'cost ($)', '${value}', fmt('money'), COST_CHART_HEIGHT),
    },
    caption:
      'Money spent so far: every instance is billed per second from launch to termination' +
      (results.some((r) => r.network !== undefined)
        ? ', and the traffic across zones as the jobs send it'
        : '') +
      '. Each line ends when the run’s last job finished; the label gives the total.' +
      (bounds === undefined
        ? ''
        : capped
          ? ' Grey diamond: the work bound, what a fluid fleet (fractional instances, resized at will) would cost ' +
            'for the trace’s task-hours, below which no schedule’s total can go' +
            (bounds.atSpotPrices === true ? ` but by refunds no bound counts (${SPOT_REFUNDS})` : '') +
            '. Under a cap or quota jobs wait, ' +
            'so the timed lower bound (every job run from its arrival, none waiting) neither paces these runs nor ' +
            'bounds them, and is not drawn.'
          : ' Dashed grey: the timed lower bound, what a fluid fleet (fractional instances, resized at will) would ' +
            'have spent hosting every job from its arrival for its standalone duration, with no delays and no ' +
            'interference.'),
  };
}

/** Small multiples: one panel per run, laid out in rows of `columns`, sharing axes. */

export function instancesChart(results: readonly RunResult[]): ReportChart {
  const g: PanelGrid = { columns: 3, panelHeight: 150, left: 50, top: 30, gapX: 40, gapY: 58, right: 20 };
  const rows = Math.ceil(results.length / g.columns);
  const baseline = results.find((r) => r.summary.scheduler === BASELINE);
  const y = niceAxis(Math.max(1, ...results.map((r) => Math.max(0, ...r.series.runningInstances))), 3);
  const x = timeAxis(results);
  const lastRow = Math.floor((results.length - 1) / g.columns);
  const titles: GraphicComponentOption[] = [];
  const grids: GridComponentOption[] = [];
  const xAxes: XAXisComponentOption[] = [];
  const yAxes: YAXisComponentOption[] = [];
  const series: LineSeriesOption[] = [];
  // A panel's title is its run's name, and at the panel's right its peak and launches; the name gets the width the
  // figures leave, and a longer one is cut in the middle (its ends tell runs apart), whole on hover, so that it never
  // runs into the next panel's title.
  const stats = results.map(
    (r) => `peak ${Math.max(0, ...r.series.runningInstances)}, ${r.summary.instancesLaunched} launched`,
  );
  const panelWidth = panelBox(g, 0).width;
  const nameWidth = (i: number): number =>
    panelWidth - (stats[i] ?? '').length * SMALL_CHAR_WIDTH - TITLE_GAP;
  const names = results.map((r) => r.summary.scheduler);
  const shortNames = shortenNames(names, Math.min(...names.map((_, i) => nameWidth(i))) / BOLD_CHAR_WIDTH);
  results.forEach((r, i) => {
    const box = panelBox(g, i);
    const style = seriesStyle(r.summary.scheduler);
    titles.push(
      labelText({
        text: shortNames[i] ?? r.summary.scheduler,
        full: r.summary.scheduler,
        x: box.left,
        y: box.top - 24,
        width: nameWidth(i),
        color: style.color,
      }),
      labelText({
        text: stats[i] ?? '',
        full: `${r.summary.scheduler}: ${stats[i] ?? ''}`,
        x: box.left + box.width,
        y: box.top - 23,
        width: panelWidth - nameWidth(i),
        color: '#555',
        bold: false,
        align: 'right',
      }),
    );
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
      // Panels placed in pixels: a narrower page scrolls them rather than cutting the last column off.
      minWidth: panelsMinWidth(g, results.length),
      height: g.top + rows * (g.panelHeight + g.gapY),
      option: {
        tooltip: { ...TOOLTIP_AXIS, valueFormatter: fmt('integer') },
        graphic: titles,
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

export function migrationsChart(results: readonly RunResult[]): ReportChart {
  const series = timeLines(results, (r) => r.series.migrations, true);
  labelEnds(
    series,
    results.map((r) => r.summary.scheduler),
    results.map((r) => r.series.migrations.at(-1) ?? 0),
    integer,
  );
  return {
    chart: {
      id: 'chart-migrations',
      title: 'Job migrations (cumulative)',
      width: WIDTH,
      height: MIGRATIONS_CHART_HEIGHT,
      option: overTimeOption(
        results,
        series,
        'migrations',
        '{value}',
        fmt('integer'),
        MIGRATIONS_CHART_HEIGHT,
      ),
    },
    caption: 'Total number of job migrations (moves of a started job to other instances) so far.',
  };
}

/**
 * The report's five charts (cumulative cost, running instances, resource allocation, JCT distribution,
 * migrations); each scheduler has the same colour in all of them, and in every report.
 */
