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

/**
 * A job's iterations done as a whole percent, rounded down: 100% only once every iteration is done (896/900 or
 * 899.5/900 is 99%, not the 100% rounding to nearest shows while the job still runs). Without a total, the count.
 */
export function formatProgress(progress: {
  readonly completed: number;
  readonly total: number | null;
}): string {
  const { completed, total } = progress;
  if (total === null || total <= 0) return completed > 0 ? `${completed} it` : '-';
  if (completed >= total) return '100%';
  // The epsilon keeps a float product such as 100 × 0.57 (56.99999…) at its exact percent.
  return `${Math.max(0, Math.min(99, Math.floor((100 * completed) / total + 1e-9)))}%`;
}

export function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

// The controller's views summarise id lists too: one rule for both.
export { formatIdList } from '../core/id-list.js';
