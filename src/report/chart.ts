import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type * as Echarts from 'echarts';
import type { EChartsOption } from 'echarts';
import { escapeXml } from './escape.js';

/**
 * Charts of the HTML reports (report.html, tune.html, the controller's cost report), drawn with Apache ECharts.
 *
 * Each chart is rendered twice from one option: as a static SVG in Node (ECharts' server-side rendering), so the page
 * shows every chart without scripts, and, when scripts run, by ECharts in the browser from the same option (kept as
 * JSON next to the SVG), which replaces the SVG with the interactive chart: tooltips, legend toggles, resizing. The
 * library's minified build is inlined once per page, so a report stays one file that opens offline.
 *
 * Options must be JSON to reach the page: where ECharts wants a function (tooltip formatters), an option holds
 * `fmt(name)`, one of the page runtime's formatters below.
 */

/** Which ECharts build a page inlines: `full` (1.1 MB, with visualMap) or `common` (0.7 MB: line, bar, scatter). */
export type ChartBundle = 'full' | 'common';

export interface Chart {
  /** Unique within the page: the container's id and the prefix of the SVG's internal ids. */
  readonly id: string;
  /** Read by screen readers and shown while the chart loads. */
  readonly title: string;
  readonly option: EChartsOption;
  /** Width the static SVG is drawn at; the page scales it (and the live chart follows the container's width). */
  readonly width: number;
  readonly height: number;
  /**
   * The narrowest the chart is drawn at, for a layout placed in pixels across the whole width (panels side by side):
   * drawn narrower, the panels past its edge would be cut off. A page narrower than this scrolls the chart sideways.
   */
  readonly minWidth?: number;
}

/** Prefix marking a formatter by name in the page's JSON; see the runtime's FORMATTERS. */
const FORMATTER_PREFIX = '$fmt:';
export type FormatterName = 'money' | 'hours' | 'percent' | 'integer' | 'tip';
const formatterNames = new WeakMap<object, FormatterName>();

/**
 * A formatter of the page runtime, for an option field that takes a function. In Node it is a stand-in (server-side
 * rendering draws no tooltips); in the page's JSON it becomes `$fmt:<name>` and the runtime puts the real one back.
 */
export function fmt(name: FormatterName): (value: unknown) => string {
  const stand = (value: unknown): string => String(value);
  formatterNames.set(stand, name);
  return stand;
}

/**
 * The formatters, as browser JavaScript (the page runs them; Node never does). `tip` shows an item's own `tip`
 * field, for points that carry a prepared description.
 */
const FORMATTERS_JS = `{
  money: function (v) { return v == null || isNaN(v) ? '–' : '$' + Number(v).toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 2 }); },
  hours: function (v) { return v == null || isNaN(v) ? '–' : Number(v).toLocaleString('en-US', { maximumSignificantDigits: 4 }) + ' h'; },
  percent: function (v) { return v == null || isNaN(v) ? '–' : Number(v).toFixed(1) + '%'; },
  integer: function (v) { return v == null || isNaN(v) ? '–' : Math.round(Number(v)).toLocaleString('en-US'); },
  tip: function (p) { var d = p && p.data; var t = d && d.tip; var e = document.createElement('div'); e.style.whiteSpace = 'pre-line'; e.textContent = t || (p && p.name) || ''; return e; }
}`;

/** Replaces the static SVGs by live charts; runs once, after the library. */
const BOOTSTRAP_JS = `(function () {
  var FORMATTERS = ${FORMATTERS_JS};
  function revive(o) {
    if (typeof o === 'string' && o.indexOf('${FORMATTER_PREFIX}') === 0) return FORMATTERS[o.slice(${FORMATTER_PREFIX.length})];
    if (Array.isArray(o)) { for (var i = 0; i < o.length; i++) o[i] = revive(o[i]); return o; }
    if (o !== null && typeof o === 'object') { for (var k in o) o[k] = revive(o[k]); }
    return o;
  }
  var charts = [];
  document.querySelectorAll('script[type="application/json"][data-chart]').forEach(function (s) {
    var el = document.getElementById(s.getAttribute('data-chart'));
    if (!el) return;
    var option = revive(JSON.parse(s.textContent));
    el.textContent = '';
    var chart = echarts.init(el, null, { renderer: 'svg' });
    chart.setOption(option);
    el.classList.add('live');
    charts.push(chart);
  });
  window.addEventListener('resize', function () { charts.forEach(function (c) { c.resize(); }); });
})();`;

/** What every chart shares: the page's font, no animation (a report is read, not watched). */
const BASE_OPTION: EChartsOption = {
  animation: false,
  textStyle: { fontFamily: 'system-ui, -apple-system, "Segoe UI", sans-serif' },
};

/**
 * ECharts numbers the SVG's ids and classes (`zr3-cls-12`) from counters shared by every chart the process has drawn;
 * renumbering them per chart keeps a page's bytes a function of its input, and ids unique within the page.
 */
function renumberIds(svg: string, prefix: string): string {
  const ids = new Map<string, string>();
  return svg.replace(/\bzr\d+-[a-z]+-?\d+\b/g, (id) => {
    let renamed = ids.get(id);
    if (renamed === undefined) {
      renamed = `${prefix}-${ids.size}`;
      ids.set(id, renamed);
    }
    return renamed;
  });
}

/**
 * ECharts, loaded on first use, as its single-file build: its ES modules are some 600 files that take most of a
 * second to load, which every controller and simulator process would pay at start whether or not it draws a chart.
 */
let echartsModule: typeof Echarts | undefined;
function echarts(): typeof Echarts {
  echartsModule ??= createRequire(import.meta.url)('echarts') as typeof Echarts;
  return echartsModule;
}

/** The chart as a static SVG string (server-side rendering). */
export function renderChartSvg(chart: Chart): string {
  const instance = echarts().init(null, null, {
    renderer: 'svg',
    ssr: true,
    width: chart.width,
    height: chart.height,
  });
  try {
    instance.setOption({ ...BASE_OPTION, ...chart.option });
    return renumberIds(instance.renderToSVGString(), `${chart.id}-svg`);
  } finally {
    instance.dispose();
  }
}

/**
 * JSON that is safe inside a `<script>` element (`<` is escaped, so no `</script>` or `<!--` can end it), with the
 * runtime's formatters by name.
 */
export function scriptJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => {
    if (typeof v !== 'function') return v;
    const name = formatterNames.get(v);
    // Any other function would silently vanish from the page's chart.
    if (name === undefined)
      throw new Error('chart option holds a function that is not a page formatter (fmt)');
    return `${FORMATTER_PREFIX}${name}`;
  })
    .replaceAll('<', '\\u003c')
    .replaceAll('\u2028', '\\u2028')
    .replaceAll('\u2029', '\\u2029');
}

/**
 * The chart as page markup: a container holding the static SVG, and the option as JSON for the runtime. Its height is
 * fixed (the live chart needs one); the width follows the page, down to the chart's `minWidth`, below which the
 * container keeps that width inside a box that scrolls sideways (the live chart is drawn at the container's width).
 */
export function chartHtml(chart: Chart): string {
  const option = { ...BASE_OPTION, ...chart.option };
  const minWidth = chart.minWidth === undefined ? '' : `;min-width:${Math.ceil(chart.minWidth)}px`;
  const container =
    `<div class="chart" id="${escapeXml(chart.id)}" role="img" aria-label="${escapeXml(chart.title)}" ` +
    `style="height:${chart.height}px${minWidth}">${renderChartSvg(chart)}</div>`;
  return (
    (chart.minWidth === undefined ? container : `<div class="chart-scroll">${container}</div>`) +
    `<script type="application/json" data-chart="${escapeXml(chart.id)}">${scriptJson(option)}</script>`
  );
}

/** Rules the chart containers need; pages add them to their style. */
export const CHART_STYLE = `
  .chart { width: 100%; overflow: hidden; }
  .chart > svg { width: 100%; height: 100%; }
  .chart-scroll { overflow-x: auto; max-width: 100%; }
`;

const bundles = new Map<ChartBundle, string>();

function bundleSource(bundle: ChartBundle): string {
  let source = bundles.get(bundle);
  if (source === undefined) {
    const require = createRequire(import.meta.url);
    const path = require.resolve(
      bundle === 'full' ? 'echarts/dist/echarts.min' : 'echarts/dist/echarts.common.min',
    );
    // The build contains neither sequence today; escaping keeps the inline script intact if a release ever does.
    source = readFileSync(path, 'utf8').replaceAll('</script', '<\\/script').replaceAll('<!--', '<\\!--');
    bundles.set(bundle, source);
  }
  return source;
}

/** The scripts that make the page's charts live: the library, then the bootstrap. Goes at the end of `<body>`. */
export function chartRuntime(bundle: ChartBundle): string {
  return `<script>${bundleSource(bundle)}</script>\n<script>${BOOTSTRAP_JS}</script>`;
}
