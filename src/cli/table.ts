/** Plain-text output helpers for the client commands (human tables; `--json` bypasses them). */

/** Left-aligned columns separated by two spaces; numbers are right-aligned. */
export function formatTable(
  headers: readonly string[],
  rows: readonly (readonly (string | number)[])[],
): string {
  const cells = rows.map((r) => headers.map((_, i) => r[i] ?? ''));
  const widths = headers.map((h, i) => Math.max(h.length, ...cells.map((r) => String(r[i]).length)));
  const line = (row: readonly (string | number)[]): string =>
    row
      .map((c, i) => {
        const width = widths[i] ?? 0;
        return typeof c === 'number' ? String(c).padStart(width) : c.padEnd(width);
      })
      .join('  ')
      .trimEnd();
  return [line(headers), ...cells.map(line)].join('\n') + '\n';
}

/** Epoch seconds as `2024-06-10 14:03:22Z`; `-` when absent. */
export function formatTime(epochSeconds: number | undefined): string {
  if (epochSeconds === undefined) return '-';
  return new Date(epochSeconds * 1000)
    .toISOString()
    .replace('T', ' ')
    .replace(/\.\d+Z$/, 'Z');
}

/**
 * `$12.34`; an amount under a cent to four decimals (`$0.0042`), so a short run's cost shows. A float remainder that
 * rounds to nothing at four decimals is nothing (`$0.00`, never `$0.0000` or `$-0.00` beside it).
 */
export function formatDollars(amount: number): string {
  const fine = amount.toFixed(4);
  const text = Math.abs(amount) < 0.01 && Number(fine) !== 0 ? fine : amount.toFixed(2);
  return `$${Number(text) === 0 ? text.replace(/^-/, '') : text}`;
}

export function formatProgress(progress: {
  readonly completed: number;
  readonly total: number | null;
}): string {
  if (progress.total === null || progress.total <= 0)
    return progress.completed > 0 ? `${progress.completed} it` : '-';
  return `${Math.min(100, (100 * progress.completed) / progress.total).toFixed(0)}%`;
}

export function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

// The controller's views summarise id lists too: one rule for both.
export { formatIdList } from '../core/id-list.js';
