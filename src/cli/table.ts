/** Plain-text output helpers for the client commands (human tables; `--json` bypasses them). */

/**
 * A formatted number, as the commands print them: an optional sign and `$`, digits with thousands commas and a
 * decimal point, and an optional `%`, `×` or short unit (`3.2 h`, `+0.97 abs`, `16 GiB`).
 */
const NUMERIC = /^[+-]?\$?[+-]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:%|×| ?[A-Za-zµ][A-Za-z/$]{0,3})?$/;

/** What a numeric column shows for a figure it lacks: it aligns with the figures. */
const BLANKS = new Set(['', '-', '–', '—']);

/** Whether a column is numbers: every cell a number or a formatted one (or a blank), at least one not blank. */
function numericColumn(cells: readonly (string | number)[]): boolean {
  let figures = 0;
  for (const c of cells) {
    if (typeof c === 'number') figures += 1;
    else if (NUMERIC.test(c.trim())) figures += 1;
    else if (!BLANKS.has(c.trim())) return false;
  }
  return figures > 0;
}

/**
 * Columns separated by two spaces: a column of numbers (JS numbers, or figures formatted as strings: `$1,337.82`,
 * `-11.98%`, `8.174`) is right-aligned, header and all, so its digits line up; any other column is left-aligned.
 */
export function formatTable(
  headers: readonly string[],
  rows: readonly (readonly (string | number)[])[],
): string {
  const cells = rows.map((r) => headers.map((_, i) => r[i] ?? ''));
  const widths = headers.map((h, i) => Math.max(h.length, ...cells.map((r) => String(r[i]).length)));
  const right = headers.map((_, i) => numericColumn(cells.map((r) => r[i] ?? '')));
  const line = (row: readonly (string | number)[]): string =>
    row
      .map((c, i) => {
        const width = widths[i] ?? 0;
        return right[i] === true ? String(c).padStart(width) : String(c).padEnd(width);
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
