import type { Catalog } from '../core/catalog.js';
import { utcMonthBounds, utcMonthOf } from '../core/utc-month.js';
import { CO_START_EVENT } from './co-start-records.js';
import { computeClosedPeriodReport, SPOT_RECLAIMED_EVENT } from './cost-accounting.js';
import type { CostTotals } from './incremental-cost-report.js';
import { ADOPTED_SPOT_EVENT, MARKET_FALLBACK_EVENT } from './instance-market.js';
import type { CostLine } from './service.js';
import type { EventRecord, StateStore } from './state-store.js';

/** The current UTC month's bill so far: the fleet's, and each team's jobs' share. */
export interface MonthToDateCosts {
  /** `YYYY-MM`. */
  readonly month: string;
  readonly totalCost: number;
  /** Every team that has ever run a job, 0 for one that ran nothing this month. */
  readonly byTeam: readonly CostLine[];
}

/** The history's bill as the month began, and what it was computed from. */
interface StartOfMonth {
  readonly month: string;
  readonly startSeconds: number;
  readonly catalog: Catalog;
  readonly report: CostTotals;
  /** The instances it bills: one not among them but launched before the month was recorded late. */
  readonly billed: ReadonlySet<string>;
  /** The newest event when it was computed; the events after it are read for changes to the bill before the month. */
  seenSeq: number;
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
 *
 * Both sides must also be of the same records: a record made this month can still change what was billed before it
 * (cloud sync finds an instance ended, or launched, before the month began; a co-start release makes a start held
 * across the month's start idle time; a launch found to have fallen back to on-demand; a task's exit heard this month,
 * its worker's report late, dated before it). The whole history's bill follows such records at once; the bill at the
 * month's start, kept, would not, and the difference would stay wrong for the rest of the month (a team's share above
 * the fleet's bill, or below its jobs'). So each scrape reads the few events since the last that could (instance
 * states and markets, co-start decisions, task and job states) and replays the start's bill again when one concerns
 * the time before the month: an instance launched before it, a job submitted before it, a change dated before it.
 *
 * A spot instance EC2 reclaimed in its first hour is billed nothing (`billedNothing`), its time before the month too:
 * the whole history's bill drops it, so the bill at the month's start must as well (a closed period's report would
 * bill its time up to the period's end, as it was running then), or this month would be credited with its time
 * before the month. Its reclaim, recorded this month, is such a record of the past.
 */
export class MonthToDate {
  private start: StartOfMonth | undefined;

  /** `whole`: the whole history's bill now at `catalog`'s prices (IncrementalCostReport.totals, same catalog). */
  costs(store: StateStore, catalog: Catalog, whole: CostTotals): MonthToDateCosts {
    const month = utcMonthOf(whole.generatedAtSeconds);
    const kept = this.start;
    const start =
      kept?.month === month && kept.catalog === catalog && !pastChanged(store, kept)
        ? kept
        : startOfMonth(store, catalog, month);
    this.start = start;
    const before = new Map(start.report.byTeam.map((t) => [t.id, t.cost]));
    return {
      month,
      totalCost: nonNegative(whole.totalCost - start.report.totalCost),
      byTeam: whole.byTeam.map((t) => ({ id: t.id, cost: nonNegative(t.cost - (before.get(t.id) ?? 0)) })),
    };
  }
}

function startOfMonth(store: StateStore, catalog: Catalog, month: string): StartOfMonth {
  // Read before the replay: an event recorded after it is read at the next scrape, never skipped.
  const seenSeq = newestSeq(store);
  const startSeconds = utcMonthBounds(month).startSeconds;
  const report = computeClosedPeriodReport(store, catalog, 0, startSeconds, true);
  return {
    month,
    startSeconds,
    catalog,
    report,
    billed: new Set(report.byInstance.map((line) => line.id)),
    seenSeq,
  };
}

/** Whether an event since the start's bill was computed can change it; the events read are not read again. */
function pastChanged(store: StateStore, start: StartOfMonth): boolean {
  const newest = newestSeq(store);
  if (newest <= start.seenSeq) return false;
  const events = store
    .listEvents({ kinds: PAST_CHANGING_KINDS, afterSeq: start.seenSeq })
    .filter((e) => e.seq <= newest);
  start.seenSeq = newest;
  return events.some((e) => changesBefore(store, e, start));
}

function changesBefore(store: StateStore, e: EventRecord, start: StartOfMonth): boolean {
  // Recorded this month, so dated before it only when it happened earlier (an exit heard late: task-exit-times.ts).
  if (e.kind === 'task.state' || e.kind === 'job.state') return e.atSeconds < start.startSeconds;
  if (e.kind === CO_START_EVENT) {
    // A readiness report bills the time from itself on as held: nothing before the month, which has begun. (Its
    // withdrawal, `unready`, gives the whole start back to the job, from before the month too.)
    const decision = (e.data as { readonly decision?: unknown } | undefined)?.decision;
    if (decision === 'ready') return false;
    // A release (or a start given up) makes the time its tasks were held since their start idle: before the month
    // only for a job that was there before it.
    const job = e.jobId === undefined ? undefined : store.getJob(e.jobId);
    return job !== undefined && job.submittedAtSeconds < start.startSeconds;
  }
  const inst = e.instanceId === undefined ? undefined : store.getInstance(e.instanceId);
  if (inst?.launchedAtSeconds === undefined || inst.launchedAtSeconds >= start.startSeconds) return false;
  // Billed before the month: its market, its reclaim by EC2 (free in its first hour), a launch the start's bill did not
  // know, or an end dated before the month.
  if (e.kind !== 'instance.state') return true;
  return (
    !start.billed.has(inst.id) ||
    (inst.terminatedAtSeconds !== undefined && inst.terminatedAtSeconds < start.startSeconds)
  );
}

function newestSeq(store: StateStore): number {
  return store.listEvents({ newestFirst: true, limit: 1 })[0]?.seq ?? 0;
}

/** The events whose records can change what was billed before they were recorded. */
const PAST_CHANGING_KINDS = [
  'task.state',
  'job.state',
  'instance.state',
  MARKET_FALLBACK_EVENT,
  ADOPTED_SPOT_EVENT,
  CO_START_EVENT,
  SPOT_RECLAIMED_EVENT,
];

/** A difference of sums of the same figures may come out a rounding error below zero; a bill never does. */
function nonNegative(dollars: number): number {
  return Math.max(0, dollars);
}
