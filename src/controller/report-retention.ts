import { COST_REPORTS_PREFIX, costReportKeys, parseCostReportKey } from '../protocol/object-keys.js';
import type { ObjectStore } from '../storage/object-store.js';

/** Cost reports kept in the object store when the settings do not say (`reportsKept`): a week of hourly ones. */
export const DEFAULT_REPORTS_KEPT = 168;

/**
 * Delete every cost report older than the newest `keep` (each report is a JSON, a CSV and an HTML file under one UTC
 * stamp, which sorts chronologically). Each report covers the whole history, so keeping them all made the reports/
 * prefix grow with the square of the history: a report per job end, each as long as the history. JSON goes first, so
 * a report whose JSON is there is whole. Returns how many reports were deleted.
 */
export async function pruneCostReports(store: ObjectStore, keep: number): Promise<number> {
  const stamps = new Set<string>();
  for await (const info of store.list(COST_REPORTS_PREFIX)) {
    const stamp = parseCostReportKey(info.key)?.stamp;
    if (stamp !== undefined) stamps.add(stamp);
  }
  const old = [...stamps].sort().slice(0, Math.max(0, stamps.size - Math.max(1, keep)));
  for (const stamp of old) {
    const keys = costReportKeys(stamp);
    await store.delete(keys.json);
    await store.delete(keys.csv);
    await store.delete(keys.html);
  }
  return old.length;
}
