import { z } from 'zod';

/**
 * Durations as people write them in specs: `90s`, `30m`, `2h`, `1d`, combinations such as `1h30m`, or a plain number
 * of seconds (as a number or as text). Every `…Seconds` field a user writes accepts them, so `30m` is not read as an
 * error and nobody has to multiply by 3600.
 */

const UNIT_SECONDS = { s: 1, m: 60, h: 3600, d: 86400 } as const;
const PART = /(\d+(?:\.\d+)?)([smhd])/g;
const WHOLE = /^(?:\d+(?:\.\d+)?[smhd])+$/;
const PLAIN = /^\d+(?:\.\d+)?$/;

export const DURATION_RULE = 'expected seconds or a duration such as 90s, 30m, 2h, 1d or 1h30m';

/**
 * The longest duration a job spec may declare (a job's expected run, a stage, a no-move window): 365 days. Batch jobs
 * are hours to weeks; a bound keeps every computation over durations (sizes, ranks, predictions) finite and cheap.
 */
export const MAX_DURATION_SECONDS = 365 * 86_400;
export const MAX_DURATION_RULE = `at most ${MAX_DURATION_SECONDS} s (365 days)`;

/** Seconds in `text`, or undefined when it is not a duration. */
export function parseDurationSeconds(text: string): number | undefined {
  const t = text.trim().toLowerCase();
  if (PLAIN.test(t)) return Number(t);
  if (!WHOLE.test(t)) return undefined;
  let seconds = 0;
  for (const [, amount, unit] of t.matchAll(PART))
    seconds += Number(amount) * UNIT_SECONDS[unit as keyof typeof UNIT_SECONDS];
  return seconds;
}

/**
 * A `…Seconds` field: a number (seconds) or a duration string, always seconds after parsing. `bounds` checks the
 * seconds (positive, at most, …), so its messages speak of seconds whatever the user wrote.
 */
export function durationSecondsSchema(bounds: z.ZodNumber = z.number().finite()) {
  return z
    .union([z.number(), z.string()], { error: DURATION_RULE })
    .transform((value, ctx): number => {
      if (typeof value === 'number') return value;
      const seconds = parseDurationSeconds(value);
      if (seconds === undefined) {
        ctx.addIssue({ code: 'custom', message: `${DURATION_RULE}, got ${JSON.stringify(value)}` });
        return z.NEVER;
      }
      return seconds;
    })
    .pipe(bounds);
}

/** `45 min`, `9.6 h`, `1 day`, `30 days`: a span of seconds in words, as ETAs say how far ahead ("beyond 30 days"). */
export function durationText(seconds: number): string {
  const s = Math.max(0, seconds);
  if (s < 7200) return `${Math.round(s / 60)} min`;
  if (s < 86_400) return `${(s / 3600).toFixed(1)} h`;
  const days = Number.isInteger(s / 86_400) ? s / 86_400 : Number((s / 86_400).toFixed(1));
  return `${days} ${days === 1 ? 'day' : 'days'}`;
}
