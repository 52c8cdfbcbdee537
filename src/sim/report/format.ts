import type { RunResult } from '../../world/run-result.js';
import { timeWeightedUtilization } from './series-metrics.js';

/** One column of the human-readable summary (terminal table and HTML table). */
export interface SummaryColumn {
  readonly header: string;
  /** Numeric columns are right-aligned. */
  readonly numeric: boolean;
  readonly cell: (r: RunResult) => string;
}

const fixed = (digits: number) => {
  const f = new Intl.NumberFormat('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
  return (v: number): string => (Number.isFinite(v) ? f.format(v) : '–');
};
/** $ amounts and ratios as the summary tables print them (en-US grouping). */
export const money = fixed(2);
export const three = fixed(3);
const one = fixed(1);
const integer = fixed(0);
const percent = (v: number | null): string => (v === null ? '–' : `${one(100 * v)}%`);

/** Utilization columns are extras of the report (not in RunSummary): time-weighted allocated ÷ provisioned. */
function utilization(dim: 'Gpus' | 'Vcpus' | 'MemoryGiB') {
  return (r: RunResult): string =>
    percent(
      timeWeightedUtilization(r.series.timeSeconds, r.series[`allocated${dim}`], r.series[`capacity${dim}`]),
    );
}

export const SUMMARY_COLUMNS: readonly SummaryColumn[] = [
  { header: 'scheduler', numeric: false, cell: (r) => r.summary.scheduler },
  { header: 'jobs', numeric: true, cell: (r) => integer(r.summary.jobs) },
  { header: 'total cost $', numeric: true, cell: (r) => money(r.summary.totalCost) },
  { header: 'norm. cost', numeric: true, cell: (r) => percent(r.summary.normalizedCost) },
  { header: 'mean JCT h', numeric: true, cell: (r) => three(r.summary.meanJctHours) },
  { header: 'median JCT h', numeric: true, cell: (r) => three(r.summary.medianJctHours) },
  { header: 'p95 JCT h', numeric: true, cell: (r) => three(r.summary.p95JctHours) },
  { header: 'peak $/h', numeric: true, cell: (r) => money(r.summary.peakCostPerHour) },
  { header: 'migr./job', numeric: true, cell: (r) => three(r.summary.migrationsPerJob) },
  { header: 'instances', numeric: true, cell: (r) => integer(r.summary.instancesLaunched) },
  { header: 'full-reconf.', numeric: true, cell: (r) => three(r.summary.fullReconfigFraction) },
  { header: 'GPU util.', numeric: true, cell: utilization('Gpus') },
  { header: 'vCPU util.', numeric: true, cell: utilization('Vcpus') },
  { header: 'RAM util.', numeric: true, cell: utilization('MemoryGiB') },
  { header: 'wall s', numeric: true, cell: (r) => one(r.summary.wallSeconds) },
];

const orDash =
  (format: (v: number) => string) =>
  (v: number | null | undefined): string =>
    v === null || v === undefined ? '–' : format(v);

/** Columns of the queue layer's metrics, shown when some run had a queue. */
export const QUEUE_COLUMNS: readonly SummaryColumn[] = [
  { header: 'p99 JCT h', numeric: true, cell: (r) => orDash(three)(r.queue?.p99JctHours) },
  { header: 'unfair. %', numeric: true, cell: (r) => orDash(one)(r.queue?.unfairness) },
  { header: 'pred. err %', numeric: true, cell: (r) => orDash(one)(r.queue?.predErrAvg) },
  { header: 'p99 pred. err %', numeric: true, cell: (r) => orDash(one)(r.queue?.predErrP99) },
  {
    header: 'succ. sojourn h',
    numeric: true,
    cell: (r) => orDash(three)(r.queue?.successfulSojournMeanHours),
  },
  { header: 'preempt.', numeric: true, cell: (r) => orDash(integer)(r.queue?.preemptions) },
];

/** The columns for a set of runs: the summary's, plus the queue metrics' when some run had a queue. */
export function summaryColumns(results: readonly RunResult[]): readonly SummaryColumn[] {
  return results.some((r) => r.queue !== undefined)
    ? [...SUMMARY_COLUMNS, ...QUEUE_COLUMNS]
    : SUMMARY_COLUMNS;
}

/** The summary as a plain-text table for the terminal (what `simulate` prints without --json). */
export function summaryTextTable(results: readonly RunResult[]): string {
  const columns = summaryColumns(results);
  const rows = results.map((r) => columns.map((c) => c.cell(r)));
  const widths = columns.map((c, i) => Math.max(c.header.length, ...rows.map((row) => row[i]?.length ?? 0)));
  const render = (cells: readonly string[]): string =>
    cells
      .map((cell, i) => {
        const w = widths[i] ?? 0;
        return columns[i]?.numeric ? cell.padStart(w) : cell.padEnd(w);
      })
      .join('  ')
      .trimEnd();
  const header = render(columns.map((c) => c.header));
  const rule = widths.map((w) => '-'.repeat(w)).join('  ');
  return [header, rule, ...rows.map(render)].join('\n') + '\n';
}
