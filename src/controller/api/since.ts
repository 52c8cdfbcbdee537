import { HttpError } from './errors.js';

const AGE = /^(\d+(?:\.\d+)?)(s|m|h|d|w)$/;
const UNIT_SECONDS: Readonly<Record<string, number>> = { s: 1, m: 60, h: 3600, d: 86400, w: 604800 };

/**
 * A point in time as users write it: epoch seconds (`1718000000`), an ISO 8601 time (`2024-06-10T00:00:00Z`) or
 * an age (`90m`, `24h`, `7d`) counted back from `nowSeconds`. Undefined when it is none of these.
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
  if (!/^\d{4}-\d{2}-\d{2}/.test(trimmed)) return undefined;
  const ms = Date.parse(trimmed);
  return Number.isNaN(ms) ? undefined : ms / 1000;
}

export const SINCE_RULE = 'epoch seconds, an ISO 8601 time or an age like 24h or 7d';

/** A query parameter read by `parseSince`, or a 400 that names the parameter and what it takes. */
export function sinceQueryParam(field: string, text: string): number {
  const seconds = parseSince(text, Date.now() / 1000);
  if (seconds === undefined)
    throw new HttpError(400, 'invalid query', [
      `${field}: expected ${SINCE_RULE}, got ${JSON.stringify(text)}`,
    ]);
  return seconds;
}
