import { HttpError } from './errors.js';

const AGE = /^(\d+(?:\.\d+)?)(s|m|h|d|w)$/;
const UNIT_SECONDS: Readonly<Record<string, number>> = { s: 1, m: 60, h: 3600, d: 86400, w: 604800 };
/** An ISO 8601 date, alone or with a time (`T` or a space between) and an optional offset (`Z`, `+01:00`, `-0530`). */
const ISO_TIME =
  /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?)(Z|[+-]\d{2}:?\d{2})?)?$/i;

/**
 * A point in time as users write it: epoch seconds (`1718000000`), an ISO 8601 time (`2024-06-10T00:00:00Z`, UTC
 * unless it names an offset) or an age (`90m`, `24h`, `7d`) counted back from `nowSeconds`. Undefined when it is none
 * of these.
 */
export function parseSince(text: string, nowSeconds: number): number | undefined {
  const seconds = sinceSeconds(text.trim(), nowSeconds);
  // 400 digits read as Infinity: a time no clock reaches is no point in time.
  return seconds !== undefined && Number.isFinite(seconds) ? seconds : undefined;
}

function sinceSeconds(trimmed: string, nowSeconds: number): number | undefined {
  if (/^\d+(\.\d+)?$/.test(trimmed)) return Number(trimmed);
  const age = AGE.exec(trimmed);
  if (age !== null) return nowSeconds - Number(age[1]) * (UNIT_SECONDS[age[2] ?? 's'] ?? 1);
  return isoSeconds(trimmed);
}

/**
 * An ISO 8601 time in epoch seconds. A time without an offset is UTC, as a date alone is: the CLI checks the text in
 * its user's zone and the controller reads it in its own, and in local time the two would name different instants.
 * A day the month does not have (`2026-02-30`) is no date, not one rolled into the next month.
 */
function isoSeconds(text: string): number | undefined {
  const m = ISO_TIME.exec(text);
  if (m === null) return undefined;
  const [, year = '', month = '', day = '', time, offset] = m;
  const date = `${year}-${month}-${day}`;
  if (new Date(Date.UTC(Number(year), Number(month) - 1, Number(day))).toISOString().slice(0, 10) !== date)
    return undefined;
  const ms = Date.parse(time === undefined ? date : `${date}T${time}${(offset ?? 'Z').toUpperCase()}`);
  return Number.isNaN(ms) ? undefined : ms / 1000;
}

export const SINCE_RULE =
  'epoch seconds, an ISO 8601 time (UTC unless it names an offset, e.g. 2024-06-10T00:00:00Z) or an age like 24h or 7d';

/** A query parameter read by `parseSince`, or a 400 that names the parameter and what it takes. */
export function sinceQueryParam(field: string, text: string): number {
  const seconds = parseSince(text, Date.now() / 1000);
  if (seconds === undefined)
    throw new HttpError(400, 'invalid query', [
      `${field}: expected ${SINCE_RULE}, got ${JSON.stringify(text)}`,
    ]);
  return seconds;
}
