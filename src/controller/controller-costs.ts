import type { Catalog } from '../core/catalog.js';
import type { ObjectStore } from '../storage/object-store.js';
import type { Clock } from './clock.js';
import { computeClosedPeriodReport, computeCostReport, type DetailedCostReport } from './cost-accounting.js';
import { IncrementalCostReport } from './incremental-cost-report.js';
import { withBillingTypes, type BillingTypes } from './instance-market.js';
import { MonthToDate, type MonthToDateCosts } from './month-to-date.js';
import type { StateStore } from './state-store.js';
import { endedMonthOf, readStoredMonthReport, type PeriodCosts } from './stored-month-report.js';

export interface ControllerCostsDeps {
  readonly store: StateStore;
  readonly clock: Clock;
  /** The current catalog (a price refresh replaces it). */
  readonly catalog: () => Catalog;
  /** Types only ended instances ran that the catalog lacks: billed, never planned (instance-market.ts). */
  readonly billingTypes: BillingTypes | undefined;
  /** Where ended months' reports are stored; without one they are recomputed. */
  readonly objectStore: ObjectStore | undefined;
}

/**
 * What the cluster cost, as the API and the reports ask for it: the whole history from the incremental report, a
 * period replayed from the event log, an ended month from its stored report, month to date, per job. Bills are priced
 * from the billing catalog: the current one with the types only ended instances ran.
 */
export class ControllerCosts {
  /** The whole history's cost report, kept up to date from the event log. */
  private readonly historyCosts = new IncrementalCostReport();
  private readonly monthToDate = new MonthToDate();
  /** The billing catalog built from `from`. */
  private billing: { readonly from: Catalog; readonly catalog: Catalog } | undefined;

  constructor(private readonly deps: ControllerCostsDeps) {}

  /** The catalog bills are priced from: the current one, with the types only ended instances ran. */
  billingCatalog(): Catalog {
    // Built once per catalog (a price refresh replaces it): reports look its types up by name, cached per catalog.
    const current = this.deps.catalog();
    if (this.billing?.from !== current)
      this.billing = { from: current, catalog: withBillingTypes(current, this.deps.billingTypes) };
    return this.billing.catalog;
  }

  /**
   * The cost report since `sinceSeconds`. Over the whole history (the report written when jobs end, `fleetwise jobs`)
   * it comes from the incremental report, which reads only the events since its last report; a period replays them.
   * A period that ended before now (`untilSeconds`) is billed as at its end, as a month's stored report is.
   */
  costs(sinceSeconds = 0, untilSeconds?: number): DetailedCostReport {
    const { store, clock } = this.deps;
    const now = clock.nowSeconds();
    if (untilSeconds !== undefined && untilSeconds < now)
      return computeClosedPeriodReport(store, this.billingCatalog(), sinceSeconds, untilSeconds);
    return sinceSeconds <= 0
      ? this.historyCosts.report(store, this.billingCatalog(), now)
      : computeCostReport(store, this.billingCatalog(), now, sinceSeconds);
  }

  /**
   * `costs`, but a whole UTC month that has ended comes from its report stored as it ended (`reports/months/`), so
   * it keeps the prices of then whatever a price refresh or an override changed since; without a stored report
   * (no object store, not written yet, unreadable) it is recomputed at today's prices, and `monthReport` says which.
   */
  async periodCosts(sinceSeconds = 0, untilSeconds?: number): Promise<PeriodCosts> {
    const month =
      untilSeconds === undefined
        ? undefined
        : endedMonthOf(sinceSeconds, untilSeconds, this.deps.clock.nowSeconds());
    if (month === undefined) return this.costs(sinceSeconds, untilSeconds);
    const stored = await readStoredMonthReport(this.deps.objectStore, month, this.deps.store);
    if (stored.report !== undefined)
      return { ...stored.report, monthReport: { from: 'stored', detail: stored.location } };
    return {
      ...this.costs(sinceSeconds, untilSeconds),
      monthReport: { from: 'recomputed', detail: stored.why },
    };
  }

  costsOfJobs(jobIds: readonly string[]): Map<string, number> {
    const { store, clock } = this.deps;
    return this.historyCosts.jobCosts(store, this.billingCatalog(), clock.nowSeconds(), jobIds);
  }

  monthToDateCosts(): MonthToDateCosts {
    const { store, clock } = this.deps;
    const whole = this.historyCosts.totals(store, this.billingCatalog(), clock.nowSeconds());
    return this.monthToDate.costs(store, this.billingCatalog(), whole);
  }
}
