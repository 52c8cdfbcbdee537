import { z } from 'zod';
import { ValidationError } from '../core/validation.js';
import { escapeXml } from '../report/escape.js';
import { renderChartSvg } from '../report/svg-chart.js';
import { COST_REPORTS_PREFIX, costReportKeys, LATEST_REPORT_KEY } from '../protocol/object-keys.js';
import type { ObjectStore } from '../storage/object-store.js';
import type { BilledInstance, DetailedCostReport } from './cost-accounting.js';

/**
 * Cost reports written to the object store under `reports/` (every hour, whenever a job
 * ends, and on demand): the same numbers as JSON (for `fleetwise report` and scripts), CSV (for spreadsheets) and a
 * self-contained HTML page with inline SVG charts (opens offline, no scripts).
 *
 * Keys (src/protocol/object-keys.ts): `reports/costs-<UTC stamp>.{json,csv,html}` (the stamp sorts chronologically)
 * and `reports/latest.json`, a copy of the newest JSON report.
 */

export const COST_REPORT_KIND = 'fleetwise.cost-report';

export interface CostPoint {
  readonly atSeconds: number;
  readonly costPerHour: number;
}

/**
 * The JSON report: the cost report's own fields at the top level (what `GET /v1/costs` answers, so `fleetwise report`
 * reads either alike), plus what the report is about.
 */
export interface CostReportDocument extends DetailedCostReport {
  readonly schemaVersion: 1;
  readonly kind: typeof COST_REPORT_KIND;
  readonly cluster: string;
  /** Why it was written: `hourly`, `job-7 cancelled`, `on demand`, … */
  readonly reason: string;
  readonly generatedAt: string;
  readonly since: string;
  /** The fleet's $/hour over time (a step function: each point holds until the next). */
  readonly costPerHourSeries: readonly CostPoint[];
}

/** The fleet's $/hour as a step function of time, from the instances' billed intervals, within [since, now]. */
export function costPerHourSeries(
  instances: readonly BilledInstance[],
  sinceSeconds: number,
  nowSeconds: number,
): CostPoint[] {
  const deltas = new Map<number, number>();
  const add = (at: number, delta: number): void => {
    deltas.set(at, (deltas.get(at) ?? 0) + delta);
  };
  for (const inst of instances) {
    const end = inst.terminatedAtSeconds ?? Number.POSITIVE_INFINITY;
    if (end <= sinceSeconds || inst.fromSeconds > nowSeconds) continue;
    add(Math.max(inst.fromSeconds, sinceSeconds), inst.costPerHour);
    if (end <= nowSeconds) add(end, -inst.costPerHour);
  }
  const points: CostPoint[] = [];
  let level = 0;
  for (const at of [...deltas.keys()].sort((a, b) => a - b)) {
    level += deltas.get(at) as number;
    // Sums of floats: snap the empty fleet to exactly zero.
    points.push({ atSeconds: at, costPerHour: Math.abs(level) < 1e-9 ? 0 : level });
  }
  if (points.length === 0 || (points[points.length - 1] as CostPoint).atSeconds < nowSeconds)
    points.push({ atSeconds: nowSeconds, costPerHour: Math.abs(level) < 1e-9 ? 0 : level });
  return points;
}

export function buildReportDocument(input: {
  readonly cluster: string;
  readonly reason: string;
  readonly report: DetailedCostReport;
  readonly instances: readonly BilledInstance[];
}): CostReportDocument {
  const { report } = input;
  return {
    schemaVersion: 1,
    kind: COST_REPORT_KIND,
    cluster: input.cluster,
    reason: input.reason,
    generatedAt: isoSeconds(report.generatedAtSeconds),
    since: isoSeconds(report.sinceSeconds),
    ...report,
    costPerHourSeries: costPerHourSeries(input.instances, report.sinceSeconds, report.generatedAtSeconds),
  };
}

function isoSeconds(seconds: number): string {
  return new Date(Math.round(seconds * 1000)).toISOString();
}

/** `2026-11-22T00-10-05.123Z`: sortable, and safe as a file name on every store. */
export function reportStamp(seconds: number): string {
  return isoSeconds(seconds).replaceAll(':', '-');
}

// ---------------------------------------------------------------------------------------------------------------
// CSV

function csvCell(value: string | number): string {
  const text = typeof value === 'number' ? formatNumber(value) : value;
  return /[",\n\r]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

function formatNumber(n: number): string {
  return Number.isInteger(n) ? String(n) : n.toFixed(6);
}

/** One row per cost line: `scope,id,name,team,typeName,cost,idleCost,migrationCost`. */
export function reportCsv(doc: CostReportDocument): string {
  const r = doc;
  const rows: (string | number)[][] = [
    ['scope', 'id', 'name', 'team', 'typeName', 'cost', 'idleCost', 'migrationCost'],
  ];
  rows.push(['total', doc.cluster, '', '', '', r.totalCost, r.idleCost, r.migrationOverheadCost]);
  for (const t of r.byTeam) rows.push(['team', t.id, '', t.id, '', t.cost, '', '']);
  for (const j of r.byJob) rows.push(['job', j.id, j.name, j.team, '', j.cost, '', j.migrationCost]);
  for (const i of r.byInstance) rows.push(['instance', i.id, '', '', i.typeName, i.cost, i.idleCost, '']);
  return `${rows.map((row) => row.map(csvCell).join(',')).join('\n')}\n`;
}

// ---------------------------------------------------------------------------------------------------------------
// HTML

const BAR_COLORS = ['#4e79a7', '#f28e2b', '#59a14f', '#e15759', '#76b7b2', '#edc948', '#b07aa1', '#9c755f'];

function money(dollars: number): string {
  return `$${dollars.toFixed(dollars !== 0 && Math.abs(dollars) < 1 ? 4 : 2)}`;
}

/** A horizontal bar chart as inline SVG. */
export function barChartSvg(title: string, bars: readonly { label: string; value: number }[]): string {
  const rowPx = 22;
  const labelPx = 220;
  const widthPx = 720;
  const plotPx = widthPx - labelPx - 90;
  const max = Math.max(1e-12, ...bars.map((b) => b.value));
  const height = 30 + rowPx * Math.max(1, bars.length);
  const rows = bars.map((b, i) => {
    const y = 26 + i * rowPx;
    const w = Math.max(0, (b.value / max) * plotPx);
    return (
      `<text x="${labelPx - 6}" y="${y + 14}" text-anchor="end" font-size="12">${escapeXml(b.label)}</text>` +
      `<rect x="${labelPx}" y="${y + 2}" width="${w.toFixed(1)}" height="${rowPx - 6}" fill="${BAR_COLORS[i % BAR_COLORS.length] as string}"/>` +
      `<text x="${(labelPx + w + 6).toFixed(1)}" y="${y + 14}" font-size="12">${escapeXml(money(b.value))}</text>`
    );
  });
  const empty =
    bars.length === 0
      ? `<text x="${labelPx}" y="40" font-size="12" fill="#777">no costs in this period</text>`
      : '';
  return (
    `<svg xmlns="http://www.w3.org/2000/svg" width="${widthPx}" height="${height}" role="img" aria-label="${escapeXml(title)}">` +
    `<text x="4" y="16" font-size="14" font-weight="bold">${escapeXml(title)}</text>${rows.join('')}${empty}</svg>`
  );
}

function table(headers: readonly string[], rows: readonly (readonly string[])[]): string {
  const head = headers.map((h) => `<th>${escapeXml(h)}</th>`).join('');
  const body = rows.map((r) => `<tr>${r.map((c) => `<td>${escapeXml(c)}</td>`).join('')}</tr>`).join('');
  return `<table><thead><tr>${head}</tr></thead><tbody>${body}</tbody></table>`;
}

export function reportHtml(doc: CostReportDocument): string {
  const r = doc;
  const series = doc.costPerHourSeries;
  const t0 = series[0]?.atSeconds ?? r.sinceSeconds;
  const chart =
    series.length < 2
      ? ''
      : renderChartSvg({
          id: 'cost-rate',
          title: 'Fleet cost rate',
          legend: [{ name: '$/hour', color: BAR_COLORS[0] as string }],
          panels: [
            {
              x: { label: 'hours since the start of the period', tight: true, format: (v) => v.toFixed(2) },
              y: { label: '$/hour', min: 0 },
              interpolation: 'step',
              lines: [
                {
                  name: '$/hour',
                  color: BAR_COLORS[0] as string,
                  xs: series.map((p) => (p.atSeconds - t0) / 3600),
                  ys: series.map((p) => p.costPerHour),
                },
              ],
            },
          ],
        });
  const summary = table(
    ['total', 'attributed to jobs', 'idle', 'migration overhead', '$/hour now'],
    [
      [
        money(r.totalCost),
        money(r.byJob.reduce((s, j) => s + j.cost, 0)),
        money(r.idleCost),
        money(r.migrationOverheadCost),
        money(r.costPerHourNow),
      ],
    ],
  );
  const topJobs = r.byJob.slice(0, 25);
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>fleetwise costs: ${escapeXml(doc.cluster)} (${escapeXml(doc.generatedAt)})</title>
<style>
body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:1000px}
table{border-collapse:collapse;margin:8px 0 20px}th,td{border:1px solid #ccc;padding:4px 8px;text-align:left;font-size:13px}
th{background:#f3f3f3}h1{font-size:20px}h2{font-size:16px;margin-top:28px}.note{color:#666;font-size:13px}
</style></head><body>
<h1>Costs of cluster ${escapeXml(doc.cluster)}</h1>
<p class="note">From ${escapeXml(doc.since)} to ${escapeXml(doc.generatedAt)}; written because: ${escapeXml(doc.reason)}.
Per-second billing from launch to termination (one-minute minimum); each instance's cost is shared among the tasks on
it by reservation price; time with no task on an instance is idle.</p>
${summary}
${chart}
<h2>By team</h2>
${barChartSvg(
  'Cost by team',
  r.byTeam.map((t) => ({ label: t.id, value: t.cost })),
)}
<h2>By job${r.byJob.length > topJobs.length ? ` (top ${topJobs.length} of ${r.byJob.length})` : ''}</h2>
${barChartSvg(
  'Cost by job',
  topJobs.map((j) => ({ label: `${j.id} ${j.name}`, value: j.cost })),
)}
${table(
  ['job', 'name', 'team', 'cost', 'of which migration'],
  r.byJob.map((j) => [j.id, j.name, j.team, money(j.cost), money(j.migrationCost)]),
)}
<h2>By instance</h2>
${table(
  ['instance', 'type', 'billed hours', 'cost', 'idle'],
  r.byInstance.map((i) => [
    i.id,
    i.typeName,
    (i.billedSeconds / 3600).toFixed(3),
    money(i.cost),
    money(i.idleCost),
  ]),
)}
</body></html>
`;
}

// ---------------------------------------------------------------------------------------------------------------
// Writing and reading back

export interface WrittenReport {
  readonly json: string;
  readonly csv: string;
  readonly html: string;
}

export async function writeReportFiles(store: ObjectStore, doc: CostReportDocument): Promise<WrittenReport> {
  const keys: WrittenReport = costReportKeys(reportStamp(doc.generatedAtSeconds));
  const json = Buffer.from(`${JSON.stringify(doc, null, 2)}\n`, 'utf8');
  await store.put(keys.csv, Buffer.from(reportCsv(doc), 'utf8'));
  await store.put(keys.html, Buffer.from(reportHtml(doc), 'utf8'));
  // JSON last: a reader that finds it finds the other two.
  await store.put(keys.json, json);
  await store.put(LATEST_REPORT_KEY, json);
  return keys;
}

const costLine = z.object({ id: z.string(), cost: z.number() }).loose();
const reportDocumentSchema = z
  .object({
    schemaVersion: z.literal(1),
    kind: z.literal(COST_REPORT_KIND),
    cluster: z.string(),
    reason: z.string(),
    generatedAt: z.string(),
    since: z.string(),
    generatedAtSeconds: z.number(),
    sinceSeconds: z.number(),
    totalCost: z.number(),
    idleCost: z.number(),
    migrationOverheadCost: z.number(),
    byJob: z.array(costLine),
    byTeam: z.array(costLine),
    byInstance: z.array(costLine),
    costPerHourSeries: z.array(z.object({ atSeconds: z.number(), costPerHour: z.number() })),
  })
  .loose();

export function parseReportDocument(text: string, source: string): CostReportDocument {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new ValidationError(source, [`not valid JSON: ${(e as Error).message}`]);
  }
  const result = reportDocumentSchema.safeParse(json);
  if (!result.success)
    throw new ValidationError(
      source,
      result.error.issues.map((i) => `${i.path.length === 0 ? '(root)' : i.path.join('.')}: ${i.message}`),
    );
  return json as CostReportDocument;
}

/** The JSON reports in a store, oldest first, generated at or after `sinceSeconds` (for `fleetwise report`). */
export async function listReports(
  store: ObjectStore,
  sinceSeconds = 0,
): Promise<{ key: string; document: CostReportDocument }[]> {
  const out: { key: string; document: CostReportDocument }[] = [];
  for await (const info of store.list(COST_REPORTS_PREFIX)) {
    if (!info.key.endsWith('.json')) continue;
    const document = parseReportDocument((await store.getBuffer(info.key)).toString('utf8'), info.key);
    if (document.generatedAtSeconds >= sinceSeconds) out.push({ key: info.key, document });
  }
  return out;
}
