import type { BarSeriesOption, EChartsOption } from 'echarts';
import { chartHtml, fmt, type Chart } from '../report/chart.js';
import { escapeXml } from '../report/escape.js';
import { panelBox, WIDTH, type PanelGrid } from '../sim/report/chart-kit.js';
import { BASE_STYLE, dataTable, htmlPage, type TableColumn } from '../sim/report/page.js';
import { catalogName } from './arm-catalogs.js';
import {
  METRIC_LABELS,
  absoluteReason,
  armCaps,
  armCatalogsText,
  armFlagsText,
  capsShown,
  catalogsDiffer,
  confidenceText,
  differenceText,
  dollarsOrDash,
  isAbsolute,
  leftOutText,
  metricLabel,
  oneSidedNotes,
  peakShareRange,
  pValueText,
  sameCaps,
  seedDifferences,
  significant,
  type Arm,
  type ArmsReport,
} from './arms-report.js';
import type { ComparedMetric, PairedDifference } from './paired-arms.js';

/**
 * arms.html (`bench arms --out`): self-contained like report.html. Per compared arm, a sentence of what it changed on
 * average, small multiples of its per-seed differences (one panel per metric, each on its own scale: a cost moving by
 * a percent and a barrier-idle cost falling by 97% do not share an axis), and the per-seed table.
 */

/** One panel per metric, four to a row; room above each for its title, below for the seed axis, left for the ticks. */
const PANELS: PanelGrid = { columns: 4, panelHeight: 170, left: 60, top: 36, gapX: 45, gapY: 70, right: 20 };
const LOWER = '#2a9d5b';
const HIGHER = '#d1495b';
const NEUTRAL = '#4c78a8';
/**
 * Neither good nor bad when higher: under a cap the point is to use it (peak), and spot share is a means, not an end.
 */
const SIGNLESS: ReadonlySet<ComparedMetric> = new Set(['peakCostPerHour', 'spotShare']);

function barColor(metric: ComparedMetric, p: number): string {
  if (SIGNLESS.has(metric) || p === 0) return NEUTRAL;
  return p < 0 ? LOWER : HIGHER;
}

/** The p-values there are: `0.36 by t-test, 0.45 by sign test`. */
function pValues(d: PairedDifference): string {
  const parts = [
    ...(d.tTestP === null ? [] : [`${pValueText(d.tTestP)} by t-test`]),
    ...(d.signTestP === null ? [] : [`${pValueText(d.signTestP)} by sign test`]),
  ];
  return parts.length === 0 ? '-' : parts.join(', ');
}

/** The lead: what the arm did to cost and mean JCT on average, and its peak against the caps. */
export function armSentence(report: ArmsReport, arm: Arm, differences: readonly PairedDifference[]): string {
  const clause = (d: PairedDifference): string => {
    const verdict = significant(d);
    const spread =
      verdict === null
        ? d.standardError === 0
          ? ` (the same on every seed: no spread to judge it by; p ${pValues(d)})`
          : ''
        : ` (95% interval ${confidenceText(d)}: ${verdict ? 'more than noise' : 'within noise'}; p ${pValues(d)})`;
    return `${metricLabel(d)} ${differenceText(d, d.meanPercent)}${spread}, lower on ${d.lowerOn} of ${d.seeds}`;
  };
  const lead = differences.filter((d) => d.metric === 'totalCost' || d.metric === 'meanJctHours').map(clause);
  const peak = peakShareRange(report, arm.name);
  const capped =
    peak === null
      ? ''
      : ` Its peak was ${(100 * peak.min).toFixed(2)}–${(100 * peak.max).toFixed(2)}% of the cap.`;
  const seeds = `${report.seeds.length} seed${report.seeds.length === 1 ? '' : 's'}`;
  return `Against ${report.baseline} on ${seeds}, on average: ${lead.join('; ')}.${capped}`;
}

const SUMMARY_COLUMNS: readonly TableColumn<PairedDifference>[] = [
  {
    header: 'metric',
    description: 'What was compared.',
    numeric: false,
    cell: metricLabel,
  },
  {
    header: 'mean Δ',
    description:
      "Mean over the seeds of the arm's difference, in percent of the baseline's value; marked abs, in the metric's " +
      'own units, where the baseline was 0 on a seed on which the arm was not (no percent of it can be taken).',
    numeric: true,
    cell: (d) => differenceText(d, d.meanPercent),
  },
  {
    header: 'standard error',
    description: 'Standard error of that mean (sample standard deviation / √seeds), in percentage points.',
    numeric: true,
    cell: (d) => (d.standardError === null ? '-' : d.standardError.toFixed(2)),
  },
  {
    header: '95% interval',
    description:
      "95% confidence interval of the mean difference (Student's t over the seeds); when it holds 0, the arm is not " +
      'told apart from the baseline.',
    numeric: true,
    cell: confidenceText,
  },
  {
    header: 'p (t-test)',
    description: 'Two-sided p-value of the paired t-test that the mean difference is 0.',
    numeric: true,
    cell: (d) => pValueText(d.tTestP),
  },
  {
    header: 'p (sign test)',
    description:
      'Two-sided p-value of the exact sign test: how unlikely so lopsided a count of lower and higher seeds is by ' +
      'chance. It ignores how far each seed moved, so one far-off seed cannot sway it.',
    numeric: true,
    cell: (d) => pValueText(d.signTestP),
  },
  {
    header: 'lowest',
    description: 'The lowest difference of a seed.',
    numeric: true,
    cell: (d) => differenceText(d, d.minPercent),
  },
  {
    header: 'highest',
    description: 'The highest difference of a seed.',
    numeric: true,
    cell: (d) => differenceText(d, d.maxPercent),
  },
  {
    header: 'lower on',
    description:
      'Seeds on which the arm came out lower than the baseline, of the seeds that measured the metric.',
    numeric: true,
    cell: (d) => `${d.lowerOn} of ${d.seeds}`,
  },
];

/**
 * A panel's value axis: from the lowest to the highest of the bars, the mean, its 95% interval and 0, out to a round
 * step. Left to itself the axis fits the bars alone, and an interval wider than them (few seeds) shades the whole panel.
 */
export function valueAxisRange(
  d: PairedDifference,
): { min: number; max: number; interval: number } | undefined {
  const values = [
    0,
    ...seedDifferences(d).filter((v): v is number => v !== null),
    ...(d.meanPercent === null ? [] : [d.meanPercent]),
    ...(d.confidence95 === null ? [] : [d.confidence95.low, d.confidence95.high]),
  ].filter(Number.isFinite);
  const low = Math.min(...values);
  const high = Math.max(...values);
  if (!(high > low)) return undefined;
  const raw = (high - low) / 4;
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  const interval = ([1, 2, 2.5, 5, 10].find((m) => m * magnitude >= raw) ?? 10) * magnitude;
  // toPrecision: 0.1 × 3 is 0.30000000000000004, which the axis would print.
  const round = (v: number): number => Number(v.toPrecision(12));
  return {
    min: round(Math.floor(low / interval) * interval),
    max: round(Math.ceil(high / interval) * interval),
    interval: round(interval),
  };
}

/**
 * Where a panel's mean label goes: above its line, or below it when the line is near the top of the axis, where a
 * label above would run into the panel's title (one seed's mean is its bar's top, the axis's top).
 */
export function meanLabelPosition(
  range: { readonly min: number; readonly max: number } | undefined,
  mean: number,
): 'insideEndTop' | 'insideEndBottom' {
  if (range === undefined) return 'insideEndTop';
  return mean > range.max - 0.15 * (range.max - range.min) ? 'insideEndBottom' : 'insideEndTop';
}

function differencesChart(report: ArmsReport, arm: Arm, differences: readonly PairedDifference[]): Chart {
  const rows = Math.ceil(differences.length / PANELS.columns);
  const seeds = report.seeds.map(String);
  const grid: NonNullable<EChartsOption['grid']> = [];
  const xAxis: NonNullable<EChartsOption['xAxis']> = [];
  const yAxis: NonNullable<EChartsOption['yAxis']> = [];
  const title: NonNullable<EChartsOption['title']> = [];
  const series: BarSeriesOption[] = [];
  differences.forEach((d, i) => {
    const { left, top, width, height } = panelBox(PANELS, i);
    grid.push({ left, top, width, height, containLabel: false });
    title.push({
      text: `Δ ${METRIC_LABELS[d.metric]} (${isAbsolute(d) ? 'abs' : '%'})`,
      left: left + width / 2,
      top: top - 26,
      textAlign: 'center',
      textStyle: { fontSize: 13, fontWeight: 600, color: '#333' },
    });
    xAxis.push({
      gridIndex: i,
      type: 'category',
      data: seeds,
      name: 'seed',
      nameLocation: 'middle',
      nameGap: 22,
      axisLabel: { fontSize: 10, hideOverlap: true },
      axisTick: { show: false },
    });
    const range = valueAxisRange(d);
    yAxis.push({
      gridIndex: i,
      type: 'value',
      ...range,
      axisLabel: { fontSize: 10 },
      splitLine: { lineStyle: { color: '#eee' } },
    });
    const mean = d.meanPercent;
    const interval = d.confidence95;
    series.push({
      type: 'bar',
      name: metricLabel(d),
      xAxisIndex: i,
      yAxisIndex: i,
      barMaxWidth: 18,
      data: seedDifferences(d).map((p) =>
        p === null ? null : { value: p, itemStyle: { color: barColor(d.metric, p) } },
      ),
      ...(isAbsolute(d) ? {} : { tooltip: { valueFormatter: fmt('percent') } }),
      ...(mean === null
        ? {}
        : {
            markLine: {
              silent: true,
              symbol: 'none',
              // ECharts rounds the line's value to `precision` (2 by default) before placing it: a mean of −0.0084%
              // would be drawn at −0.01. The label is text of its own, so it keeps the page's formatting.
              precision: 20,
              lineStyle: { color: '#222', type: 'dashed', width: 1.5 },
              label: {
                formatter: `mean ${differenceText(d, mean)}`,
                position: meanLabelPosition(range, mean),
                fontSize: 10,
                backgroundColor: 'rgba(255, 255, 255, 0.85)',
                padding: [1, 3],
              },
              data: [{ yAxis: mean }],
            },
          }),
      ...(interval === null
        ? {}
        : {
            markArea: {
              silent: true,
              itemStyle: { color: 'rgba(0, 0, 0, 0.07)' },
              data: [[{ yAxis: interval.low }, { yAxis: interval.high }]],
            },
          }),
    });
  });
  return {
    id: `arms-${arm.name}`,
    title:
      `${arm.name} against ${report.baseline}: difference per seed, in percent of ${report.baseline}` +
      (differences.some(isAbsolute) ? ' (abs: in the metric’s units, where it was 0 on a seed)' : ''),
    width: WIDTH,
    // Panels placed in pixels: a narrower page scrolls them rather than cutting the last column off.
    minWidth: WIDTH,
    height: PANELS.top + rows * (PANELS.panelHeight + PANELS.gapY) - 20,
    option: { grid, xAxis, yAxis, title, series, tooltip: { trigger: 'item', confine: true } },
  };
}

interface SeedRow {
  readonly index: number;
  readonly seed: number;
}

/** The seed table's column of the caps `arm` ran under. */
function capColumn(report: ArmsReport, arm: string, header: string, whose: string): TableColumn<SeedRow> {
  const catalog = catalogsDiffer(report) ? ` on ${catalogName(report.catalogs[arm] ?? null)}` : '';
  return {
    header,
    description:
      report.capShare === null
        ? `${whose} $/h cap, as the arm's flags (--common's with them) set it.`
        : `${whose} --cap-dollars-per-hour: ${report.capShare} × the seed's uncapped peak $/h${catalog}.`,
    numeric: true,
    cell: (r) => dollarsOrDash(armCaps(report, arm)[r.index]),
  };
}

function seedTable(report: ArmsReport, arm: Arm, differences: readonly PairedDifference[]): string {
  const base = report.runs[report.baseline] ?? [];
  const runs = report.runs[arm.name] ?? [];
  const columns: TableColumn<SeedRow>[] = [
    {
      header: 'seed',
      description: 'Seed of the generated trace.',
      numeric: true,
      cell: (r) => String(r.seed),
    },
    // Arms on different catalogs ran under different caps (each its own catalog's share): a column each.
    ...(!capsShown(report, arm.name)
      ? []
      : sameCaps(report, arm.name)
        ? [capColumn(report, arm.name, 'cap $/h', "The run's")]
        : [report.baseline, arm.name].map((name) =>
            capColumn(report, name, `cap $/h ${name}`, `${name}'s runs'`),
          )),
    {
      header: `cost ${report.baseline}`,
      description: `Total cost of the baseline arm (${report.baseline}).`,
      numeric: true,
      cell: (r) => dollarsOrDash(base[r.index]?.totalCost),
    },
    {
      header: `cost ${arm.name}`,
      description: `Total cost of ${arm.name}.`,
      numeric: true,
      cell: (r) => dollarsOrDash(runs[r.index]?.totalCost),
    },
    ...differences.map((d) => ({
      header: `Δ ${metricLabel(d)}`,
      description: isAbsolute(d)
        ? `${arm.name}'s ${METRIC_LABELS[d.metric]} less ${report.baseline}'s (${absoluteReason(report, d)}: no percent).`
        : `${arm.name}'s ${METRIC_LABELS[d.metric]} against ${report.baseline}'s, in percent of ${report.baseline}'s.`,
      numeric: true,
      cell: (r: SeedRow) => differenceText(d, seedDifferences(d)[r.index]),
    })),
  ];
  return dataTable(
    `table-${arm.name}`,
    columns,
    report.seeds.map((seed, index) => ({ seed, index })),
  );
}

export function armsHtml(report: ArmsReport): string {
  const compared = report.arms.slice(1);
  const sections = compared.map((arm) => {
    const differences = report.comparisons[arm.name] ?? [];
    const chart = differencesChart(report, arm, differences);
    const catalogs = armCatalogsText(report, arm);
    const notes = [
      ...(catalogs === null ? [] : [`${catalogs}.`]),
      ...differences
        .filter(isAbsolute)
        .map((d) => `${METRIC_LABELS[d.metric]}: in the metric's units, as ${absoluteReason(report, d)}.`),
      ...oneSidedNotes(report, arm).map((n) => `${n}.`),
    ];
    return (
      `<section id="arm-${escapeXml(arm.name)}"><h2>${escapeXml(`${arm.name} against ${report.baseline}`)}</h2>` +
      `<p class="lead">${escapeXml(armSentence(report, arm, differences))}</p>` +
      (notes.length === 0
        ? ''
        : `<ul class="notes">${notes.map((n) => `<li>${escapeXml(n)}</li>`).join('')}</ul>`) +
      `<figure><h3>${escapeXml(chart.title)}</h3>${chartHtml(chart)}<figcaption>${escapeXml(
        'One bar per seed: green lower than the baseline, red higher (peak $/h and spot share in blue: neither is ' +
          'better lower). Dashed: the mean difference; shaded: its 95% confidence interval. A seed without a bar did not ' +
          'measure the metric, or the baseline was 0.',
      )}</figcaption></figure>` +
      `<h3>Over the seeds</h3>${dataTable(`summary-${arm.name}`, SUMMARY_COLUMNS, differences)}` +
      `<h3>Seed by seed</h3>${seedTable(report, arm, differences)}</section>`
    );
  });
  // One catalog for every arm is said once; arms on different catalogs each name their own.
  const differ = catalogsDiffer(report);
  const left = leftOutText(report);
  const settings: Record<string, string | number> = {
    seeds: report.seeds.join(', '),
    ...(left === null ? {} : { 'left out': (report.leftOut ?? []).map((l) => l.seed).join(', ') }),
    common: report.common.join(' '),
    ...Object.fromEntries(
      report.arms.map((a, i) => [
        `arm ${a.name}${i === 0 ? ' (baseline)' : ''}`,
        armFlagsText(report, a) + (differ ? ` (on ${catalogName(report.catalogs[a.name] ?? null)})` : ''),
      ]),
    ),
    ...(differ ? {} : { catalog: catalogName(report.catalogs[report.baseline] ?? null) }),
    'cap share': report.capShare === null ? 'none (the arms set their own caps, if any)' : report.capShare,
    ...(report.peaksFrom === null ? {} : { 'uncapped peaks from': report.peaksFrom }),
  };
  return htmlPage(
    {
      title: 'fleetwise bench arms',
      heading: `fleetwise bench arms: ${compared.map((a) => a.name).join(', ')} against ${report.baseline}`,
      style: BASE_STYLE,
      bundle: 'full',
    },
    settings,
    [...(left === null ? [] : [leftOutSection(left)]), ...sections],
  );
}

/** The seeds left out and the runs that failed, before the comparisons made without them. */
function leftOutSection(left: { readonly lead: string; readonly failed: readonly string[] }): string {
  // Another build's error quotes its stderr, whose lines are kept.
  const items = left.failed.map((f) => `<li style="white-space: pre-wrap">${escapeXml(f)}</li>`);
  return (
    `<section id="left-out"><h2>Seeds left out</h2><p class="lead">${escapeXml(`${left.lead}.`)}</p>` +
    `<ul class="notes">${items.join('')}</ul></section>`
  );
}
