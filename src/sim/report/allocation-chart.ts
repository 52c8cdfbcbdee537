import type {
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
} from './chart-kit.js';

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
