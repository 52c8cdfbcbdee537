/**
 * Calendar months in UTC, the period AWS bills by: a month is named `YYYY-MM` and runs from its first second to the
 * first second of the next.
 */

/** `YYYY-MM` of the UTC month holding this time (epoch seconds). */
export function utcMonthOf(seconds: number): string {
  return new Date(Math.floor(seconds) * 1000).toISOString().slice(0, 7);
}

/** The month's start and the next month's start, in epoch seconds. */
export function utcMonthBounds(month: string): {
  readonly startSeconds: number;
  readonly endSeconds: number;
} {
  const match = /^(\d{4})-(\d{2})$/.exec(month);
  const year = Number(match?.[1]);
  const index = Number(match?.[2]) - 1;
  if (match === null || index < 0 || index > 11)
    throw new Error(`${JSON.stringify(month)} is not a month (YYYY-MM)`);
  return { startSeconds: Date.UTC(year, index, 1) / 1000, endSeconds: Date.UTC(year, index + 1, 1) / 1000 };
}

/** The month after this one. */
export function nextUtcMonth(month: string): string {
  return utcMonthOf(utcMonthBounds(month).endSeconds);
}
