import type { Catalog } from '../core/catalog.js';
import { CO_START_EVENT } from './co-start-records.js';
import { launchedOnSpot } from './instance-market.js';
import { PriceBook } from '../scheduler/reservation-price.js';
import {
  attributeCosts,
  billedInstances,
  jobAndTeamLines,
  reclaimedBySpot,
  PlacementReplay,
  heldRunSeqs,
  type BilledInstance,
  type DetailedCostReport,
  type InstanceCostLine,
  type JobCharge,
  type JobCostLine,
  type JobInfo,
  type Placement,
} from './cost-accounting.js';
import { expandTasks } from './job-spec/tasks.js';
import type { CostLine } from './service.js';
import type { EventRecord, InstanceRecord, JobRecord, StateStore } from './state-store.js';

/**
 * The cost report since the beginning (`computeCostReport` with no period start), kept up to date from the event log
 * rather than replayed from all of it at each call. A controller asks for this report when jobs end (the report in the
 * object store), at every `fleetwise jobs` and at every redraw of `jobs --watch`; replayed in full, each asks for
 * every job and every `task.state` event ever recorded, so the loop paid more for each as the history grew.
 *
 * The first call reads what a replay reads (task states, co-start releases, every job and instance record). Each later
 * call reads only the events after the last one it read: `task.state` events move the placement replay on,
 * `instance.created` and `instance.state` events name the instances whose records to read again, `job.submitted`
 * events the jobs, `job.co-start` releases the held starts. An instance's share of the bill is final once it is
 * terminated (no task can be on it after) and no start on it could still turn out held (a release of the job, when
 * the task goes on to run, makes its share of that time idle), so it is attributed then, once, and kept as
 * figures; only the live instances are attributed at each call. The figures are the ones a full replay gives (a
 * property test holds them equal at every step of random histories): an ended instance is attributed by the same rule from the same records,
 * never patched with deltas, so nothing can drift. A new catalog (a price refresh: instance prices and reservation
 * prices) starts it over.
 */
export class IncrementalCostReport {
  private state: ReportState | undefined;

  /** The report over the whole history at `nowSeconds`. */
  report(store: StateStore, catalog: Catalog, nowSeconds: number): DetailedCostReport {
    if (this.state?.catalog !== catalog) this.state = new ReportState(catalog);
    const state = this.state;
    state.catchUp(store, nowSeconds);
    return state.report(store, nowSeconds);
  }

  /**
   * What each of these jobs has cost over the whole history at `nowSeconds` (0 for one never charged): the report's
   * `byJob` figures, without building the lines of every job and instance (a listing of a few jobs asks this).
   */
  jobCosts(
    store: StateStore,
    catalog: Catalog,
    nowSeconds: number,
    jobIds: readonly string[],
  ): Map<string, number> {
    if (this.state?.catalog !== catalog) this.state = new ReportState(catalog);
    const state = this.state;
    state.catchUp(store, nowSeconds);
    return state.jobCosts(store, nowSeconds, jobIds);
  }

  /**
   * The report's total and team figures over the whole history at `nowSeconds`, without its job and instance lines:
   * kept as running sums of the ended instances' shares, plus the live instances' (a /metrics scrape asks this).
   */
  totals(store: StateStore, catalog: Catalog, nowSeconds: number): CostTotals {
    if (this.state?.catalog !== catalog) this.state = new ReportState(catalog);
    const state = this.state;
    state.catchUp(store, nowSeconds);
    return state.totals(store, nowSeconds);
  }
}

/** A report's bill and each team's share of it, in its order (largest first), without the other lines. */
export interface CostTotals {
  readonly generatedAtSeconds: number;
  readonly totalCost: number;
  readonly byTeam: readonly CostLine[];
}

/** An instance the report follows until its share of the bill is final. */
interface TrackedInstance {
  record: InstanceRecord;
  /** Its place in creation order, the order the report lists instances in. */
  readonly order: number;
  readonly closed: Placement[];
}

interface JobFacts extends JobInfo {
  /** Reservation price ($/h) of each task, by task index. */
  readonly reservationPrices: readonly number[];
}

class ReportState {
  private readonly book: PriceBook;
  private afterSeq = 0;
  private started = false;
  private nextOrder = 0;
  /** The earliest job submission or instance request: the report's period starts there. */
  private firstRecordSeconds = Number.POSITIVE_INFINITY;
  /** The `running` events of the batch being replayed that a co-start release explains (heldRunSeqs). */
  private heldRuns = new Set<number>();
  private readonly live = new Map<string, TrackedInstance>();
  /** Whether each instance runs on spot, once it is known for good (it ran): a lookup in the store each otherwise. */
  private readonly spot = new Map<string, boolean>();
  /** Whether each ended spot instance was EC2's to end (billed nothing in its first hour): read once, when it ended. */
  private readonly reclaimed = new Map<string, boolean>();
  private readonly jobs = new Map<string, JobFacts>();
  private readonly replay: PlacementReplay;
  // Instances whose share is final.
  private readonly finalLines: { readonly order: number; readonly line: InstanceCostLine }[] = [];
  private readonly finalByJob = new Map<string, JobCharge>();
  private readonly finalIds = new Set<string>();
  private finalIdle = 0;
  private finalMigration = 0;
  private finalTotal = 0;
  private readonly finalByTeam = new Map<string, number>();

  constructor(readonly catalog: Catalog) {
    this.book = new PriceBook(catalog);
    this.replay = new PlacementReplay(
      (e) => this.heldRuns.has(e.seq),
      // A placement on an instance whose share is final (or on no instance the store knows) changes nothing.
      (p) => this.live.get(p.instanceId)?.closed.push(p),
    );
  }

  catchUp(store: StateStore, nowSeconds: number): void {
    const cold = !this.started;
    this.started = true;
    const events = this.newEvents(store, cold);
    // Releases first: a transaction's events come together, and a release recorded after the task states it
    // explains must be known when they are replayed. A release never explains a start of an earlier read: the
    // task's own `starting` comes between.
    this.heldRuns = heldRunSeqs(events);
    const jobIds = new Set<string>();
    const instanceIds = new Set<string>();
    for (const e of events) {
      if (e.kind === 'job.submitted' && e.jobId !== undefined) jobIds.add(e.jobId);
      else if ((e.kind === 'instance.created' || e.kind === 'instance.state') && e.instanceId !== undefined)
        instanceIds.add(e.instanceId);
    }
    // The first time, every record at once (cheaper than following their events from the start); then the records
    // the new events name.
    const jobs = records(
      cold ? 'all' : jobIds,
      (id) => store.getJob(id),
      () => store.listJobs(),
    );
    for (const job of jobs) {
      this.firstRecordSeconds = Math.min(this.firstRecordSeconds, job.submittedAtSeconds);
      this.remember(job);
    }
    const instances = records(
      cold ? 'all' : instanceIds,
      (id) => store.getInstance(id),
      () => store.listInstances(),
    );
    for (const record of instances) {
      const tracked = this.live.get(record.id);
      if (tracked !== undefined) tracked.record = record;
      else if (!this.finalIds.has(record.id)) {
        // Creation order: the stores list instances in it, and each one found later is newer.
        this.live.set(record.id, { record, order: this.nextOrder++, closed: [] });
        this.firstRecordSeconds = Math.min(this.firstRecordSeconds, record.requestedAtSeconds);
      }
    }
    for (const e of events) if (e.kind === 'task.state' || e.kind === CO_START_EVENT) this.replay.apply(e);
    this.finalizeEnded(store, nowSeconds);
  }

  /**
   * The events to follow since the last catch-up, in sequence order: one read, so that a transaction's events come
   * whole. Checkpoints, most of the log, are never read; the first time, neither are the job and instance events
   * (their records are read instead).
   */
  private newEvents(store: StateStore, cold: boolean): EventRecord[] {
    const newest = store.listEvents({ newestFirst: true, limit: 1 })[0]?.seq ?? this.afterSeq;
    const events = store
      .listEvents({ kinds: cold ? REPLAYED_EVENT_KINDS : FOLLOWED_EVENT_KINDS, afterSeq: this.afterSeq })
      .filter((e) => e.seq <= newest);
    // Past the newest event of any kind: no later read goes over the same stretch again.
    this.afterSeq = newest;
    return events;
  }

  report(store: StateStore, nowSeconds: number): DetailedCostReport {
    const tracked = [...this.live.values()];
    const { sinceSeconds, liveReport } = this.attributeLive(store, tracked, nowSeconds);
    const byJobCost = new Map([...this.finalByJob].map(([id, c]) => [id, { ...c }]));
    addCharges(byJobCost, liveReport.byJob);
    const { byJob, byTeam } = jobAndTeamLines(byJobCost, (id) => this.job(store, id));
    const liveOrder = new Map(tracked.map((t) => [t.record.id, t.order]));
    const byInstance = [
      ...this.finalLines,
      ...liveReport.byInstance.map((line) => ({ order: liveOrder.get(line.id) ?? 0, line })),
    ]
      .sort((a, b) => a.order - b.order)
      .map((x) => x.line);
    return {
      generatedAtSeconds: nowSeconds,
      sinceSeconds,
      totalCost: byInstance.reduce((s, l) => s + l.cost, 0),
      byJob,
      byTeam,
      byInstance,
      idleCost: this.finalIdle + liveReport.idleCost,
      migrationOverheadCost: this.finalMigration + liveReport.migrationOverheadCost,
      costPerHourNow: liveReport.costPerHourNow,
    };
  }

  jobCosts(store: StateStore, nowSeconds: number, jobIds: readonly string[]): Map<string, number> {
    const { liveReport } = this.attributeLive(store, [...this.live.values()], nowSeconds);
    const live = new Map(liveReport.byJob.map((line) => [line.id, line.cost]));
    // Added in the report's order (the final share, then the live one), so the figures are the report's to the bit.
    return new Map(
      jobIds.map((id) => {
        const final = this.finalByJob.get(id)?.cost;
        const now = live.get(id);
        return [id, final === undefined ? (now ?? 0) : now === undefined ? final : final + now];
      }),
    );
  }

  totals(store: StateStore, nowSeconds: number): CostTotals {
    const { liveReport } = this.attributeLive(store, [...this.live.values()], nowSeconds);
    const byTeam = new Map(this.finalByTeam);
    for (const line of liveReport.byTeam) byTeam.set(line.id, (byTeam.get(line.id) ?? 0) + line.cost);
    let totalCost = this.finalTotal;
    for (const line of liveReport.byInstance) totalCost += line.cost;
    return {
      generatedAtSeconds: nowSeconds,
      totalCost,
      byTeam: [...byTeam]
        .map(([id, cost]) => ({ id, cost }))
        .sort((a, b) => b.cost - a.cost || a.id.localeCompare(b.id)),
    };
  }

  /** The live instances' shares, over the report's period. */
  private attributeLive(
    store: StateStore,
    tracked: readonly TrackedInstance[],
    nowSeconds: number,
  ): { readonly sinceSeconds: number; readonly liveReport: DetailedCostReport } {
    const sinceSeconds = Math.max(0, Math.min(this.firstRecordSeconds, nowSeconds));
    return { sinceSeconds, liveReport: this.attribute(store, tracked, nowSeconds, sinceSeconds) };
  }

  /** Attribute the instances that ended by now, once, and keep only their figures. */
  private finalizeEnded(store: StateStore, nowSeconds: number): void {
    // An ended instance with a start on it that a later release could still explain is not final yet.
    const ended = [...this.live.values()].filter(
      (t) =>
        t.record.terminatedAtSeconds !== undefined &&
        t.record.terminatedAtSeconds <= nowSeconds &&
        !this.replay.mayHoldOn(t.record.id),
    );
    if (ended.length === 0) return;
    const report = this.attribute(store, ended, nowSeconds, 0);
    const order = new Map(ended.map((t) => [t.record.id, t.order]));
    for (const line of report.byInstance) this.finalLines.push({ order: order.get(line.id) ?? 0, line });
    addCharges(this.finalByJob, report.byJob);
    for (const line of report.byJob)
      this.finalByTeam.set(line.team, (this.finalByTeam.get(line.team) ?? 0) + line.cost);
    for (const line of report.byInstance) this.finalTotal += line.cost;
    this.finalIdle += report.idleCost;
    this.finalMigration += report.migrationOverheadCost;
    for (const t of ended) {
      this.live.delete(t.record.id);
      this.finalIds.add(t.record.id);
    }
  }

  /**
   * `attributeCosts` over these instances. The period's start does not cut into them: no instance is requested
   * before the first record.
   */
  private attribute(
    store: StateStore,
    tracked: readonly TrackedInstance[],
    nowSeconds: number,
    sinceSeconds: number,
  ): DetailedCostReport {
    const ids = new Set(tracked.map((t) => t.record.id));
    const placements = [
      ...tracked.flatMap((t) => t.closed),
      ...this.replay.openUntil(nowSeconds).filter((p) => ids.has(p.instanceId)),
    ];
    const records = tracked.map((t) => t.record);
    const ended = new Set(records.filter((r) => r.state === 'terminated').map((r) => r.id));
    const instances: BilledInstance[] = billedInstances(
      records,
      this.catalog,
      (id) => this.onSpot(store, id),
      (id) => ended.has(id) && this.onSpot(store, id) && this.wasReclaimed(store, id),
    );
    const jobs = new Map<string, JobInfo>();
    for (const p of placements) {
      const info = this.job(store, p.jobId);
      if (info !== undefined) jobs.set(p.jobId, info);
    }
    return attributeCosts({
      instances,
      placements,
      reservationPrice: (taskId) => this.reservationPrice(store, taskId),
      jobs,
      sinceSeconds,
      nowSeconds,
    });
  }

  private reservationPrice(store: StateStore, taskId: string): number {
    const dot = taskId.lastIndexOf('.');
    if (dot < 0) return 0;
    return this.job(store, taskId.slice(0, dot))?.reservationPrices[Number(taskId.slice(dot + 1))] ?? 0;
  }

  private job(store: StateStore, jobId: string): JobFacts | undefined {
    const known = this.jobs.get(jobId);
    if (known !== undefined) return known;
    const record = store.getJob(jobId);
    return record === undefined ? undefined : this.remember(record);
  }

  /** Its market as the store records it (instance-market.ts); settled once it has run. */
  /** The reclaim is recorded in the transaction that ends the instance, so an ended one's answer is final. */
  private wasReclaimed(store: StateStore, instanceId: string): boolean {
    const known = this.reclaimed.get(instanceId);
    if (known !== undefined) return known;
    const reclaimed = reclaimedBySpot(store, instanceId);
    this.reclaimed.set(instanceId, reclaimed);
    return reclaimed;
  }

  private onSpot(store: StateStore, instanceId: string): boolean {
    const known = this.spot.get(instanceId);
    if (known !== undefined) return known;
    const spot = launchedOnSpot(store, instanceId);
    if (store.getInstance(instanceId)?.runningAtSeconds !== undefined) this.spot.set(instanceId, spot);
    return spot;
  }

  private remember(record: JobRecord): JobFacts {
    const known = this.jobs.get(record.id);
    if (known !== undefined) return known;
    const reservationPrices: number[] = [];
    for (const t of expandTasks(record.spec))
      reservationPrices[t.index] = this.book.minType(t.template.demand)?.costPerHour ?? 0;
    const facts: JobFacts = { id: record.id, name: record.name, team: record.team, reservationPrices };
    this.jobs.set(record.id, facts);
    return facts;
  }
}

/**
 * The records with these ids (or every one): one read each, or the whole table at once when there are many (a burst
 * of submissions or launches since the last report).
 */
function records<R extends { readonly id: string }>(
  ids: ReadonlySet<string> | 'all',
  one: (id: string) => R | undefined,
  all: () => readonly R[],
): readonly R[] {
  if (ids === 'all') return all();
  if (ids.size <= BULK_READ_ABOVE) return [...ids].flatMap((id) => one(id) ?? []);
  return all().filter((r) => ids.has(r.id));
}

/** Add each line's cost and migration cost to its job's charge. */
function addCharges(charges: Map<string, JobCharge>, lines: readonly JobCostLine[]): void {
  for (const line of lines) {
    const c = charges.get(line.id) ?? { cost: 0, migration: 0 };
    c.cost += line.cost;
    c.migration += line.migrationCost;
    charges.set(line.id, c);
  }
}

/** The events a replay of placements needs: task states and co-start releases. */
const REPLAYED_EVENT_KINDS = ['task.state', CO_START_EVENT];
/** What the report follows after its first read: those, and which job and instance records to read again. */
const FOLLOWED_EVENT_KINDS = [...REPLAYED_EVENT_KINDS, 'job.submitted', 'instance.created', 'instance.state'];

/** Above this many records to read, one read of the whole table is cheaper than a read each. */
const BULK_READ_ABOVE = 64;
