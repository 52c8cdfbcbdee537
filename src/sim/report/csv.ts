import type { RunResult } from '../../world/run-result.js';
import {
  COST_FIELDS,
  CROSS_ZONE_COST_FIELD,
  NETWORK_FIELDS,
  QUEUE_FIELDS,
  runRecord,
  SPOT_FIELDS,
  START_FIELDS,
  SUMMARY_FIELDS,
} from './normalize.js';

/** RFC 4180 quoting: only when the value contains a comma, quote or line break. */
function csvCell(value: string | number | null): string {
  if (value === null) return '';
  const text = typeof value === 'number' ? (Number.isFinite(value) ? String(value) : '') : value;
  return /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

/** The run record's last field, in a value-of-time sweep or when one was set: a number, or `auto`. */
const VALUE_OF_TIME_FIELD = 'valueOfTimePerJobHour' as const;

/**
 * runs.csv: a header with the run records' field names (RunSummary's, then the queue metrics when any run had a
 * queue, then the network metrics when any run reports them, then the spot metrics with spot on, then where the
 * dollars went (traffic across zones last, when a run reports the network), then the value of time when any run had one, as report.json's runs), then one row per scheduler;
 * null or absent → empty cell.
 */
export function runsCsv(results: readonly RunResult[]): string {
  const fields = [
    ...SUMMARY_FIELDS,
    ...(results.some((r) => r.queue !== undefined) ? QUEUE_FIELDS : []),
    ...(results.some((r) => r.network !== undefined) ? NETWORK_FIELDS : []),
    ...(results.some((r) => r.starts !== undefined) ? START_FIELDS : []),
    ...(results.some((r) => r.spot !== undefined) ? SPOT_FIELDS : []),
    ...(results.some((r) => r.costBreakdown !== undefined) ? COST_FIELDS : []),
    ...(results.some((r) => r.costBreakdown !== undefined && r.network !== undefined)
      ? [CROSS_ZONE_COST_FIELD]
      : []),
    ...(results.some((r) => r.summary.valueOfTimePerJobHour !== undefined) ? [VALUE_OF_TIME_FIELD] : []),
  ];
  const lines = [fields.join(',')];
  for (const r of results) {
    const record = runRecord(r);
    lines.push(fields.map((f) => csvCell(record[f] ?? null)).join(','));
  }
  return `${lines.join('\n')}\n`;
}
