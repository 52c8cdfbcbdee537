import type { RunSummary } from '../types.js';
import { SUMMARY_FIELDS } from './normalize.js';

/** RFC 4180 quoting: only when the value contains a comma, quote or line break. */
function csvCell(value: string | number | null): string {
  if (value === null) return '';
  const text = typeof value === 'number' ? (Number.isFinite(value) ? String(value) : '') : value;
  return /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

/** runs.csv: a header with RunSummary's field names, then one row per scheduler; null → empty cell. */
export function runsCsv(summaries: readonly RunSummary[]): string {
  const lines = [SUMMARY_FIELDS.join(',')];
  for (const s of summaries) lines.push(SUMMARY_FIELDS.map((f) => csvCell(s[f])).join(','));
  return `${lines.join('\n')}\n`;
}
