import type { Catalog } from '../core/catalog.js';
import type { ObjectStore } from '../storage/object-store.js';
import { locationOf } from './artifacts.js';
import type { Clock } from './clock.js';
import { nextUtcMonth, utcMonthBounds, utcMonthOf } from '../core/utc-month.js';
import { billedInstancesIn, computeClosedPeriodReport, type DetailedCostReport } from './cost-accounting.js';
import { pruneCostReports } from './report-retention.js';
import {
  buildReportDocument,
  writeMonthlyReportFiles,
  writeReportFiles,
  type WrittenReport,
} from './reports.js';
import type { ControllerLogger } from './seams.js';
import type { StateStore } from './state-store.js';

export interface ReportWriterDeps {
  readonly store: StateStore;
  readonly clock: Clock;
  readonly log: ControllerLogger;
  /** Where reports go; without one, reports are only computed on demand. */
  readonly objectStore: ObjectStore | undefined;
  readonly clusterName: string;
  readonly everySeconds: number;
  /** Cost reports kept in the object store (the newest); older ones are deleted after each write. */
  readonly keep: number;
  /** The cost report since the beginning. */
  readonly costs: () => DetailedCostReport;
  /** The current catalog (a price refresh replaces it). */
  readonly catalog: () => Catalog;
  /** Record an event, never throwing (the loop goes on when the store fails). */
  readonly safeEvent: (kind: string, message: string) => void;
  /**
   * How long after the fact a record dated before it may still be made (the workers' heartbeat timeout: a worker
   * reports a task's exit at its next heartbeat, which a controller that was down hears only once it is back, dated
   * when the task exited). An ended month's report waits this long past the month's end and past this controller's
   * start, so such an exit is in it. Default 0.
   */
  readonly lateRecordsWithinSeconds?: number;
}

/** The first month whose report the controller writes: its first job's; none before any job. */
export function firstReportedMonth(store: Pick<StateStore, 'listJobs'>): string | undefined {
  const first = store.listJobs({ limit: 1 })[0];
  return first === undefined ? undefined : utcMonthOf(first.submittedAtSeconds);
}

/** The state store's record of the last month whose report is in the object store (`YYYY-MM`). */
export const MONTHS_REPORTED_KEY = 'reports.monthsWrittenThrough';

/**
 * Cost reports in the object store: every `everySeconds`, when jobs end, and on request; and once a UTC month has
 * ended, that month's report (`reports/months/YYYY-MM.*`), kept for good: what each team spent in each month, the
 * period a shared budget is usually set by, while the rolling reports are pruned. The loop only starts a due
 * report (`startDue`); the write goes on beside it, one at a time, so the loop never waits for the object store (a
 * hung store delays reports, never rounds).
 */
export class ReportWriter {
  /** Why a report is due before its period (jobs that ended), written with the next pass. */
  private readonly reasons: string[] = [];
  private nextAtSeconds: number;
  /** The report being written, if one is. */
  private writing: Promise<void> | undefined;
  /** After a month's report failed, when to try again (a month's report replays the history: not every pass). */
  private monthRetryAtSeconds = 0;
  /** The next month to report, once the store has said (its end is when the store is asked again). */
  private nextMonth: string | undefined;
  /** When this controller started (records of before may reach it late, until a heartbeat timeout after). */
  private readonly startedAtSeconds: number;

  constructor(private readonly deps: ReportWriterDeps) {
    this.startedAtSeconds = deps.clock.nowSeconds();
    this.nextAtSeconds = this.startedAtSeconds + deps.everySeconds;
  }

  /** When the periodic report is due (the loop wakes for it); not while one is being written (it may take long). */
  get nextDueSeconds(): number {
    return this.writing === undefined ? this.nextAtSeconds : Number.POSITIVE_INFINITY;
  }

  /** A report is due with the next pass, for this reason. */
  due(reason: string): void {
    this.reasons.push(reason);
  }

  /** Start writing the due report, unless one is being written (its reasons then wait for the next call). */
  startDue(): void {
    if (this.writing !== undefined) return;
    const writing = this.writeDue().finally(() => {
      if (this.writing === writing) this.writing = undefined;
    });
    this.writing = writing;
  }

  /** Wait for the report being written, if any (the controller is stopping). */
  async settle(): Promise<void> {
    await this.writing;
  }

  async writeDue(): Promise<void> {
    if (this.deps.objectStore === undefined) return;
    const now = this.deps.clock.nowSeconds();
    const reasons = this.reasons.splice(0);
    if (now >= this.nextAtSeconds) {
      reasons.push('hourly');
      this.nextAtSeconds = now + this.deps.everySeconds;
    }
    if (reasons.length > 0)
      try {
        await this.writeCostReport(reasons.join(', '));
      } catch (e) {
        this.deps.log.error('cannot write the cost report', { error: (e as Error).message });
        this.deps.safeEvent('report.error', (e as Error).message);
      }
    if (now >= this.monthRetryAtSeconds) await this.writeEndedMonth(now);
  }

  /**
   * The report of the oldest ended month not written yet, if any: one month a pass, so a controller that was down
   * over several month ends catches up a month at a time. A month is counted from the first job's submission.
   */
  private async writeEndedMonth(now: number): Promise<void> {
    const objectStore = this.deps.objectStore;
    if (objectStore === undefined) return;
    try {
      const month = this.endedMonthToWrite(now);
      if (month === undefined) return;
      const { startSeconds, endSeconds } = utcMonthBounds(month);
      const catalog = this.deps.catalog();
      // The whole log replayed, once a month: a month's records are not kept apart.
      const report = computeClosedPeriodReport(this.deps.store, catalog, startSeconds, endSeconds);
      const reason = `month ${month}`;
      const doc = buildReportDocument({
        cluster: this.deps.clusterName,
        reason,
        report,
        instances: billedInstancesIn(this.deps.store, catalog),
        closed: true,
      });
      const keys = await writeMonthlyReportFiles(objectStore, doc, month);
      this.deps.store.transaction(() => {
        this.deps.store.setValue(MONTHS_REPORTED_KEY, month);
        this.deps.store.appendEvent({
          kind: 'report.written',
          message: `cost report of ${month} written to ${locationOf(objectStore, keys.json)}`,
          data: { ...keys, reason, totalCost: report.totalCost, atSeconds: now },
        });
      });
    } catch (e) {
      this.monthRetryAtSeconds = now + this.deps.everySeconds;
      this.deps.log.error("cannot write the month's cost report", { error: (e as Error).message });
      this.deps.safeEvent('report.error', (e as Error).message);
    }
  }

  /**
   * The store is read at every pass only until it has a job; then once the month known to be next has ended (it is
   * read again then: another controller on the same store may have written it meanwhile).
   */
  private endedMonthToWrite(now: number): string | undefined {
    if (this.nextMonth !== undefined && this.settledAt(this.nextMonth) > now) return undefined;
    this.nextMonth = this.unwrittenMonth();
    return this.nextMonth !== undefined && this.settledAt(this.nextMonth) <= now ? this.nextMonth : undefined;
  }

  /** When every record of `month` has been made: its end, or this controller's start, and the late records' time. */
  private settledAt(month: string): number {
    const end = utcMonthBounds(month).endSeconds;
    return Math.max(end, this.startedAtSeconds) + (this.deps.lateRecordsWithinSeconds ?? 0);
  }

  /** The month after the last one written, or the first job's month when none is. */
  private unwrittenMonth(): string | undefined {
    const written = this.deps.store.getValue(MONTHS_REPORTED_KEY);
    return typeof written === 'string' ? nextUtcMonth(written) : firstReportedMonth(this.deps.store);
  }

  /** Write the cost report (JSON, CSV, HTML) to the object store now. */
  async writeCostReport(reason = 'on demand'): Promise<WrittenReport> {
    if (this.deps.objectStore === undefined) throw new Error('no object store configured for reports');
    const now = this.deps.clock.nowSeconds();
    const report = this.deps.costs();
    const doc = buildReportDocument({
      cluster: this.deps.clusterName,
      reason,
      report,
      instances: billedInstancesIn(this.deps.store, this.deps.catalog()),
    });
    const keys = await writeReportFiles(this.deps.objectStore, doc);
    await this.pruneOld(this.deps.objectStore);
    this.deps.store.appendEvent({
      kind: 'report.written',
      message: `cost report (${reason}) written to ${locationOf(this.deps.objectStore, keys.json)}`,
      data: { ...keys, reason, totalCost: report.totalCost, atSeconds: now },
    });
    return keys;
  }

  /** Reports beyond the newest `keep` go; a store that fails it fails no report (the next write tries again). */
  private async pruneOld(objectStore: ObjectStore): Promise<void> {
    try {
      await pruneCostReports(objectStore, this.deps.keep);
    } catch (e) {
      this.deps.log.warn('cannot delete old cost reports', { error: (e as Error).message });
    }
  }

  /** API: write a report now; answers where the JSON went (`s3://bucket/reports/costs-….json`). */
  async writeReport(): Promise<string> {
    if (this.deps.objectStore === undefined) throw new Error('no object store configured for reports');
    const keys = await this.writeCostReport('on demand');
    return locationOf(this.deps.objectStore, keys.json);
  }
}
