import { z } from 'zod';
import { perHourToPerSecond } from '../core/units.js';
import { ValidationError } from '../core/validation.js';
import { escapeXml } from '../report/escape.js';
import { CHART_STYLE, chartHtml, chartRuntime, fmt, type Chart } from '../report/chart.js';
import { CATEGORY_COLORS } from '../report/palette.js';
import {
  COST_REPORTS_PREFIX,
  costReportKeys,
  LATEST_REPORT_KEY,
  monthlyReportKeys,
} from '../protocol/object-keys.js';
import type { ObjectStore } from '../storage/object-store.js';
import {
  billedNothing,
  MINIMUM_BILLED_SECONDS,
  type BilledInstance,
  type DetailedCostReport,
} from './cost-accounting.js';

/**
 * Cost reports written to the object store under `reports/` (every hour, whenever a job
 * ends, and on demand): the same numbers as JSON (for `fleetwise report` and scripts), CSV (for spreadsheets) and a
 * self-contained HTML page with ECharts charts (static SVG, live when scripts run; the library is inline, so it
 * opens offline).
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
  /** The fleet's $/hour over time as it ran (a step function: each point holds until the next). */
  readonly costPerHourSeries: readonly CostPoint[];
  /**
   * The part of `totalCost` billed for EC2's one-minute minimum after short instances ended, which
   * `costPerHourSeries` does not show (absent from reports written before it was recorded).
   */
  readonly minimumMinuteCost?: number;
  /** The period had ended when written (a month's report): `costPerHourNow` is the fleet's $/hour at its end. */
  readonly closed?: boolean;
}

/**
 * The fleet's $/hour as a step function of time within [since, now]: each instance from its launch to its termination,
 * as it ran, so the series ends at the `costPerHourNow` the report states. EC2's one-minute minimum is billed past a
 * short instance's termination; that charge is in the report's totals, not in this series
 * (`minimumMinuteCost`), so the area under the series plus it is the report's total. A spot instance EC2 reclaimed
 * within its first hour by now is left out: the report bills it nothing (`billedNothing`); a closed period's report
 * bills one that was still running at the period's end, and so does the series.
 */
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
    if (billedNothing(inst) && (inst.terminatedAtSeconds as number) <= nowSeconds) continue;
    const end = inst.terminatedAtSeconds ?? Number.POSITIVE_INFINITY;
    if (end <= sinceSeconds || inst.fromSeconds > nowSeconds || end <= inst.fromSeconds) continue;
    add(Math.max(inst.fromSeconds, sinceSeconds), inst.costPerHour);
    if (end <= nowSeconds) add(end, -inst.costPerHour);
  }
  // From the period's start: an empty fleet until the first launch, so the chart's hours count from the period's start.
  const points: CostPoint[] = deltas.has(sinceSeconds) ? [] : [{ atSeconds: sinceSeconds, costPerHour: 0 }];
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

/**
 * What the report bills for EC2's one-minute minimum after instances that ran less than a minute ended, within
 * [since, now]: the rest of each such minute (all of it in an open report, whose instances have ended for good; up
 * to the period's end in a closed one, where one still running at the end is billed as running). The cost report
 * bills the same (attributeCosts); the rate series leaves it out.
 */
export function minimumMinuteCost(
  instances: readonly BilledInstance[],
  sinceSeconds: number,
  nowSeconds: number,
  closed = false,
): number {
  let cost = 0;
  for (const inst of instances) {
    const ended = inst.terminatedAtSeconds;
    if (ended === undefined || billedNothing(inst) || (closed && ended > nowSeconds)) continue;
    const minimumEnd = inst.fromSeconds + MINIMUM_BILLED_SECONDS;
    const to = closed ? Math.min(minimumEnd, nowSeconds) : minimumEnd;
    const from = Math.max(ended, inst.fromSeconds, sinceSeconds);
    if (to > from) cost += (to - from) * perHourToPerSecond(inst.costPerHour);
  }
  return cost;
}

export function buildReportDocument(input: {
  readonly cluster: string;
  readonly reason: string;
  readonly report: DetailedCostReport;
  readonly instances: readonly BilledInstance[];
  readonly closed?: boolean;
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
    minimumMinuteCost: minimumMinuteCost(
      input.instances,
      report.sinceSeconds,
      report.generatedAtSeconds,
      input.closed === true,
    ),
    ...(input.closed === true ? { closed: true } : {}),
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

function money(dollars: number): string {
  return `$${dollars.toFixed(dollars !== 0 && Math.abs(dollars) < 1 ? 4 : 2)}`;
}

const CHART_WIDTH = 960;
const BAR_PX = 24;
const IDLE_LABEL = 'idle (no task on the instance)';
/** Idle's colour: the only grey among the bars, so idle reads as nobody's. */
export const IDLE_COLOR = '#b0b0b0';

/** A grey, or near enough to be taken for idle's: its channels within 40 of each other. */
function greyish(color: string): boolean {
  const channels = [1, 3, 5].map((i) => parseInt(color.slice(i, i + 2), 16));
  return Math.max(...channels) - Math.min(...channels) < 40;
}

/**
 * The team colours: the category palette without its grey (grey is idle's), and a deep purple far from all of them.
 * As many teams as colours get one each; with more, the costliest keep theirs and the rest share the last, as
 * "other teams".
 */
export const TEAM_COLORS: readonly string[] = [...CATEGORY_COLORS.filter((c) => !greyish(c)), '#4a148c'];
/** The last team colour, which the teams past the costliest share. */
const OTHER_TEAMS_COLOR = TEAM_COLORS[TEAM_COLORS.length - 1] as string;

/** Each team's colour (`teams` costliest first), and the teams that share the last colour as "other teams". */
export function teamColors(teams: readonly string[]): {
  readonly colorOf: ReadonlyMap<string, string>;
  readonly others: readonly string[];
} {
  const named = teams.length <= TEAM_COLORS.length ? teams.length : TEAM_COLORS.length - 1;
  return {
    colorOf: new Map(teams.map((t, i) => [t, i < named ? (TEAM_COLORS[i] as string) : OTHER_TEAMS_COLOR])),
    others: teams.slice(named),
  };
}

/** A horizontal bar chart, in the order given, each bar labelled with its amount and in its own colour if given. */
export function barChart(
  id: string,
  title: string,
  bars: readonly { label: string; value: number; color?: string }[],
): Chart {
  const rows = bars.length === 0 ? [{ label: 'no costs in this period', value: 0, color: '#ccc' }] : bars;
  return {
    id,
    title,
    width: CHART_WIDTH,
    height: 40 + BAR_PX * rows.length,
    option: {
      tooltip: { trigger: 'item', confine: true, valueFormatter: fmt('money') },
      grid: { left: 12, right: 110, top: 8, bottom: 24, containLabel: true },
      xAxis: { type: 'value', min: 0, axisLabel: { formatter: '${value}' } },
      yAxis: {
        type: 'category',
        inverse: true,
        data: rows.map((b) => b.label),
        axisTick: { show: false },
        axisLabel: { width: 260, overflow: 'truncate' },
      },
      series: [
        {
          type: 'bar',
          name: title,
          barMaxWidth: 18,
          data: rows.map((b, i) => ({
            value: b.value,
            itemStyle: { color: b.color ?? (TEAM_COLORS[i % TEAM_COLORS.length] as string) },
            label: { show: true, position: 'right', formatter: money(b.value), color: '#333' },
          })),
        },
      ],
    },
  };
}

/**
 * The fleet's $/hour over the period, a step function; in minutes over a period under two hours (hundredths of an
 * hour read badly).
 */
function costRateChart(doc: CostReportDocument): Chart | undefined {
  const series = doc.costPerHourSeries;
  if (series.length < 2) return undefined;
  const t0 = doc.sinceSeconds;
  const span = (series[series.length - 1] as CostPoint).atSeconds - t0;
  const [unit, unitSeconds, digits] = span < 7200 ? ['minutes', 60, 3] : ['hours', 3600, 4];
  return {
    id: 'cost-rate',
    title: 'Fleet cost rate ($/hour)',
    width: CHART_WIDTH,
    height: 300,
    option: {
      tooltip: { trigger: 'axis', confine: true, valueFormatter: fmt('money') },
      grid: { left: 70, right: 30, top: 20, bottom: 50 },
      xAxis: {
        type: 'value',
        name: `${unit} since the start of the period`,
        nameLocation: 'middle',
        nameGap: 30,
        min: 0,
        // The axis ends at the report's time; its odd value as a label would crowd the last round tick.
        max: 'dataMax',
        axisLabel: { showMaxLabel: false },
      },
      yAxis: { type: 'value', name: '$/hour', nameLocation: 'middle', nameGap: 50, min: 0 },
      series: [
        {
          type: 'line',
          name: '$/hour',
          step: 'end',
          showSymbol: false,
          color: CATEGORY_COLORS[0],
          areaStyle: { opacity: 0.2 },
          data: series.map((p) => [
            Number(((p.atSeconds - t0) / unitSeconds).toFixed(digits)),
            p.costPerHour,
          ]),
        },
      ],
    },
  };
}

function table(
  headers: readonly string[],
  rows: readonly (readonly string[])[],
  numeric: readonly boolean[] = [],
): string {
  const cls = (i: number): string => (numeric[i] === true ? ' class="num"' : '');
  const head = headers.map((h, i) => `<th${cls(i)}>${escapeXml(h)}</th>`).join('');
  const body = rows
    .map((r) => `<tr>${r.map((c, i) => `<td${cls(i)}>${escapeXml(c)}</td>`).join('')}</tr>`)
    .join('\n');
  return `<div class="table-wrap"><table><thead><tr>${head}</tr></thead><tbody>${body}</tbody></table></div>`;
}

const STYLE = `
  body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #222; margin: 24px auto;
    max-width: 1000px; padding: 0 16px; }
  h1 { font-size: 21px; } h2 { font-size: 17px; margin-top: 30px; } .note { color: #555; font-size: 13px; }
  p.lead { font-size: 16px; }
  .table-wrap { overflow-x: auto; max-width: 100%; }
  table { border-collapse: collapse; margin: 8px 0 16px; font-variant-numeric: tabular-nums; }
  th, td { border-bottom: 1px solid #e0e0e0; padding: 4px 10px; text-align: left; font-size: 13px; white-space: nowrap; }
  th { background: #f3f3f3; } td.num, th.num { text-align: right; }
  figure { margin: 12px 0 20px; } figcaption { color: #555; font-size: 13px; }
  ${CHART_STYLE}
`;

const share = (part: number, whole: number): string =>
  whole > 0 ? ` (${((100 * part) / whole).toFixed(1)}%)` : '';

/**
 * The cost report as a self-contained page: the totals in a sentence and a table, the cost rate over time, cost by
 * team (idle beside them: every dollar is a team's or idle) and by job (bars in their team's colour), and the
 * instances. Charts are ECharts, inline (the smaller "common" build: this page is written every hour and whenever a
 * job ends).
 */
export function reportHtml(doc: CostReportDocument): string {
  const r = doc;
  const attributed = r.byJob.reduce((s, j) => s + j.cost, 0);
  const teams = teamColors(r.byTeam.map((t) => t.id));
  const colorOf = (team: string): string => teams.colorOf.get(team) ?? OTHER_TEAMS_COLOR;
  const rate = costRateChart(doc);
  const topJobs = r.byJob.slice(0, 25);
  const byTeam = barChart('cost-by-team', 'Cost by team', [
    ...r.byTeam.map((t) => ({ label: t.id, value: t.cost, color: colorOf(t.id) })),
    ...(r.idleCost > 0 ? [{ label: IDLE_LABEL, value: r.idleCost, color: IDLE_COLOR }] : []),
  ]);
  const byJob = barChart(
    'cost-by-job',
    'Cost by job',
    topJobs.map((j) => ({
      label: `${j.id} ${j.name}`,
      value: j.cost,
      color: colorOf(j.team),
    })),
  );
  const swatch = (color: string, text: string): string =>
    `<span style="color:${color}">■</span> ${escapeXml(text)}`;
  const named = r.byTeam.length - teams.others.length;
  const othersKey =
    teams.others.length === 0
      ? ''
      : swatch(OTHER_TEAMS_COLOR, `the ${teams.others.length} other teams (past the ${named} costliest)`);
  const teamKey = [...r.byTeam.slice(0, named).map((t) => swatch(colorOf(t.id), t.id)), othersKey]
    .filter((k) => k !== '')
    .join(' &nbsp; ');
  const minimumMinute = doc.minimumMinuteCost ?? 0;
  const summary = table(
    [
      'total',
      'attributed to jobs',
      'idle',
      'migration overhead',
      doc.closed === true ? "$/hour at the period's end" : '$/hour now',
    ],
    [
      [
        money(r.totalCost),
        money(attributed),
        money(r.idleCost),
        money(r.migrationOverheadCost),
        money(r.costPerHourNow),
      ],
    ],
    [true, true, true, true, true],
  );
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>fleetwise costs: ${escapeXml(doc.cluster)} (${escapeXml(doc.generatedAt)})</title>
<style>${STYLE}</style></head><body>
<h1>Costs of cluster ${escapeXml(doc.cluster)}</h1>
<p class="lead" id="lead">${escapeXml(
    `${money(r.totalCost)} spent in this period: ${money(attributed)}${share(attributed, r.totalCost)} by jobs, ` +
      `${money(r.idleCost)}${share(r.idleCost, r.totalCost)} on idle instances; ` +
      (doc.closed === true
        ? `the fleet cost ${money(r.costPerHourNow)}/hour at the period's end.`
        : `the fleet costs ${money(r.costPerHourNow)}/hour now.`),
  )}</p>
<p class="note">From ${escapeXml(doc.since)} to ${escapeXml(doc.generatedAt)}; written because: ${escapeXml(doc.reason)}.
Per-second billing from launch to termination (one-minute minimum); each instance's cost is shared among the tasks on
it by reservation price; time with no task on an instance is idle. Migration overhead: instance time spent
checkpointing and restoring moved jobs (part of their jobs' cost).</p>
${summary}
${
  rate === undefined
    ? ''
    : `<h2>Cost rate</h2><figure>${chartHtml(rate)}<figcaption>The fleet's $/hour: the sum of the hourly prices of the instances running at each moment.${
        minimumMinute > 0
          ? escapeXml(
              ` Instances that ran less than a minute are billed a whole minute (EC2's minimum): the rest of ` +
                `their minute, ${money(minimumMinute)} of the total, is not drawn here.`,
            )
          : ''
      }</figcaption></figure>`
}
<h2>By team</h2>
<figure>${chartHtml(byTeam)}${othersKey === '' ? '' : `<figcaption>${othersKey} share a colour.</figcaption>`}</figure>
<h2>By job${r.byJob.length > topJobs.length ? ` (top ${topJobs.length} of ${r.byJob.length})` : ''}</h2>
<figure>${chartHtml(byJob)}${teamKey === '' ? '' : `<figcaption>Coloured by team: ${teamKey}</figcaption>`}</figure>
${table(
  ['job', 'name', 'team', 'cost', 'of which migration'],
  r.byJob.map((j) => [j.id, j.name, j.team, money(j.cost), money(j.migrationCost)]),
  [false, false, false, true, true],
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
  [false, false, true, true, true],
)}
${chartRuntime('common')}
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
  const json = await putReportFiles(store, doc, keys);
  await store.put(LATEST_REPORT_KEY, json);
  return keys;
}

/** A month's report, under its own keys (not the newest report: `latest.json` stays the rolling one). */
export async function writeMonthlyReportFiles(
  store: ObjectStore,
  doc: CostReportDocument,
  month: string,
): Promise<WrittenReport> {
  const keys: WrittenReport = monthlyReportKeys(month);
  await putReportFiles(store, doc, keys);
  return keys;
}

async function putReportFiles(
  store: ObjectStore,
  doc: CostReportDocument,
  keys: WrittenReport,
): Promise<Buffer> {
  const json = Buffer.from(`${JSON.stringify(doc, null, 2)}\n`, 'utf8');
  await store.put(keys.csv, Buffer.from(reportCsv(doc), 'utf8'));
  await store.put(keys.html, Buffer.from(reportHtml(doc), 'utf8'));
  // JSON last: a reader that finds it finds the other two.
  await store.put(keys.json, json);
  return json;
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
    minimumMinuteCost: z.number().finite().nonnegative().optional(),
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
