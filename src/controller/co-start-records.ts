import { z } from 'zod';
import type { Catalog } from '../core/catalog.js';
import { demandOn, type FamilyDemand } from '../core/resources.js';
import { barrierIdleCost, startSkewSeconds, type CoStartTask, type TaskStart } from '../round/co-start.js';
import { taskShareOf } from '../scheduler/expected-start.js';
import { expandTasks } from './job-spec/tasks.js';
import type { EventInput, JobRecord, JsonValue, StateStore, TaskRecord } from './state-store.js';

/**
 * What the controller knows of a multi-task job's start (round/co-start.ts, Murmuration digest §7.2), kept in the
 * state store so that the barrier is level-triggered: which tasks their workers reported prepared and since when,
 * when the job was released, and, once every task has been seen running, its start skew and barrier-idle cost. A
 * restarted controller reads it back; a restarted worker reports its tasks again (a held task it lost is simply not
 * ready any more, and is prepared again).
 */

const PREFIX = 'coStart.';

const recordSchema = z.object({
  /** The job attempt the record belongs to: a retry starts afresh. */
  attempt: z.number().int().positive(),
  /** Task → the instance it was prepared on and when its worker first reported it ready there. */
  ready: z.record(
    z.string(),
    z.object({
      instanceId: z.string(),
      sinceSeconds: z.number(),
      /**
       * Until when the readiness is trusted: its worker was heard reporting it lately (a worker gone silent may be
       * dead, and a job released onto it would run without that task). Absent in records of older controllers.
       */
      freshUntilSeconds: z.number().optional(),
      /** What holding the task costs, $/hour: its share of its instance's price (the barrier-idle cost's rate). */
      costPerHour: z.number().optional(),
    }),
  ),
  /** When the controller released the job's tasks (all ready). */
  releasedAtSeconds: z.number().optional(),
  /**
   * Task → since when it was held prepared before the last release, for the measure of that start: the release
   * moves a readiness here (a readiness left in `ready` would count for the task's next start). Absent in records of
   * older controllers, which kept it in `ready`.
   */
  heldSinceSeconds: z.record(z.string(), z.number()).optional(),
  /** Task → when its worker was first heard running it (after the release, when held). */
  running: z.record(z.string(), z.number()),
  /** Once every task was heard running: max − min of those times. */
  startSkewSeconds: z.number().optional(),
  /**
   * Σ (job start − task start) × the task's share of its instance's $/h, in $, plus the holds that ended without a
   * release before this start (`unreleasedIdleCost`); before any start, those holds alone. Once the job ended, also
   * the holds since its last start (compactCoStart).
   */
  barrierIdleCost: z.number().optional(),
  /** Co-start re-plans of this attempt since its last release: each doubles the timeout (round/co-start.ts). */
  replans: z.number().int().nonnegative().optional(),
  /**
   * Barrier-idle cost of this attempt's holds that ended without a release (a re-plan, an instance of the job drained
   * or lost), not yet in a measured start.
   */
  unreleasedIdleCost: z.number().nonnegative().optional(),
  /** The job's measured starts so far, over all its attempts: the latest is the one `startSkewSeconds` is of. */
  starts: z.number().int().nonnegative().optional(),
  /**
   * The job's barrier-idle cost counted so far over all its attempts, in $: every measured start's and every hold that
   * ended without one, each as /metrics counts it (`fleetwise_barrier_idle_cost_dollars_total`).
   */
  countedIdleCost: z.number().nonnegative().optional(),
});
export type CoStartRecord = z.infer<typeof recordSchema>;

/** A multi-task job's starts over all its attempts, and the barrier-idle cost /metrics counted for it. */
export interface CoStartTotals {
  readonly starts: number;
  readonly barrierIdleCost: number;
}

/**
 * The record's totals. A record of an older controller has none: its figures are of this attempt alone, its measured
 * start's cost and, after that start, its holds that ended without a release since.
 */
export function coStartTotalsOf(record: CoStartRecord): CoStartTotals {
  const started = record.startSkewSeconds !== undefined;
  return {
    starts: record.starts ?? (started ? 1 : 0),
    barrierIdleCost:
      record.countedIdleCost ??
      (record.barrierIdleCost ?? 0) + (started ? (record.unreleasedIdleCost ?? 0) : 0),
  };
}

/** The record's fields that hold `totals`. */
function totalsFields(totals: CoStartTotals): Pick<CoStartRecord, 'starts' | 'countedIdleCost'> {
  return { starts: totals.starts, countedIdleCost: totals.barrierIdleCost };
}

/** The stored record of any attempt, with its totals written out (an older controller's record has none). */
function parsedCoStart(store: StateStore, jobId: string): CoStartRecord | undefined {
  const parsed = recordSchema.safeParse(store.getValue(PREFIX + jobId));
  if (!parsed.success) return undefined;
  // Written out, so that whatever rewrites the record (a restart clearing its measure) keeps them.
  return parsed.data.starts === undefined
    ? { ...parsed.data, ...totalsFields(coStartTotalsOf(parsed.data)) }
    : parsed.data;
}

/** Whether a job's tasks are co-started: the controller's coStart switch is on and the job has several tasks. */
export function coStarts(job: JobRecord, enabled: boolean): boolean {
  return enabled && expandTasks(job.spec).length > 1;
}

/**
 * The job's record for its current attempt (a fresh one when there is none, or it was of an earlier attempt: the
 * fresh one keeps the job's totals).
 */
export function readCoStart(store: StateStore, job: JobRecord): CoStartRecord {
  const stored = parsedCoStart(store, job.id);
  if (stored?.attempt === job.attempts) return stored;
  return {
    attempt: job.attempts,
    ready: {},
    running: {},
    ...(stored === undefined ? {} : totalsFields(coStartTotalsOf(stored))),
  };
}

/** The job's record if it has one for its current attempt (the job view, metrics). */
export function storedCoStart(store: StateStore, job: JobRecord): CoStartRecord | undefined {
  const stored = parsedCoStart(store, job.id);
  return stored?.attempt === job.attempts ? stored : undefined;
}

/** The job's totals over all its attempts so far; undefined when it has no record (one task, or never held nor started). */
export function storedCoStartTotals(store: StateStore, jobId: string): CoStartTotals | undefined {
  const stored = parsedCoStart(store, jobId);
  return stored === undefined ? undefined : coStartTotalsOf(stored);
}

/**
 * The record after a start of the job was measured (`startMetrics`, on top of the holds that ended without a release
 * before it): one more start, and what /metrics counts of it (its holds that ended unreleased were counted then).
 */
export function measuredCoStart(
  record: CoStartRecord,
  measured: { readonly startSkewSeconds: number; readonly barrierIdleCost: number },
): CoStartRecord {
  const totals = coStartTotalsOf(record);
  const counted = Math.max(0, measured.barrierIdleCost - (record.unreleasedIdleCost ?? 0));
  return {
    ...record,
    startSkewSeconds: measured.startSkewSeconds,
    barrierIdleCost: measured.barrierIdleCost,
    // Counted in this start's measure: not again at a later one.
    unreleasedIdleCost: undefined,
    ...totalsFields({ starts: totals.starts + 1, barrierIdleCost: totals.barrierIdleCost + counted }),
  };
}

export function writeCoStart(store: StateStore, jobId: string, record: CoStartRecord): void {
  store.setValue(PREFIX + jobId, record as unknown as JsonValue);
}

export function clearCoStart(store: StateStore, jobId: string): void {
  store.deleteValue(PREFIX + jobId);
}

/**
 * What the tasks still reported ready have cost so far held at the barrier, at `atSeconds`, in $ (each from when it
 * was ready, at its share of its instance's price).
 */
export function heldIdleCost(record: CoStartRecord, atSeconds: number): number {
  let cost = 0;
  for (const r of Object.values(record.ready)) cost += holdCost(r, atSeconds);
  return cost;
}

function holdCost(ready: CoStartRecord['ready'][string], atSeconds: number): number {
  return (Math.max(0, atSeconds - ready.sinceSeconds) * (ready.costPerHour ?? 0)) / 3600;
}

/**
 * The record after the held starts of `tasks` (those `starting`) ended at `atSeconds` without a release (a re-plan,
 * or the instance of one of the job's tasks drained or lost): their readiness goes, and the time each was held on
 * the instance it is headed to is barrier-idle cost all the same, kept as unreleased for the next measured start and
 * shown meanwhile. A readiness on another instance than the task's is of an earlier placement: it goes uncounted.
 */
export function unreleasedCoStart(
  record: CoStartRecord,
  tasks: readonly TaskRecord[],
  atSeconds: number,
): CoStartRecord {
  const ready = { ...record.ready };
  let idle = 0;
  for (const t of tasks) {
    const r = ready[t.id];
    if (t.state !== 'starting' || r === undefined) continue;
    if (r.instanceId === t.instanceId) idle += holdCost(r, atSeconds);
    delete ready[t.id];
  }
  const unreleased = (record.unreleasedIdleCost ?? 0) + idle;
  return {
    ...record,
    ready,
    ...(unreleased > 0
      ? {
          unreleasedIdleCost: unreleased,
          // Before any measured start the view shows these holds alone; after one, they go into the next.
          barrierIdleCost: record.startSkewSeconds === undefined ? unreleased : record.barrierIdleCost,
        }
      : {}),
  };
}

/**
 * The record after a co-start re-plan at `atSeconds` of a job whose `tasks` were held: the readiness goes (the tasks
 * are placed anew), the time they were held is barrier-idle cost all the same (`unreleasedCoStart`), and the
 * re-plan is counted (the next barrier waits longer).
 */
export function replannedCoStart(
  record: CoStartRecord,
  tasks: readonly TaskRecord[],
  atSeconds: number,
): CoStartRecord {
  const ended = unreleasedCoStart(record, tasks, atSeconds);
  return {
    attempt: record.attempt,
    ready: {},
    running: {},
    replans: (record.replans ?? 0) + 1,
    ...totalsFields(coStartTotalsOf(record)),
    ...(ended.unreleasedIdleCost === undefined
      ? {}
      : { unreleasedIdleCost: ended.unreleasedIdleCost, barrierIdleCost: ended.unreleasedIdleCost }),
  };
}

/** Told the barrier-idle cost of holds as they end without a release (the /metrics counter, where one is kept). */
export type BarrierIdleHook = (dollars: number) => void;

/**
 * Write the record of a job some of whose holds ended without a release (`before` → `after`, in the transaction that
 * ends them), and tell `onIdle` what they newly cost: the rise of its unreleased barrier-idle cost. Holds that end are
 * removed from the record, so counting them again is not possible; a measured start counts only its own holds
 * (co-start-reports.ts), so each hold is counted once.
 */
export function writeUnreleasedCoStart(
  store: StateStore,
  jobId: string,
  before: CoStartRecord,
  after: CoStartRecord,
  onIdle: BarrierIdleHook | undefined,
): void {
  const rise = (after.unreleasedIdleCost ?? 0) - (before.unreleasedIdleCost ?? 0);
  const totals = coStartTotalsOf(before);
  writeCoStart(store, jobId, {
    ...after,
    ...totalsFields({ starts: totals.starts, barrierIdleCost: totals.barrierIdleCost + Math.max(0, rise) }),
  });
  // Counted once the write has committed: a transaction that rolls back ends no hold, and its retry counts it.
  if (rise > 0 && onIdle !== undefined) store.afterCommit(() => onIdle(rise));
}

/**
 * A job ended: its record keeps only what the job view shows of it (the release time, start skew and barrier-idle
 * cost, the totals over its attempts); the per-task readiness and start times go, and a record with nothing measured
 * goes whole. Jobs are kept for
 * good, so without this every multi-task job would keep a map entry per task for ever. A job that ended while tasks of
 * it were held (a cancel or failure before its release, or after a move held released tasks again) keeps the
 * barrier-idle cost of those holds, and tells `onIdle` of it.
 */
export function compactCoStart(store: StateStore, job: JobRecord, onIdle: BarrierIdleHook | undefined): void {
  const record = storedCoStart(store, job);
  if (record === undefined) {
    keepTotalsOnly(store, job);
    return;
  }
  const held = heldIdleCost(holdsGoingOn(record), job.finishedAtSeconds ?? job.updatedAtSeconds);
  const unreleased = (record.unreleasedIdleCost ?? 0) + held;
  if (record.releasedAtSeconds === undefined && record.startSkewSeconds === undefined) {
    // Kept as unreleased too: compacting again keeps it (and counts nothing more: the readiness is gone).
    if (unreleased > 0)
      writeUnreleasedCoStart(
        store,
        job.id,
        record,
        {
          attempt: record.attempt,
          ready: {},
          running: {},
          unreleasedIdleCost: unreleased,
          barrierIdleCost: unreleased,
        },
        onIdle,
      );
    else keepTotalsOnly(store, job);
    return;
  }
  if (
    Object.keys(record.ready).length === 0 &&
    Object.keys(record.running).length === 0 &&
    record.heldSinceSeconds === undefined &&
    unreleased === 0
  )
    return;
  const totals = coStartTotalsOf(record);
  writeCoStart(store, job.id, {
    ...record,
    ready: {},
    running: {},
    heldSinceSeconds: undefined,
    // No start follows the job's end: the holds since the last one are in its figure, and so counted once (compacting
    // again finds them neither held nor unreleased).
    ...(unreleased > 0
      ? { unreleasedIdleCost: undefined, barrierIdleCost: (record.barrierIdleCost ?? 0) + unreleased }
      : {}),
    ...totalsFields({ starts: totals.starts, barrierIdleCost: totals.barrierIdleCost + held }),
  });
  // What was unreleased already was told as its hold ended (writeUnreleasedCoStart).
  if (held > 0 && onIdle !== undefined) store.afterCommit(() => onIdle(held));
}

/** An ended job's record with nothing of its last attempt to keep: its totals alone, or none when they are nil. */
function keepTotalsOnly(store: StateStore, job: JobRecord): void {
  const totals = storedCoStartTotals(store, job.id);
  if (totals === undefined || (totals.starts === 0 && totals.barrierIdleCost === 0))
    clearCoStart(store, job.id);
  else
    writeCoStart(store, job.id, { attempt: job.attempts, ready: {}, running: {}, ...totalsFields(totals) });
}

/**
 * The record with only the readiness of holds still going on. Records of older controllers kept a release's
 * readiness in `ready` (no `heldSinceSeconds`): that is of the released start, not a hold, unless reported since.
 */
function holdsGoingOn(record: CoStartRecord): CoStartRecord {
  const releasedAt = record.releasedAtSeconds;
  if (releasedAt === undefined || record.heldSinceSeconds !== undefined) return record;
  return {
    ...record,
    ready: Object.fromEntries(Object.entries(record.ready).filter(([, r]) => r.sinceSeconds > releasedAt)),
  };
}

/**
 * The record without the readiness of tasks reported before their current start was asked for (`startedAtSeconds`:
 * task → when its pending start was recorded): that readiness is of an earlier placement, even on the same instance
 * (a hold since released, a task back where it ran), and would release the job, count towards its timeout and be
 * billed as held for time the task was running or elsewhere. Its worker, if it holds the task prepared for this
 * start, reports it again and the readiness is counted from then. The record itself when there is none.
 */
export function withoutEarlierReadiness(
  record: CoStartRecord,
  startedAtSeconds: ReadonlyMap<string, number>,
): CoStartRecord {
  const stale = Object.entries(record.ready).filter(([taskId, r]) => {
    const startedAt = startedAtSeconds.get(taskId);
    return startedAt !== undefined && r.sinceSeconds < startedAt;
  });
  if (stale.length === 0) return record;
  const ready = { ...record.ready };
  for (const [taskId] of stale) delete ready[taskId];
  return { ...record, ready };
}

/**
 * The record after the release at `atSeconds` of `released` (the tasks held until now): their readiness goes (it was
 * of this start; counted again it would release, time out or bill the next), kept as since when each was held, for
 * the measure of this start (`startMetrics`); the measure starts over.
 */
export function releasedCoStart(
  record: CoStartRecord,
  released: readonly string[],
  atSeconds: number,
): CoStartRecord {
  const heldSinceSeconds: Record<string, number> = {};
  for (const taskId of released) {
    const r = record.ready[taskId];
    if (r !== undefined) heldSinceSeconds[taskId] = r.sinceSeconds;
  }
  return {
    ...record,
    ready: {},
    releasedAtSeconds: atSeconds,
    heldSinceSeconds,
    running: {},
    startSkewSeconds: undefined,
    barrierIdleCost: undefined,
    replans: undefined,
    ...totalsFields(coStartTotalsOf(record)),
  };
}

/**
 * The barrier's view of a job being started at `nowSeconds` (the input of round/co-start.ts `coStartDecision`): a
 * task already running (or done) is ready; a task waiting to start is ready once its worker reported it prepared on
 * its target instance, for as long as that worker is heard saying so (a readiness gone stale releases nothing, but
 * its wait still counts towards the timeout). The record holds only readiness of the current starts: a release
 * clears it (`releasedCoStart`) and the barrier drops any reported before its task's start (`withoutEarlierReadiness`).
 */
export function coStartTasks(
  tasks: readonly TaskRecord[],
  record: CoStartRecord,
  nowSeconds: number,
): CoStartTask[] {
  return tasks.map((t) => {
    if (t.state === 'running' || t.state === 'succeeded') return { taskId: t.id, ready: true };
    const ready = record.ready[t.id];
    if (ready === undefined || ready.instanceId !== t.instanceId) return { taskId: t.id, ready: false };
    const fresh = ready.freshUntilSeconds === undefined || nowSeconds <= ready.freshUntilSeconds;
    return { taskId: t.id, ready: fresh, readySinceSeconds: ready.sinceSeconds };
  });
}

/** Where each task started, for the metrics: its instance's $/h and its share of it. */
export interface PlacedTask {
  readonly taskId: string;
  readonly demand: FamilyDemand;
  readonly typeName: string;
  /** What its instance is billed at, $/hour (its spot price on spot); default the type's on-demand price. */
  readonly pricePerHour?: number | undefined;
}

/**
 * Start skew and barrier-idle cost of a job once all its tasks were heard running (round/co-start.ts, the rule the
 * simulator counts with). A task's start is when it began holding its slot: when it was reported prepared (held), or
 * when it was heard running (not held); the job's start is its release (held) or its last task's start.
 */
export function startMetrics(
  record: CoStartRecord,
  placed: readonly PlacedTask[],
  catalog: Catalog,
): { readonly startSkewSeconds: number; readonly barrierIdleCost: number } | undefined {
  const running: TaskStart[] = [];
  const holding: TaskStart[] = [];
  for (const p of placed) {
    const at = record.running[p.taskId];
    if (at === undefined) return undefined;
    const type = catalog.types.find((t) => t.name === p.typeName);
    const demand = type === undefined ? undefined : demandOn(p.demand, type.family);
    const costPerHour = p.pricePerHour ?? type?.costPerHour ?? 0;
    const share = type === undefined || demand === undefined ? 0 : taskShareOf(demand, type.capacity);
    running.push({ startSeconds: at, costPerHour, share });
    // Records of older controllers kept the released readiness in `ready`.
    const heldSince =
      record.heldSinceSeconds === undefined
        ? record.ready[p.taskId]?.sinceSeconds
        : record.heldSinceSeconds[p.taskId];
    holding.push({
      startSeconds: record.releasedAtSeconds !== undefined && heldSince !== undefined ? heldSince : at,
      costPerHour,
      share,
    });
  }
  const jobStart =
    record.releasedAtSeconds ??
    running.reduce((m, t) => Math.max(m, t.startSeconds), Number.NEGATIVE_INFINITY);
  return {
    startSkewSeconds: startSkewSeconds(running),
    // The holds of this attempt that ended without a release (re-plans) were the same wait for siblings.
    barrierIdleCost: barrierIdleCost(holding, jobStart) + (record.unreleasedIdleCost ?? 0),
  };
}

/** The event of a co-started job's decisions; a release names the tasks it set running together. */
export const CO_START_EVENT = 'job.co-start';

/**
 * What an end of held starts without a release says of the time its tasks were held (`heldFrom` in its data): from
 * each task's readiness (`coStartReadinessEvent`), its preparation before that being its job's, and nothing of a task
 * never reported ready. Decisions of older controllers say nothing: they held the whole start, and the cost replay
 * bills them so (cost-accounting.ts). A release needs no such word: every task it releases was reported ready.
 */
export const HELD_FROM_READINESS = 'ready';

/**
 * The event recording that a task's worker reported it prepared on `instanceId` and held (`ready`), or no longer
 * (`unready`): the cost replay bills its time on the instance from then as held (its instance's idle time), as the
 * barrier-idle cost counts it.
 */
export function coStartReadinessEvent(
  jobId: string,
  taskId: string,
  instanceId: string,
  ready: boolean,
): EventInput {
  return {
    kind: CO_START_EVENT,
    jobId,
    taskId,
    instanceId,
    message: ready
      ? `task ${taskId} prepared on ${instanceId}, held for its siblings`
      : `task ${taskId} no longer reported prepared on ${instanceId}`,
    data: { decision: ready ? 'ready' : 'unready', tasks: [taskId] },
  };
}

/**
 * The event recording that the starts of `tasks` of the job ended without a release (a re-plan, for a timeout or
 * because an instance of the job is drained or lost; or the job ended while they were held): the cost replay counts
 * their time since they were reported ready as held (cost-accounting.ts), as it does a released task's. Recorded in
 * the transaction that moves the tasks off their starts, before their states.
 */
export function coStartUnreleasedEvent(
  jobId: string,
  decision: 'replan' | 'ended',
  tasks: readonly string[],
  message: string,
): EventInput {
  return {
    kind: CO_START_EVENT,
    jobId,
    message,
    data: { decision, tasks: [...tasks], heldFrom: HELD_FROM_READINESS },
  };
}

/** The event recording that `tasks` of the job were released together (the cost replay reads it: cost-accounting.ts). */
export function coStartReleaseEvent(jobId: string, tasks: readonly string[]): EventInput {
  return {
    kind: CO_START_EVENT,
    jobId,
    message: `released ${tasks.length} task(s) together`,
    data: { decision: 'release', tasks: [...tasks] },
  };
}
