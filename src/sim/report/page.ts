import { escapeXml } from '../../report/escape.js';
import { CHART_STYLE, chartRuntime, type ChartBundle } from '../../report/chart.js';
import type { ReportSettings } from './json.js';

/** What the self-contained HTML reports (report.html, tune.html) share: page style, tables and the settings list. */

/** Page, settings list and table rules; each report appends its own. */
export const BASE_STYLE = `
  body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #222; margin: 24px auto;
         max-width: 1180px; padding: 0 16px; }
  h1 { font-size: 22px; margin-bottom: 8px; } h2 { font-size: 18px; margin-top: 32px; }
  p.lead { font-size: 17px; margin: 4px 0; } p.lead strong { font-weight: 650; }
  dl.settings { display: grid; grid-template-columns: max-content 1fr; gap: 2px 16px; }
  dl.settings dt { color: #555; } dl.settings dd { margin: 0; font-family: ui-monospace, monospace; }
  /* Wide tables scroll sideways; the shadows at the edges show there is more (they scroll with the content). */
  .table-wrap { overflow-x: auto; max-width: 100%; border: 1px solid #e4e4e4; border-radius: 4px;
    background: linear-gradient(to right, #fff 30%, #fff0) left / 40px 100% no-repeat local,
      linear-gradient(to left, #fff 30%, #fff0) right / 40px 100% no-repeat local,
      radial-gradient(farthest-side at 100% 50%, #0003, #0000) right / 14px 100% no-repeat scroll; }
  table { border-collapse: collapse; font-variant-numeric: tabular-nums; width: max-content; min-width: 100%;
    font-size: 13px; }
  th, td { padding: 5px 8px; border-bottom: 1px solid #e4e4e4; white-space: nowrap; }
  th { text-align: left; background: #f4f4f4; position: sticky; top: 0; }
  th[title] { text-decoration: underline dotted #999; text-underline-offset: 3px; cursor: help; }
  td.num, th.num { text-align: right; }
  th:first-child, td:first-child { position: sticky; left: 0; background: #fff; }
  th:first-child { background: #f4f4f4; z-index: 1; }
  td .swatch { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin-right: 6px; }
  dl.glossary { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; font-size: 13px; color: #444; }
  dl.glossary dt { font-weight: 600; white-space: nowrap; } dl.glossary dd { margin: 0; }
  details > summary { cursor: pointer; color: #444; margin: 8px 0; }
  figure { margin: 24px 0; } figcaption { color: #555; font-size: 13px; margin-top: 4px; }
  figure h3 { font-size: 15px; margin: 0 0 4px; }
  ${CHART_STYLE}
`;

/**
 * The run's settings as a definition list. Every setting comes with its value, defaults included (a setting left
 * null means "none": no cap, no queue, …).
 */
export function settingsList(settings: ReportSettings): string {
  const items = Object.entries(settings).map(
    ([k, v]) => `<dt>${escapeXml(k)}</dt><dd>${escapeXml(v === null ? 'none' : String(v))}</dd>`,
  );
  return `<dl class="settings">${items.join('')}</dl>`;
}

/** A table column: header, what it means (header tooltip and footnote), and its cells. */
export interface TableColumn<Row> {
  readonly header: string;
  readonly description: string;
  readonly numeric: boolean;
  /** Plain text (escaped here). */
  readonly cell: (row: Row) => string;
}

/**
 * A table that scrolls sideways inside the page rather than being cut off, its first column fixed while it does;
 * each header explains itself on hover, and the footnote below lists every column for readers who print or skim.
 */
export function dataTable<Row>(
  id: string,
  columns: readonly TableColumn<Row>[],
  rows: readonly Row[],
  rowAttributes: (row: Row) => string = () => '',
  cellHtml: (column: TableColumn<Row>, row: Row) => string = (c, r) => escapeXml(c.cell(r)),
): string {
  const head = columns
    .map(
      (c) =>
        `<th${c.numeric ? ' class="num"' : ''} scope="col" title="${escapeXml(c.description)}">${escapeXml(c.header)}</th>`,
    )
    .join('');
  const body = rows.map((r) => {
    const cells = columns.map((c) => `<td${c.numeric ? ' class="num"' : ''}>${cellHtml(c, r)}</td>`).join('');
    return `<tr${rowAttributes(r)}>${cells}</tr>`;
  });
  const glossary = columns
    .map((c) => `<dt>${escapeXml(c.header)}</dt><dd>${escapeXml(c.description)}</dd>`)
    .join('');
  return (
    `<div class="table-wrap"><table id="${escapeXml(id)}"><thead><tr>${head}</tr></thead>` +
    `<tbody>${body.join('\n')}</tbody></table></div>` +
    `<details class="columns"><summary>What the columns mean</summary><dl class="glossary">${glossary}</dl></details>`
  );
}

/**
 * A whole self-contained page: styles and scripts inline, no fonts, images or links to load. `sections` come first
 * (what a reader wants: results), then the settings the report was made with; the chart runtime (ECharts, inline)
 * ends the body.
 */
export function htmlPage(
  page: {
    readonly title: string;
    readonly heading: string;
    readonly style: string;
    readonly bundle: ChartBundle;
  },
  settings: ReportSettings,
  sections: readonly string[],
): string {
  return [
    '<!doctype html>',
    '<html lang="en">',
    '<head>',
    '<meta charset="utf-8">',
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    `<title>${escapeXml(page.title)}</title>`,
    `<style>${page.style}</style>`,
    '</head>',
    '<body>',
    `<h1>${escapeXml(page.heading)}</h1>`,
    ...sections,
    `<section id="settings"><h2>Settings</h2>${settingsList(settings)}</section>`,
    chartRuntime(page.bundle),
    '</body>',
    '</html>',
    '',
  ].join('\n');
}
