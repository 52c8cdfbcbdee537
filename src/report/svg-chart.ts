import { escapeXml } from './escape.js';

/**
 * A small line-chart renderer producing inline SVG for the self-contained HTML report (no chart library and
 * no network: the report must open offline). One chart = a title, one or more side-by-side panels sharing a
 * legend; each panel has its own axes (linear or log) and draws each line linearly or as a step function.
 */
export type Interpolation = 'linear' | 'step';

export interface ChartLine {
  readonly name: string;
  readonly color: string;
  /** Drawn dashed: a reference line (a bound), not a run. */
  readonly dashed?: boolean | undefined;
  readonly xs: readonly number[];
  /** Non-finite values leave a gap in the line. */
  readonly ys: readonly number[];
}

export interface ChartAxis {
  readonly label: string;
  readonly scale?: 'linear' | 'log' | undefined;
  /** Fixed bounds; otherwise taken from the data and rounded outward to tick steps. */
  readonly min?: number | undefined;
  readonly max?: number | undefined;
  /** End the axis at the data instead of rounding outward to a tick (time axes: no empty tail). */
  readonly tight?: boolean | undefined;
  readonly format?: ((value: number) => string) | undefined;
}

export interface ChartPanel {
  readonly title?: string | undefined;
  readonly x: ChartAxis;
  readonly y: ChartAxis;
  readonly interpolation: Interpolation;
  readonly lines: readonly ChartLine[];
}

export interface LegendEntry {
  readonly name: string;
  readonly color: string;
  readonly dashed?: boolean | undefined;
}

const DASH = ' stroke-dasharray="6 4"';

export interface ChartSpec {
  /** Unique within the page: prefixes the SVG's element ids. */
  readonly id: string;
  readonly title: string;
  readonly panels: readonly ChartPanel[];
  readonly legend: readonly LegendEntry[];
  readonly widthPx?: number | undefined;
  readonly panelHeightPx?: number | undefined;
}

const MARGIN = { left: 64, right: 16, top: 28, bottom: 48 } as const;
const TITLE_HEIGHT_PX = 34;
const LEGEND_ROW_PX = 20;
const CHAR_WIDTH_PX = 7;

interface Domain {
  readonly lo: number;
  readonly hi: number;
  readonly ticks: readonly number[];
  readonly log: boolean;
}

/** Round a raw tick step to 1, 2 or 5 × 10^k (the usual "nice numbers" rule). */
export function niceStep(range: number, targetTicks: number): number {
  const raw = range / Math.max(1, targetTicks);
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  const f = raw / magnitude;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * magnitude;
}

function linearDomain(dataLo: number, dataHi: number, axis: ChartAxis, targetTicks: number): Domain {
  let lo = axis.min ?? dataLo;
  let hi = axis.max ?? dataHi;
  if (!Number.isFinite(lo) || !Number.isFinite(hi)) [lo, hi] = [0, 1];
  if (hi <= lo) [lo, hi] = lo === 0 ? [0, 1] : [lo - Math.abs(lo) / 2, hi + Math.abs(hi) / 2];
  const step = niceStep(hi - lo, targetTicks);
  if (axis.min === undefined && axis.tight !== true) lo = Math.floor(lo / step + 1e-9) * step;
  if (axis.max === undefined && axis.tight !== true) hi = Math.ceil(hi / step - 1e-9) * step;
  const ticks: number[] = [];
  for (let t = Math.ceil(lo / step - 1e-9) * step; t <= hi + step * 1e-9; t += step)
    ticks.push(roundTo(t, step));
  return { lo, hi, ticks, log: false };
}

/** Snap to the 1-2-5 sequence (…, 0.5, 1, 2, 5, 10, …), downward or upward. */
function snap125(value: number, direction: 'down' | 'up'): number {
  const decade = 10 ** Math.floor(Math.log10(value));
  const candidates = [1, 2, 5, 10].map((m) => m * decade);
  const eps = 1e-9 * decade;
  return direction === 'down'
    ? Math.max(...candidates.filter((c) => c <= value + eps))
    : Math.min(...candidates.filter((c) => c >= value - eps));
}

/** Log axis from the data's 1-2-5 neighbours; ticks at 1, 2, 5 × 10^k when it spans few decades. */
function logDomain(dataLo: number, dataHi: number, axis: ChartAxis): Domain {
  const lo = axis.min ?? snap125(dataLo > 0 && Number.isFinite(dataLo) ? dataLo : 1, 'down');
  let hi = axis.max ?? snap125(dataHi > 0 && Number.isFinite(dataHi) ? dataHi : 10, 'up');
  if (hi <= lo) hi = lo * 10;
  const multipliers = Math.log10(hi / lo) <= 2.5 ? [1, 2, 5] : [1];
  const ticks: number[] = [];
  for (let k = Math.floor(Math.log10(lo)); k <= Math.ceil(Math.log10(hi)); k++)
    for (const m of multipliers) {
      const t = Number((m * 10 ** k).toPrecision(12));
      if (t >= lo * (1 - 1e-9) && t <= hi * (1 + 1e-9)) ticks.push(t);
    }
  return { lo, hi, ticks, log: true };
}

function roundTo(value: number, step: number): number {
  const decimals = Math.max(0, -Math.floor(Math.log10(step)) + 1);
  return Number(value.toFixed(Math.min(12, decimals)));
}

function defaultFormat(ticks: readonly number[]): (value: number) => string {
  const step = ticks.length > 1 ? Math.abs((ticks[1] as number) - (ticks[0] as number)) : 1;
  const decimals = step > 0 && step < 1 ? Math.min(6, -Math.floor(Math.log10(step))) : 0;
  const formatter = new Intl.NumberFormat('en-US', { maximumFractionDigits: decimals });
  return (value) => formatter.format(value);
}

function finiteExtent(values: Iterable<number>, positiveOnly: boolean): [number, number] {
  let lo = Infinity;
  let hi = -Infinity;
  for (const v of values) {
    if (!Number.isFinite(v) || (positiveOnly && v <= 0)) continue;
    if (v < lo) lo = v;
    if (v > hi) hi = v;
  }
  return [lo, hi];
}

function domainFor(axis: ChartAxis, values: () => Iterable<number>, targetTicks: number): Domain {
  const log = axis.scale === 'log';
  const [lo, hi] = finiteExtent(values(), log);
  return log ? logDomain(lo, hi, axis) : linearDomain(lo, hi, axis, targetTicks);
}

function project(domain: Domain, value: number, fromPx: number, toPx: number): number {
  const t = domain.log
    ? (Math.log10(value) - Math.log10(domain.lo)) / (Math.log10(domain.hi) - Math.log10(domain.lo))
    : (value - domain.lo) / (domain.hi - domain.lo);
  return fromPx + t * (toPx - fromPx);
}

const px = (v: number): string => (Math.round(v * 10) / 10).toString();

/** The `d` attribute of one line; non-finite (or, on a log axis, non-positive) points break the line. */
function linePath(
  line: ChartLine,
  interpolation: Interpolation,
  toX: (v: number) => number,
  toY: (v: number) => number,
  usable: (x: number, y: number) => boolean,
): string {
  const parts: string[] = [];
  let penDown = false;
  const n = Math.min(line.xs.length, line.ys.length);
  for (let i = 0; i < n; i++) {
    const x = line.xs[i] as number;
    const y = line.ys[i] as number;
    if (!usable(x, y)) {
      penDown = false;
      continue;
    }
    const sx = toX(x);
    const sy = toY(y);
    if (!penDown) parts.push(`M${px(sx)} ${px(sy)}`);
    else if (interpolation === 'step') parts.push(`H${px(sx)}V${px(sy)}`);
    else parts.push(`L${px(sx)} ${px(sy)}`);
    penDown = true;
  }
  return parts.join('');
}

function renderPanel(
  spec: ChartSpec,
  panel: ChartPanel,
  index: number,
  originX: number,
  originY: number,
  widthPx: number,
  heightPx: number,
): string {
  const left = originX + MARGIN.left;
  const right = originX + widthPx - MARGIN.right;
  const top = originY + MARGIN.top;
  const bottom = originY + heightPx - MARGIN.bottom;
  const xTicksTarget = Math.max(4, Math.floor((right - left) / 80));
  const xDomain = domainFor(panel.x, () => panel.lines.flatMap((l) => l.xs), xTicksTarget);
  const yDomain = domainFor(panel.y, () => panel.lines.flatMap((l) => l.ys), 5);
  const toX = (v: number): number => project(xDomain, v, left, right);
  const toY = (v: number): number => project(yDomain, v, bottom, top);
  const xFormat = panel.x.format ?? defaultFormat(xDomain.ticks);
  const yFormat = panel.y.format ?? defaultFormat(yDomain.ticks);
  const usable = (x: number, y: number): boolean =>
    Number.isFinite(x) && Number.isFinite(y) && (!xDomain.log || x > 0) && (!yDomain.log || y > 0);
  const clipId = `${spec.id}-clip-${index}`;
  const out: string[] = [];
  out.push(`<g class="panel">`);
  if (panel.title !== undefined)
    out.push(
      `<text x="${px((left + right) / 2)}" y="${px(originY + 16)}" text-anchor="middle" class="panel-title">${escapeXml(panel.title)}</text>`,
    );
  out.push(
    `<clipPath id="${clipId}"><rect x="${px(left)}" y="${px(top - 2)}" width="${px(right - left)}" height="${px(bottom - top + 4)}"/></clipPath>`,
  );
  for (const t of yDomain.ticks) {
    const y = toY(t);
    out.push(`<line class="grid" x1="${px(left)}" x2="${px(right)}" y1="${px(y)}" y2="${px(y)}"/>`);
    out.push(
      `<text x="${px(left - 6)}" y="${px(y + 4)}" text-anchor="end" class="tick">${escapeXml(yFormat(t))}</text>`,
    );
  }
  for (const t of xDomain.ticks) {
    const x = toX(t);
    out.push(`<line class="grid" x1="${px(x)}" x2="${px(x)}" y1="${px(top)}" y2="${px(bottom)}"/>`);
    out.push(
      `<text x="${px(x)}" y="${px(bottom + 16)}" text-anchor="middle" class="tick">${escapeXml(xFormat(t))}</text>`,
    );
  }
  out.push(
    `<path class="axis" d="M${px(left)} ${px(top)}V${px(bottom)}H${px(right)}" fill="none" stroke="#888"/>`,
    `<text x="${px((left + right) / 2)}" y="${px(bottom + 38)}" text-anchor="middle" class="axis-label">${escapeXml(panel.x.label)}</text>`,
    `<text transform="translate(${px(originX + 14)} ${px((top + bottom) / 2)}) rotate(-90)" text-anchor="middle" class="axis-label">${escapeXml(panel.y.label)}</text>`,
  );
  const drawn = panel.lines.filter((l) => l.xs.length > 0);
  if (drawn.length === 0)
    out.push(
      `<text x="${px((left + right) / 2)}" y="${px((top + bottom) / 2)}" text-anchor="middle" class="empty">no data</text>`,
    );
  out.push(`<g clip-path="url(#${clipId})">`);
  for (const line of drawn) {
    const d = linePath(line, panel.interpolation, toX, toY, usable);
    if (d === '') continue;
    out.push(
      `<path class="line" d="${d}" fill="none" stroke="${escapeXml(line.color)}"${line.dashed === true ? DASH : ''}><title>${escapeXml(line.name)}</title></path>`,
    );
  }
  out.push(`</g></g>`);
  return out.join('');
}

function legendRows(
  entries: readonly LegendEntry[],
  widthPx: number,
): { entry: LegendEntry; x: number; row: number }[] {
  const placed: { entry: LegendEntry; x: number; row: number }[] = [];
  let x = MARGIN.left;
  let row = 0;
  for (const entry of entries) {
    const itemWidth = 28 + entry.name.length * CHAR_WIDTH_PX + 18;
    if (x + itemWidth > widthPx - MARGIN.right && x > MARGIN.left) {
      row++;
      x = MARGIN.left;
    }
    placed.push({ entry, x, row });
    x += itemWidth;
  }
  return placed;
}

/** Render a chart as one `<svg>` element (no xmlns needed inline in HTML5, and no URLs in the report). */
export function renderChartSvg(spec: ChartSpec): string {
  const widthPx = spec.widthPx ?? 960;
  const panelHeightPx = spec.panelHeightPx ?? 320;
  const legend = legendRows(spec.legend, widthPx);
  const legendRowsCount = legend.length === 0 ? 0 : Math.max(...legend.map((l) => l.row)) + 1;
  const heightPx = TITLE_HEIGHT_PX + panelHeightPx + legendRowsCount * LEGEND_ROW_PX + 8;
  const panelWidthPx = widthPx / Math.max(1, spec.panels.length);
  const titleId = `${spec.id}-title`;
  const out: string[] = [];
  out.push(
    `<svg id="${spec.id}" class="chart" viewBox="0 0 ${widthPx} ${heightPx}" width="${widthPx}" height="${heightPx}" role="img" aria-labelledby="${titleId}">`,
    `<title id="${titleId}">${escapeXml(spec.title)}</title>`,
    `<text x="${px(widthPx / 2)}" y="22" text-anchor="middle" class="chart-title">${escapeXml(spec.title)}</text>`,
  );
  spec.panels.forEach((panel, i) => {
    out.push(renderPanel(spec, panel, i, i * panelWidthPx, TITLE_HEIGHT_PX, panelWidthPx, panelHeightPx));
  });
  const legendTop = TITLE_HEIGHT_PX + panelHeightPx;
  out.push(`<g class="legend">`);
  for (const { entry, x, row } of legend) {
    const y = legendTop + row * LEGEND_ROW_PX + 10;
    out.push(
      `<line x1="${px(x)}" x2="${px(x + 22)}" y1="${px(y)}" y2="${px(y)}" stroke="${escapeXml(entry.color)}"${entry.dashed === true ? DASH : ''} class="legend-swatch"/>`,
      `<text x="${px(x + 28)}" y="${px(y + 4)}" class="legend-label">${escapeXml(entry.name)}</text>`,
    );
  }
  out.push(`</g></svg>`);
  return out.join('');
}
