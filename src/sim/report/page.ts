import { escapeXml } from '../../report/escape.js';
import type { ReportSettings } from './json.js';

/** What the self-contained HTML reports (report.html, tune.html) share: page style and the settings list. */

/** Page, settings list and table rules; each report appends its own. */
export const BASE_STYLE = `
  body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #222; margin: 24px auto;
         max-width: 1000px; padding: 0 16px; }
  h1 { font-size: 22px; } h2 { font-size: 18px; margin-top: 28px; }
  dl.settings { display: grid; grid-template-columns: max-content 1fr; gap: 2px 16px; }
  dl.settings dt { color: #555; } dl.settings dd { margin: 0; font-family: ui-monospace, monospace; }
  .table-wrap { overflow-x: auto; }
  table { border-collapse: collapse; font-variant-numeric: tabular-nums; }
  th, td { padding: 4px 8px; border-bottom: 1px solid #ddd; white-space: nowrap; }
  th { text-align: left; background: #f4f4f4; } td.num, th.num { text-align: right; }
  figure { margin: 20px 0; } figcaption { color: #555; font-size: 13px; }
`;

/** The run's settings as a definition list (null shows as –). */
export function settingsList(settings: ReportSettings): string {
  const items = Object.entries(settings).map(
    ([k, v]) => `<dt>${escapeXml(k)}</dt><dd>${escapeXml(v === null ? '–' : String(v))}</dd>`,
  );
  return `<dl class="settings">${items.join('')}</dl>`;
}

/**
 * A whole self-contained page: no scripts, fonts, images or links to load. `sections` follow the settings list, one
 * line each.
 */
export function htmlPage(
  page: { readonly title: string; readonly heading: string; readonly style: string },
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
    `<section id="settings"><h2>Settings</h2>${settingsList(settings)}</section>`,
    ...sections,
    '</body>',
    '</html>',
    '',
  ].join('\n');
}
