import type { Catalog } from '../core/catalog.js';
import { utcMonthBounds, utcMonthOf } from '../core/utc-month.js';
import { computeClosedPeriodReport } from './cost-accounting.js';
import type { CostTotals } from './incremental-cost-report.js';
import type { CostLine } from './service.js';
import type { StateStore } from './state-store.js';

/** The current UTC month's bill so far: the fleet's, and each team's jobs' share. */
export interface MonthToDateCosts {
  /** `YYYY-MM`. */
  readonly month: string;
  readonly totalCost: number;
  /** Every team that has ever run a job, 0 for one that ran nothing this month. */
  readonly byTeam: readonly CostLine[];
}

/**
 * This month's costs so far, cheaply enough for every /metrics scrape: the whole history's bill now (the incremental
 * report's running totals) less its bill as the month began. A closed period is billed as at its end, splitting an instance (and its
 * minimum minute) across the end, so the history up to the month's start and the month so far add up to the whole:
 * the difference is what a report over the month so far bills. Both sides must be priced alike: the incremental report
 * bills the whole history at the catalog's prices and starts over on a new one (a price refresh), so the bill at the
 * month's start is kept for a month and a catalog, and replayed when either changes (once a month, once after a
 * restart, once per price refresh), not at each scrape. Every past hour is billed at today's prices, as
 * `report --month` over the month so far bills it.
 */
export class MonthToDate {
  private start:
    { readonly month: string; readonly catalog: Catalog; readonly report: CostTotals } | undefined;

  /** `whole`: the whole history's bill now at `catalog`'s prices (IncrementalCostReport.totals, same catalog). */
  costs(store: StateStore, catalog: Catalog, whole: CostTotals): MonthToDateCosts {
    const month = utcMonthOf(whole.generatedAtSeconds);
    if (this.start?.month !== month || this.start.catalog !== catalog)
      this.start = {
        month,
        catalog,
        report: computeClosedPeriodReport(store, catalog, 0, utcMonthBounds(month).startSeconds),
      };
    const before = new Map(this.start.report.byTeam.map((t) => [t.id, t.cost]));
    return {
      month,
      totalCost: nonNegative(whole.totalCost - this.start.report.totalCost),
      byTeam: whole.byTeam.map((t) => ({ id: t.id, cost: nonNegative(t.cost - (before.get(t.id) ?? 0)) })),
    };
  }
}

/** A difference of sums of the same figures may come out a rounding error below zero; a bill never does. */
function nonNegative(dollars: number): number {
  return Math.max(0, dollars);
}
