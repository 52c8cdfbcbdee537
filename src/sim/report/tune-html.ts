import type { ObjectiveName } from '../../queue/tune.js';
import { escapeXml } from '../../report/escape.js';
import { BASE_STYLE, htmlPage } from './page.js';
import { niceStep } from '../../report/svg-chart.js';
import type { TuneReport, TuneRow } from './tune-json.js';

/**
 * tune.html: self-contained (inline SVG and CSS, no scripts or URLs, like report.html). Two scatter charts of the
 * evaluated configs (mean JCT against p99 prediction error and against unfairness, the third objective as colour),
 * front points outlined and labelled, the recommended one ringed; then the table and the controller snippet.
 */
const LABEL: Readonly<Record<ObjectiveName, string>> = {
  meanJctHours: 'mean JCT (hours)',
  predErrP99: 'p99 prediction error (%)',
  unfairness: 'mean unfairness (%)',
};

/** Colour legend titles: short, the legend column is narrow. */
const SHORT: Readonly<Record<ObjectiveName, string>> = {
  meanJctHours: 'mean JCT h',
  predErrP99: 'p99 pred. error %',
  unfairness: 'unfairness %',
};

const WIDTH = 960;
const HEIGHT = 400;
const M = { left: 72, right: 150, top: 52, bottom: 52 } as const;
/** Points without a y value are drawn in a band above the plot. */
const NA_BAND = 22;

/** Viridis stops (perceptually uniform, colour-blind safe): low = dark purple, high = yellow. */
const VIRIDIS = ['#440154', '#3b528b', '#21918c', '#5ec962', '#fde725'] as const;
const MISSING_COLOUR = '#b0b0b0';
/** Inline, so no stylesheet rule for front points (black outline) can override the ring's colour. */
const RING_STYLE = 'fill:none;stroke:#d62728;stroke-width:2.5;opacity:1';

function hexToRgb(hex: string): [number, number, number] {
  const n = Number.parseInt(hex.slice(1), 16);
  return [(n >> 16) & 255, (n >> 8) & 255, n & 255];
}

/** Colour of t ∈ [0, 1] on the viridis ramp. */
export function rampColour(t: number): string {
  const x = Math.min(1, Math.max(0, t)) * (VIRIDIS.length - 1);
  const i = Math.min(VIRIDIS.length - 2, Math.floor(x));
  const a = hexToRgb(VIRIDIS[i] as string);
  const b = hexToRgb(VIRIDIS[i + 1] as string);
  const f = x - i;
  const c = a.map((v, k) => Math.round(v + ((b[k] as number) - v) * f));
  return `#${c.map((v) => v.toString(16).padStart(2, '0')).join('')}`;
}

const px = (v: number): string => (Math.round(v * 10) / 10).toString();

interface Axis {
  readonly lo: number;
  readonly hi: number;
  readonly ticks: number[];
}

function axisOf(values: readonly number[]): Axis {
  let lo = Math.min(...values);
  let hi = Math.max(...values);
  if (!Number.isFinite(lo)) [lo, hi] = [0, 1];
  if (hi <= lo) [lo, hi] = lo === 0 ? [0, 1] : [lo * 0.9, hi * 1.1];
  const step = niceStep(hi - lo, 5);
  lo = Math.floor(lo / step) * step;
  hi = Math.ceil(hi / step) * step;
  const ticks: number[] = [];
  for (let t = lo; t <= hi + step * 1e-9; t += step) ticks.push(Number(t.toPrecision(12)));
  return { lo, hi, ticks };
}

function tickText(v: number): string {
  return new Intl.NumberFormat('en-US', { maximumSignificantDigits: 4 }).format(v);
}

function num(v: number | null, digits: number): string {
  return v === null ? '–' : v.toFixed(digits);
}

export function describeConfig(r: TuneRow): string {
  if (r.classes === 1) return `1 class, ${r.ordering}`;
  const limits = r.thresholdsSeconds.map((t, i) => `≤${t} s (p${r.thresholdPercentiles[i] ?? '?'})`);
  const ceiling = r.largestClassMaxShare === null ? '' : `, largest class at most ${r.largestClassMaxShare}`;
  return `${r.classes} classes ${limits.join(', ')}, weights ${r.weights.join('/')}, 𝒲 ${r.decay.toFixed(2)}, ${r.ordering}${ceiling}`;
}

function tooltip(r: TuneRow): string {
  return (
    `${r.id}: ${describeConfig(r)}\nmean JCT ${num(r.meanJctHours, 3)} h, p99 pred err ${num(r.predErrP99, 1)} %, ` +
    `unfairness ${num(r.unfairness, 1)} %`
  );
}

/** One scatter chart: x = mean JCT, y and colour = the other two objectives. */
export function scatterSvg(
  id: string,
  rows: readonly TuneRow[],
  recommendedId: string,
  y: ObjectiveName,
  colour: ObjectiveName,
): string {
  const plotted = rows.filter((r) => r.meanJctHours !== null);
  const xs = plotted.map((r) => r.meanJctHours as number);
  const ys = plotted.flatMap((r) => (r[y] === null ? [] : [r[y]]));
  const cs = plotted.flatMap((r) => (r[colour] === null ? [] : [r[colour]]));
  const xAxis = axisOf(xs);
  const yAxis = axisOf(ys);
  const [cLo, cHi] = [Math.min(...cs), Math.max(...cs)];
  const left = M.left;
  const right = WIDTH - M.right;
  const top = M.top;
  const bottom = HEIGHT - M.bottom;
  const toX = (v: number): number => left + ((v - xAxis.lo) / (xAxis.hi - xAxis.lo)) * (right - left);
  const toY = (v: number | null): number =>
    v === null ? top - NA_BAND / 2 - 4 : bottom - ((v - yAxis.lo) / (yAxis.hi - yAxis.lo)) * (bottom - top);
  const colourOf = (v: number | null): string =>
    v === null ? MISSING_COLOUR : rampColour(cHi > cLo ? (v - cLo) / (cHi - cLo) : 0.5);
  const title = `${LABEL[y]} vs ${LABEL.meanJctHours}; colour: ${LABEL[colour]}`;
  const out: string[] = [
    `<svg id="${id}" class="chart" viewBox="0 0 ${WIDTH} ${HEIGHT}" width="${WIDTH}" height="${HEIGHT}" role="img" aria-labelledby="${id}-title">`,
    `<title id="${id}-title">${escapeXml(title)}</title>`,
    `<text x="${px((left + right) / 2)}" y="18" text-anchor="middle" class="chart-title">${escapeXml(title)}</text>`,
  ];
  for (const t of yAxis.ticks) {
    const ty = toY(t);
    out.push(
      `<line class="grid" x1="${left}" x2="${right}" y1="${px(ty)}" y2="${px(ty)}"/>`,
      `<text x="${left - 6}" y="${px(ty + 4)}" text-anchor="end" class="tick">${escapeXml(tickText(t))}</text>`,
    );
  }
  for (const t of xAxis.ticks) {
    const tx = toX(t);
    out.push(
      `<line class="grid" x1="${px(tx)}" x2="${px(tx)}" y1="${top}" y2="${bottom}"/>`,
      `<text x="${px(tx)}" y="${bottom + 16}" text-anchor="middle" class="tick">${escapeXml(tickText(t))}</text>`,
    );
  }
  if (plotted.some((r) => r[y] === null))
    out.push(
      `<rect class="na" x="${left}" y="${top - NA_BAND - 4}" width="${right - left}" height="${NA_BAND}"/>`,
      `<text x="${left - 6}" y="${px(toY(null) + 4)}" text-anchor="end" class="tick">n/a</text>`,
    );
  out.push(
    `<path class="axis" d="M${left} ${top}V${bottom}H${right}"/>`,
    `<text x="${px((left + right) / 2)}" y="${bottom + 38}" text-anchor="middle" class="axis-label">${escapeXml(LABEL.meanJctHours)}</text>`,
    `<text transform="translate(16 ${px((top + bottom) / 2)}) rotate(-90)" text-anchor="middle" class="axis-label">${escapeXml(LABEL[y])}</text>`,
  );
  if (plotted.length === 0)
    out.push(
      `<text x="${px((left + right) / 2)}" y="${px((top + bottom) / 2)}" text-anchor="middle" class="empty">no data</text>`,
    );
  // Dominated points first, so the front is drawn on top.
  const ordered = [...plotted.filter((r) => !r.onFront), ...plotted.filter((r) => r.onFront)];
  // Front points at (nearly) the same spot share one label, "c2, c4", instead of overprinting.
  const labels: { x: number; y: number; ids: string[] }[] = [];
  for (const r of ordered) {
    const x = toX(r.meanJctHours as number);
    const yy = toY(r[y]);
    const cls = r.onFront ? 'point front' : 'point';
    out.push(
      `<g class="${cls}" data-id="${escapeXml(r.id)}"><title>${escapeXml(tooltip(r))}</title>`,
      `<circle cx="${px(x)}" cy="${px(yy)}" r="${r.onFront ? 6 : 4}" fill="${colourOf(r[colour])}"/>`,
    );
    if (r.id === recommendedId)
      out.push(`<circle class="recommended" cx="${px(x)}" cy="${px(yy)}" r="11" style="${RING_STYLE}"/>`);
    out.push('</g>');
    if (!r.onFront) continue;
    const near = labels.find((l) => Math.abs(l.x - x) < 8 && Math.abs(l.y - yy) < 8);
    if (near === undefined) labels.push({ x, y: yy, ids: [r.id] });
    else near.ids.push(r.id);
  }
  for (const l of labels)
    out.push(
      `<text x="${px(l.x + 9)}" y="${px(l.y - 7)}" class="point-label">${escapeXml(l.ids.join(', '))}</text>`,
    );
  // Colour legend: five swatches from low to high, grey for missing values.
  const lx = right + 24;
  out.push(
    `<g class="legend"><text x="${lx}" y="${top}" class="legend-label">${escapeXml(SHORT[colour])}</text>`,
  );
  if (cs.length > 0)
    [0, 0.25, 0.5, 0.75, 1].forEach((t, i) => {
      const v = cLo + t * (cHi - cLo);
      const ly = top + 14 + i * 20;
      out.push(
        `<rect x="${lx}" y="${ly}" width="14" height="14" fill="${rampColour(t)}"/>`,
        `<text x="${lx + 20}" y="${ly + 11}" class="legend-label">${escapeXml(tickText(v))}</text>`,
      );
    });
  const ly = top + 14 + (cs.length > 0 ? 5 : 0) * 20;
  out.push(
    `<rect x="${lx}" y="${ly}" width="14" height="14" fill="${MISSING_COLOUR}"/>`,
    `<text x="${lx + 20}" y="${ly + 11}" class="legend-label">n/a</text>`,
    `<circle cx="${lx + 7}" cy="${ly + 40}" r="6" fill="#fff" stroke="#000" stroke-width="1.5"/>`,
    `<text x="${lx + 20}" y="${ly + 44}" class="legend-label">Pareto front</text>`,
    `<circle class="recommended" cx="${lx + 7}" cy="${ly + 66}" r="9" style="${RING_STYLE}"/>`,
    `<text x="${lx + 20}" y="${ly + 70}" class="legend-label">recommended</text>`,
    '</g></svg>',
  );
  return out.join('');
}

const STYLE = `${BASE_STYLE}
  tr.front td { font-weight: 600; } tr.recommended td { background: #fff3d6; }
  pre { background: #f6f6f6; padding: 8px 12px; overflow-x: auto; }
  svg.chart { max-width: 100%; height: auto; font: 11px system-ui, sans-serif; }
  svg.chart .chart-title { font-size: 14px; font-weight: 600; }
  svg.chart .grid { stroke: #e6e6e6; stroke-width: 1; }
  svg.chart .axis { stroke: #888; fill: none; }
  svg.chart .tick { fill: #555; } svg.chart .axis-label { fill: #333; font-size: 12px; }
  svg.chart .na { fill: #f4f4f4; }
  svg.chart .point circle { stroke: none; opacity: 0.7; }
  svg.chart .point.front circle { stroke: #000; stroke-width: 1.5; opacity: 1; }
  svg.chart .point-label { fill: #222; font-size: 11px; }
  svg.chart .legend-label { fill: #333; font-size: 11px; } svg.chart .empty { fill: #999; font-size: 14px; }
`;

const COLUMNS: readonly { header: string; numeric: boolean; cell: (r: TuneRow) => string }[] = [
  { header: 'id', numeric: false, cell: (r) => r.id },
  { header: 'front', numeric: false, cell: (r) => (r.onFront ? '★' : '') },
  { header: 'source', numeric: false, cell: (r) => r.source },
  { header: 'classes', numeric: true, cell: (r) => String(r.classes) },
  {
    header: 'thresholds (s, percentile)',
    numeric: false,
    cell: (r) => r.thresholdsSeconds.map((t, i) => `${t} (p${r.thresholdPercentiles[i] ?? '?'})`).join(', '),
  },
  { header: 'weights', numeric: false, cell: (r) => r.weights.join(' / ') },
  { header: '𝒲', numeric: true, cell: (r) => (r.classes === 1 ? '–' : r.decay.toFixed(2)) },
  { header: 'ordering', numeric: false, cell: (r) => r.ordering },
  {
    header: 'largest max share',
    numeric: true,
    cell: (r) => (r.largestClassMaxShare === null ? '–' : String(r.largestClassMaxShare)),
  },
  { header: 'mean JCT h', numeric: true, cell: (r) => num(r.meanJctHours, 3) },
  { header: 'p99 JCT h', numeric: true, cell: (r) => num(r.p99JctHours, 3) },
  { header: 'pred err avg %', numeric: true, cell: (r) => num(r.predErrAvg, 1) },
  { header: 'pred err p99 %', numeric: true, cell: (r) => num(r.predErrP99, 1) },
  { header: 'unfairness %', numeric: true, cell: (r) => num(r.unfairness, 1) },
  { header: 'cost $', numeric: true, cell: (r) => num(r.totalCost, 2) },
  { header: 'error', numeric: false, cell: (r) => r.error ?? '' },
];

function table(report: TuneReport): string {
  const head = COLUMNS.map((c) => `<th${c.numeric ? ' class="num"' : ''}>${escapeXml(c.header)}</th>`).join(
    '',
  );
  const rows = report.evaluated.map((r) => {
    const cls = [r.onFront ? 'front' : '', r.id === report.recommended.id ? 'recommended' : '']
      .filter((c) => c !== '')
      .join(' ');
    const cells = COLUMNS.map(
      (c) => `<td${c.numeric ? ' class="num"' : ''}>${escapeXml(c.cell(r))}</td>`,
    ).join('');
    return `<tr${cls === '' ? '' : ` class="${cls}"`}>${cells}</tr>`;
  });
  return `<div class="table-wrap"><table id="tune-table"><thead><tr>${head}</tr></thead><tbody>${rows.join('\n')}</tbody></table></div>`;
}

export function tuneHtml(report: TuneReport): string {
  const rec = report.recommended;
  return htmlPage(
    {
      title: 'fleetwise tune report',
      heading: 'fleetwise tune: WFQ configs on the Pareto front',
      style: STYLE,
      bundle: 'full',
    },
    report.settings,
    [
      `<section id="recommended"><h2>Recommended (${escapeXml(rec.preference)})</h2>` +
        `<p>${escapeXml(`${rec.id}: ${describeConfig(rec)}; mean JCT ${num(rec.meanJctHours, 3)} h, p99 prediction error ${num(rec.predErrP99, 1)} %, unfairness ${num(rec.unfairness, 1)} %`)}</p>` +
        `<p>For the controller config:</p><pre id="controller-yaml">${escapeXml(report.controllerYaml)}</pre></section>`,
      '<section id="charts"><h2>Trade-offs</h2>',
      `<figure>${scatterSvg('chart-jct-pred', report.evaluated, rec.id, 'predErrP99', 'unfairness')}</figure>`,
      `<figure>${scatterSvg('chart-jct-unfairness', report.evaluated, rec.id, 'unfairness', 'predErrP99')}` +
        '<figcaption>Each point is one simulated WFQ config; all three objectives are minimised. Outlined and ' +
        'labelled points are on the Pareto front (no other config is at least as good on all three and better on ' +
        'one); the red ring is the recommended one. Missing values (e.g. no predictions) count as worst.</figcaption></figure>',
      '</section>',
      `<section id="configs"><h2>Evaluated configs (${report.evaluated.length}, ${report.front.length} on the front)</h2>${table(report)}</section>`,
    ],
  );
}
