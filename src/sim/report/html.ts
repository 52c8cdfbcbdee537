import type { RunResult } from '../../world/run-result.js';
import { reportCharts } from './charts.js';
import { escapeXml } from '../../report/escape.js';
import { BASE_STYLE, htmlPage } from './page.js';
import { money as twoDecimals, summaryColumns, three } from './format.js';
import type { ReportBounds, ReportSettings } from './json.js';
import { renderChartSvg } from '../../report/svg-chart.js';

/** Shown under each chart; keyed by chart id. */
const CAPTIONS: Readonly<Record<string, string>> = {
  'chart-cumulative-cost':
    'Money spent so far: every instance is billed per second from launch to termination.',
  'chart-running-instances': 'Instances provisioned (launching or running) at each moment.',
  'chart-resource-allocation':
    'Σ demand of the tasks placed on instances ÷ Σ capacity of the provisioned instances, per dimension; ' +
    'a gap means nothing was provisioned.',
  'chart-jct-distribution':
    'Share of completed jobs whose completion time (end − arrival) is at most x; further right = slower.',
  'chart-migrations': 'Total number of job migrations (moves of a started job to other instances) so far.',
};

const STYLE = `${BASE_STYLE}
  tr.cheapest td { font-weight: 600; }
  svg.chart { max-width: 100%; height: auto; font: 11px system-ui, sans-serif; }
  svg.chart .chart-title { font-size: 15px; font-weight: 600; }
  svg.chart .panel-title { font-size: 13px; font-weight: 600; }
  svg.chart .grid { stroke: #e6e6e6; stroke-width: 1; }
  svg.chart .axis { stroke: #888; fill: none; }
  svg.chart .tick { fill: #555; } svg.chart .axis-label { fill: #333; font-size: 12px; }
  svg.chart .line { fill: none; stroke-width: 1.6; stroke-linejoin: round; }
  svg.chart .legend-swatch { stroke-width: 3; } svg.chart .legend-label { fill: #333; font-size: 12px; }
  svg.chart .empty { fill: #999; font-size: 14px; }
`;

const BOUND_CAPTION =
  ' Dashed: the timed lower bound, what a fluid fleet (fractional instances, resized at will) would have spent ' +
  'hosting every job from its arrival for its standalone duration, with no delays and no interference.';

/** The trace's lower bounds, in $ and relative to No-Packing's simulated cost when it ran. */
function boundsParagraph(results: readonly RunResult[], bounds: ReportBounds): string {
  const noPacking = results.find((r) => r.summary.scheduler === 'no-packing')?.summary.totalCost;
  const money = (x: number) =>
    `$${twoDecimals(x)}` +
    (noPacking === undefined || !(noPacking > 0) ? '' : ` (${three(x / noPacking)} of no-packing)`);
  return (
    `<p id="bounds">Lower bounds for this trace (<code>fleetwise bench bound</code>): no schedule can cost less ` +
    `than ${escapeXml(money(bounds.workBound))}, the work bound (a fluid fleet for the trace's task-hours); ` +
    `one where no job waits or slows down costs at least ${escapeXml(money(bounds.timedBound))}.</p>`
  );
}

function summaryTable(results: readonly RunResult[]): string {
  const cheapest = Math.min(...results.map((r) => r.summary.totalCost));
  const columns = summaryColumns(results);
  const head = columns.map((c) => `<th${c.numeric ? ' class="num"' : ''}>${escapeXml(c.header)}</th>`);
  const rows = results.map((r) => {
    const cells = columns
      .map((c) => `<td${c.numeric ? ' class="num"' : ''}>${escapeXml(c.cell(r))}</td>`)
      .join('');
    return `<tr${r.summary.totalCost === cheapest ? ' class="cheapest"' : ''}>${cells}</tr>`;
  });
  return `<div class="table-wrap"><table id="summary-table"><thead><tr>${head.join('')}</tr></thead><tbody>${rows.join('\n')}</tbody></table></div>`;
}

/**
 * The self-contained report.html: settings, the summary table and the five charts as inline SVG. No scripts,
 * fonts, images or links to load, so it opens offline and can be attached to an issue as is.
 */
export function reportHtml(
  results: readonly RunResult[],
  settings: ReportSettings,
  bounds?: ReportBounds,
): string {
  const caption = (id: string): string =>
    (CAPTIONS[id] ?? '') + (bounds !== undefined && id === 'chart-cumulative-cost' ? BOUND_CAPTION : '');
  const figures = reportCharts(results, bounds).map(
    (chart) =>
      `<figure>${renderChartSvg(chart)}<figcaption>${escapeXml(caption(chart.id))}</figcaption></figure>`,
  );
  return htmlPage(
    { title: 'fleetwise simulation report', heading: 'fleetwise simulation report', style: STYLE },
    settings,
    [
      `<section id="summary"><h2>Summary</h2>${summaryTable(results)}` +
        '<p>Norm. cost is relative to no-packing when it ran. Utilization is time-weighted over the run.</p>' +
        (bounds === undefined ? '' : boundsParagraph(results, bounds)) +
        '</section>',
      `<section id="charts"><h2>Charts</h2>\n${figures.join('\n')}\n</section>`,
    ],
  );
}
