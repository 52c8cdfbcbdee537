import type { ScatterSeriesOption } from 'echarts';
import type { ObjectiveName } from '../../queue/tune.js';
import { chartHtml, fmt, type Chart } from '../../report/chart.js';
import { escapeXml } from '../../report/escape.js';
import { BASE_STYLE, dataTable, htmlPage, type TableColumn } from './page.js';
import { money } from './format.js';
import type { TuneReport, TuneRow } from './tune-json.js';

/**
 * tune.html: self-contained like report.html (ECharts inline). The recommendation in words and as controller YAML;
 * two scatter charts of the evaluated configs (mean JCT against p99 prediction error and against unfairness, the
 * third objective as colour; the front outlined and labelled, the recommended one ringed); what the objectives and
 * parameters mean; then every config in a table.
 */
const LABEL: Readonly<Record<ObjectiveName, string>> = {
  meanJctHours: 'mean JCT (hours)',
  predErrP99: 'p99 prediction error (%)',
  unfairness: 'mean unfairness (%)',
};

const WIDTH = 1120;
const HEIGHT = 440;
const RECOMMENDED_COLOR = '#d62728';
/** Viridis stops (perceptually uniform, colour-blind safe): low = dark purple, high = yellow. */
const VIRIDIS = ['#440154', '#3b528b', '#21918c', '#5ec962', '#fde725'];
/**
 * Points closer than this share of both axes' spans are drawn apart, on a small circle around their common spot: two
 * configs with (nearly) the same results would otherwise hide each other. Tooltips give the exact values.
 */
const OVERLAP_SHARE = 0.015;
const SPREAD_SHARE = 0.012;

/** Decimals each objective is given with, in the table and at both ends of a colour bar alike. */
const DIGITS: Readonly<Record<ObjectiveName, number>> = { meanJctHours: 3, predErrP99: 1, unfairness: 1 };

function num(v: number | null, digits: number): string {
  return v === null ? '–' : v.toFixed(digits);
}

/** A size threshold in hours of task time (task-seconds in the config): what a reader compares to job lengths. */
export function hoursOfTaskTime(seconds: number): string {
  const h = seconds / 3600;
  return `${h >= 100 ? h.toFixed(0) : h >= 10 ? h.toFixed(1) : h.toFixed(2)} h`;
}

function thresholdList(r: TuneRow): string[] {
  return r.thresholdsSeconds.map((t, i) => `≤${hoursOfTaskTime(t)} (p${r.thresholdPercentiles[i] ?? '?'})`);
}

function thresholds(r: TuneRow): string {
  return thresholdList(r).join(', ');
}

export function describeConfig(r: TuneRow): string {
  if (r.classes === 1) return `1 class, ${r.ordering}`;
  const ceiling = r.largestClassMaxShare === null ? '' : `, largest class at most ${r.largestClassMaxShare}`;
  return `${r.classes} classes ${thresholds(r)}, weights ${r.weights.join('/')}, 𝒲 ${r.decay.toFixed(2)}, ${r.ordering}${ceiling}`;
}

function tip(r: TuneRow, moved: boolean): string {
  return (
    `${r.id}${r.onFront ? ' (Pareto front)' : ''}: ${describeConfig(r)}\n` +
    `mean JCT ${num(r.meanJctHours, 3)} h · p99 prediction error ${num(r.predErrP99, 1)}% · ` +
    `unfairness ${num(r.unfairness, 1)}% · cost $${num(r.totalCost, 2)}` +
    (moved ? '\n(drawn slightly apart from a config with nearly the same results)' : '')
  );
}

interface Placed {
  readonly row: TuneRow;
  readonly x: number;
  readonly y: number;
  readonly moved: boolean;
}

/**
 * Positions of the points: each at its values, except that a group of points closer than OVERLAP_SHARE of the spans
 * is spread evenly on a circle around its first member, in row order (deterministic).
 */
function place(rows: readonly TuneRow[], y: ObjectiveName): Placed[] {
  const xs = rows.map((r) => r.meanJctHours as number);
  const ys = rows.map((r) => r[y] as number);
  const span = (v: number[]): number => Math.max(...v) - Math.min(...v) || Math.abs(v[0] ?? 1) || 1;
  const [sx, sy] = [span(xs), span(ys)];
  const groups: number[][] = [];
  rows.forEach((_, i) => {
    const group = groups.find((g) => {
      const j = g[0] as number;
      return (
        Math.abs((xs[i] as number) - (xs[j] as number)) < OVERLAP_SHARE * sx &&
        Math.abs((ys[i] as number) - (ys[j] as number)) < OVERLAP_SHARE * sy
      );
    });
    if (group === undefined) groups.push([i]);
    else group.push(i);
  });
  const placed: Placed[] = [];
  for (const g of groups)
    g.forEach((i, k) => {
      const angle = (2 * Math.PI * k) / g.length + Math.PI / 4;
      const moved = g.length > 1;
      const [x0, y0] = [xs[g[0] as number] as number, ys[g[0] as number] as number];
      // The objectives are never negative: a config at 0 (exact predictions) is spread along 0, not below it.
      placed.push({
        row: rows[i] as TuneRow,
        x: Math.max(Math.min(x0, 0), x0 + (moved ? SPREAD_SHARE * sx * Math.cos(angle) : 0)),
        y: Math.max(Math.min(y0, 0), y0 + (moved ? SPREAD_SHARE * sy * Math.sin(angle) * 2 : 0)),
        moved,
      });
    });
  return placed.sort((a, b) => rows.indexOf(a.row) - rows.indexOf(b.row));
}

/** One scatter chart: x = mean JCT, y and colour = the other two objectives. */
export function scatterChart(
  id: string,
  rows: readonly TuneRow[],
  recommendedId: string,
  y: ObjectiveName,
  colour: ObjectiveName,
): { chart: Chart; missing: TuneRow[] } {
  const plotted = rows.filter((r) => r.meanJctHours !== null && r[y] !== null);
  const missing = rows.filter((r) => !plotted.includes(r));
  const placed = place(plotted, y);
  const cs = plotted.flatMap((r) => (r[colour] === null ? [] : [r[colour]]));
  const [cLo, cHi] = cs.length === 0 ? [0, 1] : [Math.min(...cs), Math.max(...cs)];
  const item = (p: Placed) => ({
    name: p.row.id,
    value: [p.x, p.y, p.row[colour] ?? '-'],
    tip: tip(p.row, p.moved),
  });
  const front = placed.filter((p) => p.row.onFront);
  const rest = placed.filter((p) => !p.row.onFront);
  const recommended = placed.filter((p) => p.row.id === recommendedId);
  const series: ScatterSeriesOption[] = [
    {
      type: 'scatter',
      name: 'dominated',
      symbolSize: 9,
      itemStyle: { opacity: 0.75 },
      label: { show: true, formatter: '{b}', position: 'right', color: '#777' },
      labelLayout: { moveOverlap: 'shiftY' },
      data: rest.map(item),
    },
    {
      type: 'scatter',
      name: 'Pareto front',
      symbolSize: 14,
      itemStyle: { borderColor: '#111', borderWidth: 1.5 },
      // Clear of the recommended config's ring.
      label: {
        show: true,
        formatter: '{b}',
        position: 'right',
        distance: 10,
        fontWeight: 600,
        color: '#222',
      },
      labelLayout: { moveOverlap: 'shiftY' },
      data: front.map(item),
    },
    {
      type: 'scatter',
      name: 'recommended',
      symbol: 'circle',
      symbolSize: 26,
      silent: true,
      z: 1,
      itemStyle: { color: 'rgba(0,0,0,0)', borderColor: RECOMMENDED_COLOR, borderWidth: 2.5 },
      data: recommended.map((p) => ({ name: p.row.id, value: [p.x, p.y] })),
    },
  ];
  const title = `${LABEL[y]} against ${LABEL.meanJctHours}; colour: ${LABEL[colour]}`;
  return {
    missing,
    chart: {
      id,
      title,
      width: WIDTH,
      height: HEIGHT,
      option: {
        legend: {
          top: 0,
          // Room for the names as a browser draws them: the static SVG is laid out in Node, which measures text
          // narrower, and ECharts' 10 px ran each name into the next entry's symbol there.
          itemGap: 24,
          data: [
            {
              name: 'Pareto front',
              icon: 'circle',
              itemStyle: { color: '#fff', borderColor: '#111', borderWidth: 1.5 },
            },
            { name: 'dominated', icon: 'circle', itemStyle: { color: '#999' } },
            {
              name: 'recommended',
              icon: 'circle',
              itemStyle: { color: '#fff', borderColor: RECOMMENDED_COLOR, borderWidth: 2.5 },
            },
          ],
        },
        tooltip: { trigger: 'item', confine: true, formatter: fmt('tip') },
        grid: { left: 80, right: 170, top: 44, bottom: 56 },
        xAxis: {
          type: 'value',
          name: LABEL.meanJctHours,
          nameLocation: 'middle',
          nameGap: 30,
          // Room past the outermost configs, so that none is drawn on an axis over its tick labels.
          ...roomAround(placed.map((p) => p.x)),
        },
        yAxis: {
          type: 'value',
          name: LABEL[y],
          nameLocation: 'middle',
          nameGap: 50,
          ...roomAround(placed.map((p) => p.y)),
        },
        visualMap: {
          type: 'continuous',
          dimension: 2,
          seriesIndex: [0, 1],
          min: cLo,
          max: cHi > cLo ? cHi : cLo + 1,
          inRange: { color: VIRIDIS },
          outOfRange: { color: '#b0b0b0' },
          calculable: false,
          orient: 'vertical',
          right: 20,
          top: 'middle',
          itemHeight: 200,
          text: [`${LABEL[colour]}\nhigh: ${num(cHi, DIGITS[colour])}`, `low: ${num(cLo, DIGITS[colour])}`],
          textGap: 8,
          textStyle: { lineHeight: 18 },
          formatter: '{value}',
          precision: 0,
        },
        series,
      },
    },
  };
}

/** A share of the configs' spread added beyond them on each axis. */
const AXIS_ROOM_SHARE = 0.08;
const AXIS_ROOM: [string, string] = [`${100 * AXIS_ROOM_SHARE}%`, `${100 * AXIS_ROOM_SHARE}%`];

/**
 * An axis fitted to the configs with room on both sides, except below 0: every objective is a time or a percentage
 * that cannot be negative, so where the room would reach past 0 the axis starts at 0 (not at −20%).
 */
function roomAround(values: readonly number[]): {
  scale: true;
  boundaryGap: [string, string];
  min?: number;
} {
  const lo = Math.min(...values);
  const hi = Math.max(...values);
  const reachesBelowZero = values.length > 0 && lo >= 0 && lo - AXIS_ROOM_SHARE * (hi - lo) <= 0;
  return { scale: true, boundaryGap: AXIS_ROOM, ...(reachesBelowZero ? { min: 0 } : {}) };
}

const STYLE = `${BASE_STYLE}
  tr.front td { font-weight: 600; } tr.recommended td { background: #fff3d6; }
  pre { background: #f6f6f6; padding: 8px 12px; overflow-x: auto; }
  dl.terms { display: grid; grid-template-columns: max-content 1fr; gap: 4px 14px; }
  dl.terms dt { font-weight: 600; } dl.terms dd { margin: 0; }
`;

const UNFAIRNESS =
  'How much longer a job took than it would with a fair share of the capped fleet: 100 × max(0, JCT ÷ fair-share ' +
  'time − 1), averaged over jobs; 0 = every job got at least its fair share, 100 = jobs took twice as long on average.';
const PRED_ERR =
  'Error of the completion time predicted when the job was submitted: |actual − predicted| ÷ predicted, in percent; ' +
  'p99 = the 99th percentile over jobs.';
const DECAY =
  'The weight decay 𝒲 sets the classes’ weights: class i (0 = smallest jobs) gets a weight ∝ e^(−i·𝒲). 𝒲 > 0 ' +
  'favours small jobs, 0 gives equal weights, 𝒲 < 0 favours large ones.';
const THRESHOLDS =
  'Jobs are classed by size, their total task time (tasks × duration): a class takes jobs up to its threshold, ' +
  'here in hours, chosen at a percentile (p50 = the median) of the trace’s job sizes; the last class takes the rest.';

const THRESHOLDS_COLUMN: TableColumn<TuneRow> = {
  header: 'thresholds',
  description: THRESHOLDS,
  numeric: false,
  cell: thresholds,
};

/** The weights ahead of the thresholds, which run long: together they say how the fleet is shared. */
const COLUMNS: readonly TableColumn<TuneRow>[] = [
  { header: 'id', description: 'The config’s name in this report.', numeric: false, cell: (r) => r.id },
  {
    header: 'front',
    description:
      '★ when on the Pareto front: no other config is at least as good on all three objectives and better on one.',
    numeric: false,
    cell: (r) => (r.onFront ? '★' : ''),
  },
  {
    header: 'mean JCT h',
    description: 'Mean job completion time (objective; lower is better).',
    numeric: true,
    cell: (r) => num(r.meanJctHours, DIGITS.meanJctHours),
  },
  {
    header: 'p99 pred. err %',
    description: `${PRED_ERR} (objective)`,
    numeric: true,
    cell: (r) => num(r.predErrP99, DIGITS.predErrP99),
  },
  {
    header: 'unfairness %',
    description: `${UNFAIRNESS} (objective)`,
    numeric: true,
    cell: (r) => num(r.unfairness, DIGITS.unfairness),
  },
  {
    header: 'cost $',
    description: 'What the simulated run cost in all under the cap.',
    numeric: true,
    cell: (r) => (r.totalCost === null ? '–' : money(r.totalCost)),
  },
  {
    header: 'p99 JCT h',
    description: '99th percentile of job completion time.',
    numeric: true,
    cell: (r) => num(r.p99JctHours, 3),
  },
  {
    header: 'mean pred. err %',
    description: 'Mean prediction error, as above.',
    numeric: true,
    cell: (r) => num(r.predErrAvg, 1),
  },
  {
    header: 'classes',
    description: 'Number of job classes (queues sharing the capped fleet by weight).',
    numeric: true,
    cell: (r) => String(r.classes),
  },
  {
    header: 'weights',
    description: 'Each class’s share of the capped fleet when all are busy, smallest jobs first.',
    numeric: false,
    cell: (r) => r.weights.join(' / '),
  },
  THRESHOLDS_COLUMN,
  {
    header: '𝒲',
    description: DECAY,
    numeric: true,
    cell: (r) => (r.classes === 1 ? '–' : r.decay.toFixed(2)),
  },
  {
    header: 'ordering',
    description: 'Order of jobs within a class (fifo: by arrival).',
    numeric: false,
    cell: (r) => r.ordering,
  },
  {
    header: 'largest max share',
    description: 'Ceiling on the largest-jobs class’s share of the fleet; – for none.',
    numeric: true,
    cell: (r) => (r.largestClassMaxShare === null ? '–' : String(r.largestClassMaxShare)),
  },
  {
    header: 'source',
    description:
      'How the config was chosen: anchor (FIFO or the default WFQ config), grid (percentile × 𝒲 grid) or random.',
    numeric: false,
    cell: (r) => r.source,
  },
  {
    header: 'error',
    description: 'Why the simulation failed, if it did.',
    numeric: false,
    cell: (r) => r.error ?? '',
  },
];

/** A cell's markup: thresholds one to a line, since three on one line pushed the columns after them off the page. */
function cellHtml(column: TableColumn<TuneRow>, row: TuneRow): string {
  return column === THRESHOLDS_COLUMN
    ? thresholdList(row).map(escapeXml).join('<br>')
    : escapeXml(column.cell(row));
}

function table(report: TuneReport): string {
  return dataTable(
    'tune-table',
    COLUMNS,
    report.evaluated,
    (r) => {
      const cls = [r.onFront ? 'front' : '', r.id === report.recommended.id ? 'recommended' : '']
        .filter((c) => c !== '')
        .join(' ');
      return cls === '' ? '' : ` class="${cls}"`;
    },
    cellHtml,
  );
}

/** "1 config", "6 configs". */
const configs = (n: number): string => `${n} config${n === 1 ? '' : 's'}`;

function figure(
  report: TuneReport,
  id: string,
  y: ObjectiveName,
  colour: ObjectiveName,
  caption: string,
): string {
  const { chart, missing } = scatterChart(id, report.evaluated, report.recommended.id, y, colour);
  const note =
    missing.length === 0
      ? ''
      : ` Not drawn, without a ${LABEL[y]} or a mean JCT: ${missing.map((r) => r.id).join(', ')}.`;
  return `<figure><h3>${escapeXml(chart.title)}</h3>${chartHtml(chart)}<figcaption>${escapeXml(caption + note)}</figcaption></figure>`;
}

export function tuneHtml(report: TuneReport): string {
  const rec = report.recommended;
  const lead =
    `<p class="lead" id="lead">Recommended (${escapeXml(rec.preference)}): <strong>${escapeXml(rec.id)}</strong>, ` +
    `${escapeXml(describeConfig(rec))}.</p>` +
    `<p>${escapeXml(
      `Mean JCT ${num(rec.meanJctHours, 3)} h, p99 prediction error ${num(rec.predErrP99, 1)}%, unfairness ` +
        `${num(rec.unfairness, 1)}%, cost ${rec.totalCost === null ? '–' : `$${money(rec.totalCost)}`}; ${configs(report.evaluated.length)} simulated, ` +
        `${report.front.length} on the Pareto front.`,
    )}</p>`;
  return htmlPage(
    {
      title: 'fleetwise tune report',
      heading: 'fleetwise tune: WFQ configs on the Pareto front',
      style: STYLE,
      bundle: 'full',
    },
    report.settings,
    [
      lead,
      `<section id="recommended"><h2>For the controller config</h2><pre id="controller-yaml">${escapeXml(report.controllerYaml)}</pre></section>`,
      '<section id="charts"><h2>Trade-offs</h2>',
      figure(
        report,
        'chart-jct-pred',
        'predErrP99',
        'unfairness',
        'Each point is one simulated WFQ config; all three objectives are minimised, so better is down and left. ' +
          'Outlined and labelled: the Pareto front; ringed red: the recommended config. Hover a point for its config.',
      ),
      figure(
        report,
        'chart-jct-unfairness',
        'unfairness',
        'predErrP99',
        'The same configs against unfairness, coloured by p99 prediction error. Configs with nearly the same ' +
          'results are drawn slightly apart.',
      ),
      '</section>',
      '<section id="terms"><h2>What the objectives and parameters mean</h2><dl class="terms">' +
        `<dt>mean JCT</dt><dd>${escapeXml('Mean job completion time: end − arrival, queueing included.')}</dd>` +
        `<dt>p99 prediction error</dt><dd>${escapeXml(PRED_ERR)}</dd>` +
        `<dt>unfairness</dt><dd>${escapeXml(UNFAIRNESS)}</dd>` +
        `<dt>thresholds</dt><dd>${escapeXml(THRESHOLDS)}</dd>` +
        `<dt>𝒲 (weight decay)</dt><dd>${escapeXml(DECAY)}</dd>` +
        '</dl></section>',
      `<section id="configs"><h2>Evaluated configs (${report.evaluated.length}, ${report.front.length} on the front)</h2>${table(report)}</section>`,
    ],
  );
}
