import type {
  GraphicComponentOption,
  GridComponentOption,
  LineSeriesOption,
  TitleComponentOption,
  XAXisComponentOption,
  YAXisComponentOption,
} from 'echarts';
import type { RunResult } from '../../world/run-result.js';
import { timeWeightedUtilization, utilizationPercent } from './series-metrics.js';
import { fmt } from '../../report/chart.js';
import { seriesStyle } from '../../report/palette.js';
import {
  type ReportChart,
  WIDTH,
  SMALL_BUCKETS,
  AXIS_NAME,
  TOOLTIP_AXIS,
  points,
  round,
  hoursOf,
  timeAxis,
  type PanelGrid,
  panelBox,
  panelsMinWidth,
  BOLD_CHAR_WIDTH,
  shortenNames,
  labelText,
} from './chart-kit.js';

/** The row labels' column: as wide as the longest name, within these bounds (pixels); longer names are cut. */
const MIN_LABEL_WIDTH = 82;
const MAX_LABEL_WIDTH = 200;
/** From a row label's right end to the panel: the y axis' labels ("100%") and air. */
const LABEL_TO_PANEL = 48;

const DIMENSIONS = [
  { title: 'GPU', allocated: 'allocatedGpus', capacity: 'capacityGpus' },
  { title: 'vCPU', allocated: 'allocatedVcpus', capacity: 'capacityVcpus' },
  { title: 'Memory', allocated: 'allocatedMemoryGiB', capacity: 'capacityMemoryGiB' },
] as const;

/**
 * Utilization as small multiples: a row per run, a column per resource, each panel one filled step line with the
 * run's time-weighted mean marked, so each run reads on its own and rows compare at a glance.
 */
export function allocationChart(results: readonly RunResult[]): ReportChart {
  // Names are the rows' only key: the column widens to fit them whole (eva-latency-no-migration, sweep runs such as
  // eva@vot=auto), and past its widest a name is cut in the middle, keeping the ends that tell runs apart.
  const names = results.map((r) => r.summary.scheduler);
  const longest = Math.max(0, ...names.map((n) => n.length)) * BOLD_CHAR_WIDTH;
  const labelWidth = Math.min(MAX_LABEL_WIDTH, Math.max(MIN_LABEL_WIDTH, longest));
  const labels = shortenNames(names, labelWidth / BOLD_CHAR_WIDTH);
  const g: PanelGrid = {
    columns: 3,
    panelHeight: 62,
    left: labelWidth + LABEL_TO_PANEL,
    top: 34,
    gapX: 36,
    gapY: 22,
    right: 20,
  };
  const x = timeAxis(results);
  const titles: TitleComponentOption[] = [];
  const rowLabels: GraphicComponentOption[] = [];
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
    rowLabels.push(
      labelText({
        text: labels[row] ?? r.summary.scheduler,
        full: r.summary.scheduler,
        x: 8,
        y: first.top + first.height / 2 - 8,
        width: labelWidth,
        color: style.color,
      }),
    );
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
                // Placed at the value given, not at ECharts' default rounding of it (2 decimals); the label is text.
                precision: 20,
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
      // Panels placed in pixels: a narrower page scrolls them rather than cutting the last column off (a column per
      // resource, whatever the runs).
      minWidth: panelsMinWidth(g, DIMENSIONS.length),
      height: g.top + rows * (g.panelHeight + g.gapY) + 30,
      option: {
        tooltip: { ...TOOLTIP_AXIS, valueFormatter: fmt('percent') },
        title: titles,
        graphic: rowLabels,
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
