import { z } from 'zod';

/**
 * The time of an EC2 interruption notice, however it reaches fleetwise: the metadata service's reply to the worker
 * (src/worker/interruption-notices.ts), the worker's heartbeat (worker-protocol.ts `interruption.time`), or an
 * EventBridge event on the interruption queue (src/cloud/interruption-events.ts). One check for all three, so a time
 * one path refuses never reaches a checkpoint-stop's cap through another.
 *
 * Date.parse is no check: it reads 'soon' as NaN (the cap would be dropped) and rolls impossible dates over
 * (2026-02-30 is read as March 2), so the time must have AWS's form, exist on the calendar and the clock as written,
 * and fall between 2000 and 2200: EC2 stamps its notices now, and a time far outside these is a forged or broken one.
 * The bounds also keep a time whose two minutes later a Date cannot hold (year 275760) from throwing where it is used.
 */

const EARLIEST_NOTICE_MS = Date.UTC(2000, 0, 1);
const LATEST_NOTICE_MS = Date.UTC(2200, 0, 1);
// AWS's form: 2026-11-24T13:00:00Z (fractional seconds and an offset allowed).
const ISO_DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/;

/** Why `text` is no notice time (naming what it must be), or undefined when it is one. */
function noticeTimeProblem(text: string): string | undefined {
  const m = ISO_DATE_TIME.exec(text);
  if (m === null) return 'an ISO 8601 date-time like 2026-11-24T13:00:00Z';
  const ms = Date.parse(text);
  if (!(Number.isFinite(ms) && ms >= EARLIEST_NOTICE_MS && ms < LATEST_NOTICE_MS))
    return 'a real date between 2000 and 2200';
  // The fields built again and compared: a rolled-over date or time differs from what was written.
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const at = new Date(Date.UTC(year, month - 1, day, hour, minute, second));
  const exists =
    at.getUTCFullYear() === year &&
    at.getUTCMonth() === month - 1 &&
    at.getUTCDate() === day &&
    at.getUTCHours() === hour &&
    at.getUTCMinutes() === minute &&
    at.getUTCSeconds() === second;
  return exists ? undefined : `a date and time that exist (${text.slice(0, 19)} is not on the calendar)`;
}

/** A notice time in a schema: a refused one is an issue on its field, saying what the time must be. */
export const noticeTimeSchema = z
  .string()
  .max(64)
  .superRefine((text, ctx) => {
    const problem = noticeTimeProblem(text);
    if (problem !== undefined) ctx.addIssue({ code: 'custom', message: problem });
  });

/**
 * When the notice says (epoch ms), or undefined for a time that is none (absent, or refused by the check above: a
 * record written before the check, a source that skips it). The caller then counts from when it saw the notice.
 */
export function noticeTimeMs(text: string | undefined): number | undefined {
  if (text === undefined || noticeTimeProblem(text) !== undefined) return undefined;
  return Date.parse(text);
}
