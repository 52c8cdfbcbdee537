import { utcMonthBounds, utcMonthOf } from '../core/utc-month.js';
import { monthlyReportKeys } from '../protocol/object-keys.js';
import type { ObjectStore } from '../storage/object-store.js';
import { locationOf } from './artifacts.js';
import type { DetailedCostReport } from './cost-accounting.js';
import { parseReportDocument } from './reports.js';

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

/**
 * The month's stored report, its cost report's fields only (not the chart series nor what it was written for), and
 * where it is; the reason there is none to use otherwise.
 */
export async function readStoredMonthReport(
  objectStore: ObjectStore | undefined,
  month: string,
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
        why: `no report of ${month} at ${location} yet (written once the month has ended)`,
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
