import type { Catalog } from '../core/catalog.js';
import { perHourToPerSecond } from '../core/units.js';
import { PriceBook } from '../scheduler/reservation-price.js';
import { CO_START_EVENT, HELD_FROM_READINESS } from './co-start-records.js';
import { reclaimIsFree } from '../core/spot.js';
import { billedPricePerHour, launchedOnSpot } from './instance-market.js';
import { expandTasks } from './job-spec/tasks.js';
import type { CostLine, CostReport } from './service.js';
import { PLACED_TASK_STATES } from './state/lifecycle.js';
import type { EventRecord, InstanceRecord, JobRecord, StateStore, TaskState } from './state-store.js';

/**
 * Cost accounting (cost accounting): per-second billing of every instance from its launch
 * to its termination, each instance's cost attributed to the tasks on it by reservation-price share (Eva §4.2: a
 * task's reservation price is what it would cost alone, so the share is what each task "brings" to the packing),
 * rolled up per job and team. Instance time with no task is idle; task time spent checkpointing off an instance or
 * restoring on a new one is migration overhead (part of its job's cost, and also reported on its own).
 *
 * Pure: `attributeCosts` works on plain intervals; `computeCostReport` reads them from the store (instance records
 * and the `task.state` event log). A cost is computed from the records, never patched with deltas, so it cannot drift
 * (the negative-cost bug of Karpenter's incremental cost metric, industry-anchors.md §(c) 12); the incremental report
 * (incremental-cost-report.ts) computes an ended instance's share once, by the same rule, and keeps it.
 */

/** EC2 bills Linux on-demand instances per second with a one-minute minimum. */
export const MINIMUM_BILLED_SECONDS = 60;

/**
 * The event recording that EC2 ended a spot instance the controller did not ask to end (it found it shutting down,
 * stopped or gone): the cost reports read it, so it is kept in the store with the instance's history.
 */
export const SPOT_RECLAIMED_EVENT = 'instance.spot-reclaimed';

/** Whether EC2 ended this spot instance itself (SPOT_RECLAIMED_EVENT). */
export function reclaimedBySpot(store: Pick<StateStore, 'listEvents'>, instanceId: string): boolean {
  return store.listEvents({ instanceId, kind: SPOT_RECLAIMED_EVENT, limit: 1 }).length > 0;
}

/** Whether an instance is billed nothing: a spot instance EC2 reclaimed within its first hour. */
export function billedNothing(inst: BilledInstance): boolean {
  return (
    inst.reclaimedBySpot === true &&
    inst.terminatedAtSeconds !== undefined &&
    reclaimIsFree(inst.fromSeconds, inst.terminatedAtSeconds)
  );
}

export interface BilledInstance {
  readonly id: string;
  readonly typeName: string;
  readonly costPerHour: number;
  /** Billing starts at the launch… */
  readonly fromSeconds: number;
  /** …and ends at the termination; undefined while the instance is billed still. */
  readonly terminatedAtSeconds: number | undefined;
  /** EC2 ended it, a spot instance (SPOT_RECLAIMED_EVENT): within its first hour, it is billed nothing. */
  readonly reclaimedBySpot?: boolean | undefined;
}

/**
 * `work` and `migration` are charged to the task's job (`migration` also reported as overhead). `held` is a co-started
 * task's start held for its siblings: it weighs in its instance's split like any task on it (it holds its part of the
 * packing), but its share is the instance's idle time, not its job's.
 */
export type PlacementKind = 'work' | 'migration' | 'held';

/** A task on an instance during [from, to). */
export interface Placement {
  readonly taskId: string;
  readonly jobId: string;
  readonly instanceId: string;
  readonly fromSeconds: number;
  readonly toSeconds: number;
  readonly kind: PlacementKind;
}

export interface JobInfo {
  readonly id: string;
  readonly name: string;
  readonly team: string;
}

export interface AttributionInput {
  readonly instances: readonly BilledInstance[];
  readonly placements: readonly Placement[];
  /** Reservation price ($/h) per task: the weight of its share. */
  readonly reservationPrice: (taskId: string) => number;
  readonly jobs: ReadonlyMap<string, JobInfo>;
  readonly sinceSeconds: number;
  readonly nowSeconds: number;
  /**
   * The period ended at `nowSeconds` (a closed month) and later records are in the store: nothing past it is billed,
   * an instance that ended later was still running then, and its minimum billed minute falls in each period in part.
   */
  readonly closed?: boolean;
  /**
   * A closed period's instance that EC2 reclaimed in its first hour after the period ended is free in it too, as the
   * whole history bills it (month-to-date subtracts such a period from the whole): not as written at the period's end.
   */
  readonly freeAsKnownNow?: boolean;
}

export interface JobCostLine extends CostLine {
  readonly team: string;
  readonly name: string;
  /** The part of `cost` spent checkpointing and restoring moved tasks. */
  readonly migrationCost: number;
}

export interface InstanceCostLine extends CostLine {
  readonly typeName: string;
  readonly idleCost: number;
  readonly billedSeconds: number;
}

export interface DetailedCostReport extends CostReport {
  readonly byJob: readonly JobCostLine[];
  readonly byInstance: readonly InstanceCostLine[];
  /** Current $/hour of the instances still billed. */
  readonly costPerHourNow: number;
}

/**
 * Split each instance's billed time into segments over which the set of tasks on it is constant; a segment's cost goes
 * to its tasks in proportion to their reservation prices, or to idle when it has none. A held task's share goes to
 * idle. The one-minute minimum is charged to idle. Only time within [since, now] counts. A spot instance EC2
 * reclaimed within its first hour costs nothing (`billedNothing`): its time is its tasks' and idle time at $0.
 */
export function attributeCosts(input: AttributionInput): DetailedCostReport {
  const since = input.sinceSeconds;
  const now = input.nowSeconds;
  const byInstancePlacements = new Map<string, Placement[]>();
  for (const p of input.placements) {
    const list = byInstancePlacements.get(p.instanceId);
    if (list === undefined) byInstancePlacements.set(p.instanceId, [p]);
    else list.push(p);
  }
  const jobCost = new Map<string, JobCharge>();
  const instanceLines: InstanceCostLine[] = [];
  let idleTotal = 0;
  let migrationTotal = 0;
  let costPerHourNow = 0;
  for (const inst of input.instances) {
    const ended =
      inst.terminatedAtSeconds !== undefined && (input.closed !== true || inst.terminatedAtSeconds <= now);
    // Known free only once it ended: a closed period's report bills one still running at the period's end (unless
    // asked to bill it as the whole history now does).
    const free = (ended || input.freeAsKnownNow === true) && billedNothing(inst);
    const ratePerSecond = free ? 0 : perHourToPerSecond(inst.costPerHour);
    if (!ended && inst.fromSeconds <= now) costPerHourNow += inst.costPerHour;
    // Tasks can only be on it until it ended (or now); a terminated instance owes at least the minimum (not one EC2
    // charges nothing for).
    const usedTo = Math.min(inst.terminatedAtSeconds ?? now, now);
    const billedTo =
      inst.terminatedAtSeconds !== undefined
        ? Math.max(inst.terminatedAtSeconds, inst.fromSeconds + (free ? 0 : MINIMUM_BILLED_SECONDS))
        : now;
    const to = input.closed === true ? Math.min(billedTo, now) : billedTo;
    const from = Math.max(inst.fromSeconds, since);
    let instanceCost = 0;
    let idle = 0;
    if (to > from) {
      const placements = (byInstancePlacements.get(inst.id) ?? []).filter(
        (p) => p.toSeconds > from && p.fromSeconds < usedTo,
      );
      const cuts = new Set<number>([from, to, Math.min(Math.max(usedTo, from), to)]);
      for (const p of placements) {
        if (p.fromSeconds > from && p.fromSeconds < to) cuts.add(p.fromSeconds);
        if (p.toSeconds > from && p.toSeconds < to) cuts.add(p.toSeconds);
      }
      const points = [...cuts].sort((a, b) => a - b);
      for (let k = 0; k + 1 < points.length; k++) {
        const a = points[k] as number;
        const b = points[k + 1] as number;
        if (b <= a) continue;
        const cost = (b - a) * ratePerSecond;
        instanceCost += cost;
        const present = a >= usedTo ? [] : placements.filter((p) => p.fromSeconds <= a && p.toSeconds >= b);
        const totalWeight = present.reduce((s, p) => s + weight(input.reservationPrice(p.taskId)), 0);
        if (present.length === 0 || totalWeight <= 0) {
          idle += cost;
          continue;
        }
        for (const p of present) {
          const share = (cost * weight(input.reservationPrice(p.taskId))) / totalWeight;
          if (p.kind === 'held') {
            idle += share;
            continue;
          }
          const line = jobCost.get(p.jobId) ?? { cost: 0, migration: 0 };
          line.cost += share;
          if (p.kind === 'migration') {
            line.migration += share;
            migrationTotal += share;
          }
          jobCost.set(p.jobId, line);
        }
      }
    }
    idleTotal += idle;
    // An instance billed for none of the period (it ended before it began) has no line: a report over a day of a
    // long-lived controller lists that day's instances, not every one it ever ran.
    if (to <= from) continue;
    instanceLines.push({
      id: inst.id,
      typeName: inst.typeName,
      cost: instanceCost,
      idleCost: idle,
      billedSeconds: Math.max(0, to - from),
    });
  }
  const { byJob, byTeam } = jobAndTeamLines(jobCost, (id) => input.jobs.get(id));
  return {
    generatedAtSeconds: now,
    sinceSeconds: since,
    totalCost: instanceLines.reduce((s, l) => s + l.cost, 0),
    byJob,
    byTeam,
    byInstance: instanceLines,
    idleCost: idleTotal,
    migrationOverheadCost: migrationTotal,
    costPerHourNow,
  };
}

/** What a job was charged, and the part of it spent moving. */
export interface JobCharge {
  cost: number;
  migration: number;
}

/** The per-job lines (costliest first, named from `info`) and their sums per team. */
export function jobAndTeamLines(
  charges: ReadonlyMap<string, JobCharge>,
  info: (jobId: string) => JobInfo | undefined,
): { readonly byJob: JobCostLine[]; readonly byTeam: CostLine[] } {
  const byJob: JobCostLine[] = [...charges.entries()]
    .map(([id, c]) => {
      const job = info(id);
      return {
        id,
        name: job?.name ?? id,
        team: job?.team ?? 'unknown',
        cost: c.cost,
        migrationCost: c.migration,
      };
    })
    .sort((a, b) => b.cost - a.cost || a.id.localeCompare(b.id));
  const teamCost = new Map<string, number>();
  for (const j of byJob) teamCost.set(j.team, (teamCost.get(j.team) ?? 0) + j.cost);
  const byTeam: CostLine[] = [...teamCost.entries()]
    .map(([id, cost]) => ({ id, cost }))
    .sort((a, b) => b.cost - a.cost || a.id.localeCompare(b.id));
  return { byJob, byTeam };
}

/** A zero reservation price would take no share; a tiny floor keeps such a task's time from counting as idle. */
function weight(reservationPrice: number): number {
  return Number.isFinite(reservationPrice) && reservationPrice > 0 ? reservationPrice : 1e-9;
}

// ---------------------------------------------------------------------------------------------------------------
// From the store

interface TaskStateData {
  readonly from?: unknown;
  readonly to?: unknown;
  readonly instanceId?: unknown;
}

/**
 * The `task.state` events (their seqs) that end a co-started task's held start, among `events` (in log order;
 * `task.state` and `job.co-start` events count, others are skipped): the `running` that a release explains, and the
 * end of a start that a re-plan or the job's end left unreleased. Such a decision is recorded in the transaction that
 * moves its tasks on, before or after their states: for each task it names, the event it explains is that task's
 * event next to the decision in the log (no other event of the task between them) and within a second of it.
 * Matching on time alone would also take a task's earlier start, run just before it went back to `starting` and was
 * released. A re-plan recorded by an older controller names no tasks: it explains its job's starts it is next to.
 */
export function heldRunSeqs(events: readonly EventRecord[]): Set<number> {
  const held = new Set<number>();
  events.forEach((decision, i) => {
    const data = decision.data as { readonly decision?: unknown; readonly tasks?: unknown } | undefined;
    if (decision.kind !== CO_START_EVENT) return;
    const kind = data?.decision;
    if (kind !== 'release' && kind !== 'replan' && kind !== 'ended') return;
    const near = (e: EventRecord): boolean => Math.abs(e.atSeconds - decision.atSeconds) <= 1;
    const ofTask = (e: EventRecord | undefined, taskId: string): boolean =>
      e?.kind === 'task.state' && e.taskId === taskId;
    // The reconciler names the tasks of every decision it records (reconcile/effects/tasks.ts).
    const named = data?.tasks;
    const tasks = Array.isArray(named)
      ? named.filter((t): t is string => typeof t === 'string')
      : kind === 'replan'
        ? neighbourTasksOf(events, i, decision.jobId, near)
        : [];
    // A release explains a start that ends running; a re-plan or an end, one that ends otherwise.
    const explains = (e: EventRecord): boolean =>
      kind === 'release' ? stateTo(e) === 'running' : stateFrom(e) === 'starting' && stateTo(e) !== 'running';
    for (const taskId of tasks) {
      let before = i - 1;
      while (before >= 0 && near(events[before] as EventRecord) && !ofTask(events[before], taskId))
        before -= 1;
      let after = i + 1;
      while (after < events.length && near(events[after] as EventRecord) && !ofTask(events[after], taskId))
        after += 1;
      for (const e of [events[before], events[after]])
        if (e !== undefined && ofTask(e, taskId) && near(e) && explains(e)) held.add(e.seq);
    }
  });
  return held;
}

/** The tasks of `jobId` with a state event among the events within a second of `events[i]`, on either side. */
function neighbourTasksOf(
  events: readonly EventRecord[],
  i: number,
  jobId: string | undefined,
  near: (e: EventRecord) => boolean,
): string[] {
  const tasks = new Set<string>();
  for (const step of [-1, 1])
    for (let k = i + step; k >= 0 && k < events.length && near(events[k] as EventRecord); k += step) {
      const e = events[k] as EventRecord;
      if (e.kind === 'task.state' && e.jobId === jobId && e.taskId !== undefined) tasks.add(e.taskId);
    }
  return [...tasks];
}

function stateTo(e: EventRecord): string | undefined {
  const to = (e.data as TaskStateData | undefined)?.to;
  return typeof to === 'string' ? to : undefined;
}

function stateFrom(e: EventRecord): string | undefined {
  const from = (e.data as TaskStateData | undefined)?.from;
  return typeof from === 'string' ? from : undefined;
}

/**
 * Task placements replayed from the `task.state` event log, one event at a time (the incremental cost report feeds
 * it new events as they come; `placementsFromEvents` feeds it the whole log). `checkpointing` is migration overhead,
 * and so is `starting` after the task was stopped once (restoring a checkpoint on its new instance). A co-started
 * task is prepared as any start is (its job's time), then held for its siblings from when its worker reported it
 * ready (a `ready` co-start event) until its release: that share is its instance's idle time (a `held` placement: the
 * job view and /metrics show it as the job's wait for its siblings), neither the job's nor the other tasks' on the
 * instance, and so is a hold that a co-start re-plan, or the job's end before a release, ended. It is billed so while
 * it goes on, so what a job has cost so far never falls at its release. Whether a co-start decision explains the
 * event that ends a start is `heldRun` (see `heldRunSeqs`); a release is recorded in the transaction that sets the
 * tasks running, and a transaction's events are read together, so it is known by the time that event is replayed. A
 * decision of an older controller, whose log has no readiness, made the whole start held.
 */
export class PlacementReplay {
  private readonly open = new Map<string, OpenPlacement>();
  private readonly stoppedBefore = new Set<string>();

  constructor(
    private readonly heldRun: (e: EventRecord) => boolean,
    private readonly onClosed: (placement: Placement) => void,
  ) {}

  apply(e: EventRecord): void {
    if (e.kind === CO_START_EVENT) {
      this.applyCoStart(e);
      return;
    }
    if (e.kind !== 'task.state' || e.taskId === undefined || e.jobId === undefined) return;
    const data = (
      typeof e.data === 'object' && e.data !== null && !Array.isArray(e.data) ? e.data : {}
    ) as TaskStateData;
    const to = stateTo(e) as TaskState | undefined;
    const o = this.open.get(e.taskId);
    if (to === undefined) {
      // Not a start's end that a release explains: the start it follows was not held.
      if (o !== undefined) o.holdable = false;
      return;
    }
    if (o !== undefined) {
      this.open.delete(e.taskId);
      if (!o.holdable || !this.heldRun(e)) this.close(e.taskId, o, e.atSeconds);
      else if (o.readyAt !== undefined || o.heldFromReadiness) this.closeHeld(e.taskId, o, e.atSeconds);
      else this.close(e.taskId, { ...o, kind: 'held' }, e.atSeconds);
    }
    if (to === 'stopped') this.stoppedBefore.add(e.taskId);
    const instanceId = typeof data.instanceId === 'string' ? data.instanceId : undefined;
    if (!PLACED_TASK_STATES.includes(to) || instanceId === undefined) return;
    const kind: PlacementKind =
      to === 'checkpointing' || (to === 'starting' && this.stoppedBefore.has(e.taskId))
        ? 'migration'
        : 'work';
    this.open.set(e.taskId, {
      jobId: e.jobId,
      instanceId,
      from: e.atSeconds,
      kind,
      holdable: to === 'starting',
      heldFromReadiness: false,
    });
  }

  /**
   * A task reported ready on the instance of its open start holds it from then (reported no longer, not since); an end
   * of held starts without a release that bills holds from readiness marks the starts it names, which it precedes.
   */
  private applyCoStart(e: EventRecord): void {
    const data = (e.data ?? {}) as {
      readonly decision?: unknown;
      readonly tasks?: unknown;
      readonly heldFrom?: unknown;
    };
    const tasks = Array.isArray(data.tasks)
      ? data.tasks.filter((t): t is string => typeof t === 'string')
      : [];
    for (const taskId of tasks) {
      const o = this.open.get(taskId);
      if (o === undefined || !o.holdable) continue;
      if (data.decision === 'ready' && e.instanceId === o.instanceId) o.readyAt = e.atSeconds;
      else if (data.decision === 'unready' && e.instanceId === o.instanceId) o.readyAt = undefined;
      else if (
        (data.decision === 'replan' || data.decision === 'ended') &&
        data.heldFrom === HELD_FROM_READINESS
      )
        o.heldFromReadiness = true;
    }
  }

  /**
   * Whether a start still open on this instance may yet turn out to have been held: a release of its job when the
   * task goes on to run would make its time so far the instance's idle time, even after the instance has ended.
   */
  mayHoldOn(instanceId: string): boolean {
    for (const o of this.open.values()) if (o.holdable && o.instanceId === instanceId) return true;
    return false;
  }

  /**
   * The placements still open, as if they ended now (the replay goes on unchanged); a start reported ready is held
   * from then, as its release or an end without one will bill it.
   */
  openUntil(nowSeconds: number): Placement[] {
    const out: Placement[] = [];
    for (const [taskId, o] of this.open) {
      const readyAt = o.holdable ? o.readyAt : undefined;
      if (readyAt === undefined) {
        if (nowSeconds > o.from) out.push(placementOf(taskId, o, nowSeconds));
        continue;
      }
      if (readyAt > o.from) out.push(placementOf(taskId, o, Math.min(readyAt, nowSeconds)));
      if (nowSeconds > readyAt)
        out.push(placementOf(taskId, { ...o, from: readyAt, kind: 'held' }, nowSeconds));
    }
    return out;
  }

  private close(taskId: string, o: OpenPlacement, at: number): void {
    if (at > o.from) this.onClosed(placementOf(taskId, o, at));
  }

  /** A held start that ended at `at`: its job's until its readiness (if it had one), held from then. */
  private closeHeld(taskId: string, o: OpenPlacement, at: number): void {
    if (o.readyAt === undefined) {
      this.close(taskId, o, at);
      return;
    }
    this.close(taskId, o, Math.min(o.readyAt, at));
    this.close(taskId, { ...o, from: o.readyAt, kind: 'held' }, at);
  }
}

interface OpenPlacement {
  readonly jobId: string;
  readonly instanceId: string;
  readonly from: number;
  readonly kind: PlacementKind;
  /** A start that a release of its job may turn out to have held (then it is the instance's idle time). */
  holdable: boolean;
  /** When its worker last reported it ready here (a `ready` co-start event); undefined when not, or no longer. */
  readyAt?: number | undefined;
  /** An end without a release that bills holds from readiness named it: without one, nothing of it was held. */
  heldFromReadiness: boolean;
}

function placementOf(taskId: string, o: OpenPlacement, to: number): Placement {
  return {
    taskId,
    jobId: o.jobId,
    instanceId: o.instanceId,
    fromSeconds: o.from,
    toSeconds: to,
    kind: o.kind,
  };
}

/**
 * Task placements replayed from the whole log of `task.state` and `job.co-start` events (PlacementReplay), those
 * still open ending now.
 */
export function placementsFromEvents(events: readonly EventRecord[], nowSeconds: number): Placement[] {
  const out: Placement[] = [];
  const held = heldRunSeqs(events);
  const replay = new PlacementReplay(
    (e) => held.has(e.seq),
    (p) => out.push(p),
  );
  for (const e of events) replay.apply(e);
  return [...out, ...replay.openUntil(nowSeconds)];
}

/**
 * The instances that were billed, each at its price: its pool's spot price when `onSpot` says it runs on spot (the
 * store's record of its market, instance-market.ts), else its type's on-demand price; `reclaimed` says which spot
 * instances EC2 ended (SPOT_RECLAIMED_EVENT).
 */
export function billedInstances(
  instances: readonly InstanceRecord[],
  catalog: Catalog,
  onSpot: (instanceId: string) => boolean,
  reclaimed: (instanceId: string) => boolean = () => false,
): BilledInstance[] {
  return instances
    .filter((i) => i.launchedAtSeconds !== undefined)
    .map((i) => ({
      id: i.id,
      typeName: i.typeName,
      costPerHour: billedPricePerHour(catalog, i, onSpot(i.id)),
      fromSeconds: i.launchedAtSeconds as number,
      terminatedAtSeconds: i.terminatedAtSeconds,
      ...(i.terminatedAtSeconds !== undefined && reclaimed(i.id) ? { reclaimedBySpot: true } : {}),
    }));
}

/** The store's instances that were billed, each at its price, its market as the store records it. */
export function billedInstancesIn(
  store: StateStore,
  catalog: Catalog,
  instances: readonly InstanceRecord[] = store.listInstances(),
): BilledInstance[] {
  return billedInstances(
    instances,
    catalog,
    (id) => launchedOnSpot(store, id),
    (id) => reclaimedBySpot(store, id),
  );
}

/** The cost report for [since, now] from the store's instances, jobs and task events. */
export function computeCostReport(
  store: StateStore,
  catalog: Catalog,
  nowSeconds: number,
  sinceSeconds = 0,
  closed = false,
  freeAsKnownNow = false,
): DetailedCostReport {
  const book = new PriceBook(catalog);
  const jobs = store.listJobs();
  const jobById = new Map<string, JobRecord>(jobs.map((j) => [j.id, j]));
  const rpByTask = new Map<string, number>();
  for (const job of jobs)
    for (const t of expandTasks(job.spec)) {
      const type = book.minType(t.template.demand);
      rpByTask.set(`${job.id}.${t.index}`, type?.costPerHour ?? 0);
    }
  const events = store.listEvents({ kinds: ['task.state', CO_START_EVENT] });
  const instances = store.listInstances();
  // Nothing is billed before the first record: start the period there rather than at the epoch. With no record
  // before its end, nothing was billed in the period asked for, and that is the period (a month before the cluster
  // existed is that month, not an empty moment at its end); asked from the beginning, it is that empty moment.
  let firstRecord = Number.POSITIVE_INFINITY;
  for (const j of jobs) firstRecord = Math.min(firstRecord, j.submittedAtSeconds);
  for (const i of instances) firstRecord = Math.min(firstRecord, i.requestedAtSeconds);
  const periodStart =
    firstRecord < nowSeconds
      ? Math.max(sinceSeconds, firstRecord)
      : sinceSeconds > 0
        ? sinceSeconds
        : nowSeconds;
  return attributeCosts({
    instances: billedInstancesIn(store, catalog, instances),
    placements: placementsFromEvents(events, nowSeconds),
    reservationPrice: (taskId) => rpByTask.get(taskId) ?? 0,
    jobs: new Map([...jobById.values()].map((j) => [j.id, { id: j.id, name: j.name, team: j.team }])),
    sinceSeconds: periodStart,
    nowSeconds,
    closed,
    freeAsKnownNow,
  });
}

/**
 * The report of a period that has ended, from `startSeconds` to `endSeconds` (a month): what was billed in it and to
 * whom, as if written at its end, whatever the store recorded since.
 */
export function computeClosedPeriodReport(
  store: StateStore,
  catalog: Catalog,
  startSeconds: number,
  endSeconds: number,
  /** Bill spot instances EC2 reclaimed in their first hour free, as the whole history now does (AttributionInput). */
  freeAsKnownNow = false,
): DetailedCostReport {
  return computeCostReport(store, catalog, endSeconds, startSeconds, true, freeAsKnownNow);
}
