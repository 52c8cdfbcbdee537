import { utcMonthBounds, utcMonthOf } from '../core/utc-month.js';
import { monthlyReportKeys } from '../protocol/object-keys.js';
import type { ObjectStore } from '../storage/object-store.js';
import { locationOf } from './artifacts.js';
import type { DetailedCostReport } from './cost-accounting.js';
import { firstReportedMonth } from './report-writer.js';
import { parseReportDocument } from './reports.js';
import type { StateStore } from './state-store.js';

/**
 * `report --month` for a month that has ended: the month's report the controller stored as the month ended
 * (`reports/months/YYYY-MM.json`, report-writer.ts), not a replay at today's catalog. A price refresh or a changed
 * price override reprices every past hour in a replay; a month's bill, once it has ended, is the one written then.
 */

/** Where a month's figures come from. */
export interface MonthReportSource {
  /** `stored`: the month's report as written at its end; `recomputed`: the history replayed now, at today's prices. */
  readonly from: 'stored' | 'recomputed';
  /** The stored report's location, or why none was used. */
  readonly detail: string;
}

/** A cost report over a period; over a whole UTC month that has ended, with where its figures come from. */
export type PeriodCosts = DetailedCostReport & { readonly monthReport?: MonthReportSource };

/** The UTC month [sinceSeconds, untilSeconds) is, if it is exactly one and has ended by now. */
export function endedMonthOf(
  sinceSeconds: number,
  untilSeconds: number,
  nowSeconds: number,
): string | undefined {
  const month = utcMonthOf(sinceSeconds);
  const { startSeconds, endSeconds } = utcMonthBounds(month);
  return startSeconds === sinceSeconds && endSeconds === untilSeconds && untilSeconds <= nowSeconds
    ? month
    : undefined;
}

/** What of the state store tells whether anything ran in a month. */
export type MonthRecords = Pick<StateStore, 'listJobs' | 'listInstances'>;

/**
 * Why `month`'s report is not in the store and never will be, if so: nothing ran in it (it ended before the state's
 * first record, a job's submission or an instance's launch), or it came before the first month the controller
 * reports, its first job's (an instance it adopted may have run before that).
 */
function neverWritten(state: MonthRecords, month: string): string | undefined {
  const { endSeconds } = utcMonthBounds(month);
  const firstJob = state.listJobs({ limit: 1 })[0]?.submittedAtSeconds;
  // Billed from its launch: one never launched ran nothing.
  const firstInstance = state
    .listInstances()
    .reduce((first, inst) => Math.min(first, inst.launchedAtSeconds ?? first), Number.POSITIVE_INFINITY);
  if (endSeconds <= Math.min(firstJob ?? Number.POSITIVE_INFINITY, firstInstance))
    return `nothing ran in ${month}`;
  const firstMonth = firstReportedMonth(state);
  if (firstMonth === undefined)
    return `no report of ${month} is written: months are reported from the first job's, and no job was submitted yet`;
  return month < firstMonth
    ? `no report of ${month} is written: months are reported from the first job's, ${firstMonth}`
    : undefined;
}

/**
 * The month's stored report, its cost report's fields only (not the chart series nor what it was written for), and
 * where it is; the reason there is none to use otherwise. With the state (`state`), a month that will never have a
 * report says why instead of "not written yet".
 */
export async function readStoredMonthReport(
  objectStore: ObjectStore | undefined,
  month: string,
  state?: MonthRecords,
): Promise<
  | { readonly report: DetailedCostReport; readonly location: string }
  | { readonly report: undefined; readonly why: string }
> {
  if (objectStore === undefined)
    return { report: undefined, why: 'no object store is configured for reports' };
  const key = monthlyReportKeys(month).json;
  const location = locationOf(objectStore, key);
  try {
    if ((await objectStore.head(key)) === undefined)
      return {
        report: undefined,
        why:
          (state === undefined ? undefined : neverWritten(state, month)) ??
          `no report of ${month} at ${location} yet (written once the month has ended)`,
      };
    const doc = parseReportDocument((await objectStore.getBuffer(key)).toString('utf8'), location);
    // A report of another period under the month's key is not the month's.
    if (doc.generatedAtSeconds !== utcMonthBounds(month).endSeconds)
      return { report: undefined, why: `${location} is not a report as at the end of ${month}` };
    const report: DetailedCostReport = {
      generatedAtSeconds: doc.generatedAtSeconds,
      sinceSeconds: doc.sinceSeconds,
      totalCost: doc.totalCost,
      byJob: doc.byJob,
      byTeam: doc.byTeam,
      byInstance: doc.byInstance,
      idleCost: doc.idleCost,
      migrationOverheadCost: doc.migrationOverheadCost,
      costPerHourNow: doc.costPerHourNow,
    };
    return { report, location };
  } catch (e) {
    return { report: undefined, why: `cannot read ${location}: ${(e as Error).message}` };
  }
}
