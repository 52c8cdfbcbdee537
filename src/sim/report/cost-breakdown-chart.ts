import type { BarSeriesOption, LegendComponentOption } from 'echarts';
import { fmt } from '../../report/chart.js';
import { COST_PARTS, type CostPart } from '../../world/cost-ledger.js';
import type { RunResult } from '../../world/run-result.js';
import { AXIS_NAME, SMALL_CHAR_WIDTH, WIDTH, type ReportChart } from './chart-kit.js';
import { one, smallMoney } from './format.js';

/** Each part's name in the legend and its colour: work in greens, overheads in ambers, waste in greys and red. */
const PARTS: Readonly<Record<CostPart, { readonly label: string; readonly color: string }>> = {
  working: { label: 'working', color: '#2e9e5b' },
  slowdown: { label: 'co-location slowdown', color: '#d1495b' },
  starting: { label: 'starting (init, siblings)', color: '#edae49' },
  preparing: { label: 'preparing (image, restore)', color: '#f6d186' },
  checkpointing: { label: 'checkpointing', color: '#8c6bb1' },
  bootAndShutdown: { label: 'boot and shutdown', color: '#7a8793' },
  idle: { label: 'idle room', color: '#c9d1d9' },
};

/** Traffic across zones: no instance's dollars, but the run's all the same (part of its total cost). */
const CROSS_ZONE = { label: 'traffic across zones', color: '#3b6ea8' } as const;

/** A legend entry's swatch with the air before its name (ECharts' 25 px icon and 5 px), and the room between entries. */
const SWATCH_WIDTH = 30;
const ENTRY_GAP = 20;
/** A legend row's height, and the margin its rows keep from the chart's sides. */
const LEGEND_ROW_HEIGHT = 22;
const LEGEND_MARGIN = 40;
/** The plot's top with a legend of one row. */
const GRID_TOP = 44;

/**
 * The legend, one component per entry at a place planned here, in as few rows of even length as fit the width. The
 * static SVG is laid out in Node, which measures text narrower than browsers draw it (DejaVu Sans, Linux's usual
 * sans-serif, most of all), so ECharts' own layout ran each long name under the next entry's swatch ("co-location
 * slowdow"); planned at a generous width per character, the entries stay apart in any font. Rows are centred at the
 * static width.
 */
function legendEntries(labels: readonly string[]): { legend: LegendComponentOption[]; rows: number } {
  const widthOf = (label: string): number => SWATCH_WIDTH + label.length * SMALL_CHAR_WIDTH;
  const rowWidth = (row: readonly string[]): number =>
    row.reduce((w, l) => w + widthOf(l), 0) + ENTRY_GAP * Math.max(0, row.length - 1);
  let rows: string[][] = [];
  for (let count = 1; count <= labels.length; count++) {
    const perRow = Math.ceil(labels.length / count);
    rows = Array.from({ length: count }, (_, i) => labels.slice(i * perRow, (i + 1) * perRow)).filter(
      (row) => row.length > 0,
    );
    if (rows.every((row) => rowWidth(row) <= WIDTH - 2 * LEGEND_MARGIN)) break;
  }
  const legend = rows.flatMap((row, r) => {
    let left = Math.round((WIDTH - rowWidth(row)) / 2);
    return row.map((label): LegendComponentOption => {
      const entry: LegendComponentOption = {
        top: 5 + r * LEGEND_ROW_HEIGHT,
        left,
        padding: 0,
        data: [label],
      };
      left += widthOf(label) + ENTRY_GAP;
      return entry;
    });
  });
  return { legend, rows: rows.length };
}

/** Dollars as the chart's tips show them (smallMoney): the parts of a small run read as what they are, not $0.00. */
export function partDollars(x: number): string {
  return Number.isFinite(x) ? `$${smallMoney(x)}` : '–';
}

/** A bar part's tip: the run, the part, its dollars and its share of the run's bill. */
function partTip(run: string, label: string, value: number, bill: number): string {
  const share = bill > 0 ? ` (${one((100 * value) / bill)}%)` : '';
  return `${run}: ${label}\n${partDollars(value)} of ${partDollars(bill)}${share}`;
}

/**
 * Where each run's instance dollars went (cost-ledger.ts), one stacked bar per run in dollars, so runs compare both
 * on their bill and on what it bought, with the traffic across zones last when a run reports the network: each bar
 * then ends at the run's total cost. Undefined when no run has the ledger (results made before it was kept).
 */
export function costBreakdownChart(results: readonly RunResult[]): ReportChart | undefined {
  const runs = results.filter((r) => r.costBreakdown !== undefined);
  if (runs.length === 0) return undefined;
  const names = runs.map((r) => r.summary.scheduler);
  const traffic = runs.some((r) => r.network !== undefined);
  // Each bar ends at its run's bill (its total cost with the traffic): what every tip gives a part's share of.
  const bills = runs.map(
    (r) =>
      COST_PARTS.reduce((a, part) => a + (r.costBreakdown?.[part] ?? 0), 0) + (r.network?.crossZoneCost ?? 0),
  );
  // Drawn at their exact values, so the parts add up to the bill however small; rounded only in the tips' text.
  const bar = (label: string, color: string, values: readonly number[]): BarSeriesOption => ({
    type: 'bar',
    name: label,
    stack: 'cost',
    color,
    barMaxWidth: 26,
    emphasis: { focus: 'series' },
    data: values.map((value, i) => ({ value, tip: partTip(names[i] ?? '', label, value, bills[i] ?? 0) })),
  });
  const series: BarSeriesOption[] = COST_PARTS.map((part) =>
    bar(
      PARTS[part].label,
      PARTS[part].color,
      runs.map((r) => r.costBreakdown?.[part] ?? 0),
    ),
  );
  if (traffic)
    series.push(
      bar(
        CROSS_ZONE.label,
        CROSS_ZONE.color,
        runs.map((r) => r.network?.crossZoneCost ?? 0),
      ),
    );
  const { legend, rows } = legendEntries(series.map((s) => String(s.name)));
  const extraRows = (rows - 1) * LEGEND_ROW_HEIGHT;
  return {
    chart: {
      id: 'chart-cost-breakdown',
      title: traffic
        ? 'Where the money went (instance dollars by what the capacity was doing, and traffic across zones)'
        : 'Where the money went (instance dollars by what the capacity was doing)',
      width: WIDTH,
      // The legend's rows are placed in pixels at this width: narrower, their last entries would be cut off.
      minWidth: WIDTH,
      height: 110 + 42 * runs.length + extraRows,
      option: {
        legend,
        tooltip: { trigger: 'item', confine: true, formatter: fmt('tip') },
        // Narrower than its legend's width the chart scrolls sideways: in a 1100 px window its box shows some 1068 px
        // of it, and the axis' last label, centred on the plot's end ("$100,000" included), is whole in that part.
        grid: { left: 150, right: 90, top: GRID_TOP + extraRows, bottom: 50 },
        xAxis: {
          type: 'value',
          name: 'dollars',
          ...AXIS_NAME,
          axisLabel: { formatter: '$' + '{value}' },
        },
        yAxis: { type: 'category', data: names, inverse: true },
        series,
      },
    },
    caption:
      'Every billed second of an instance split by what its capacity was doing: each task on it takes its share of the ' +
      "instance's $/h (its dominant share of the capacity), split between work at the job's rate and the slowdown " +
      "co-location costs it; the room no task holds is idle. The parts add up to the instances' bill" +
      (traffic
        ? '; with the traffic across zones (priced per GiB each way) they add up to the total cost.'
        : '.'),
  };
}
