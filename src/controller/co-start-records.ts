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
  ready: z.record(z.string(), z.object({ instanceId: z.string(), sinceSeconds: z.number() })),
  /** When the controller released the job's tasks (all ready). */
  releasedAtSeconds: z.number().optional(),
  /** Task → when its worker was first heard running it (after the release, when held). */
  running: z.record(z.string(), z.number()),
  /** Once every task was heard running: max − min of those times. */
  startSkewSeconds: z.number().optional(),
  /** Σ (job start − task start) × the task's share of its instance's $/h, in $. */
  barrierIdleCost: z.number().optional(),
});
export type CoStartRecord = z.infer<typeof recordSchema>;

/** Whether a job's tasks are co-started: the controller's coStart switch is on and the job has several tasks. */
export function coStarts(job: JobRecord, enabled: boolean): boolean {
  return enabled && expandTasks(job.spec).length > 1;
}

/** The job's record for its current attempt (a fresh one when there is none, or it was of an earlier attempt). */
export function readCoStart(store: StateStore, job: JobRecord): CoStartRecord {
  const parsed = recordSchema.safeParse(store.getValue(PREFIX + job.id));
  return parsed.success && parsed.data.attempt === job.attempts
    ? parsed.data
    : { attempt: job.attempts, ready: {}, running: {} };
}

/** The job's record if it has one for its current attempt (the job view, metrics). */
export function storedCoStart(store: StateStore, job: JobRecord): CoStartRecord | undefined {
  const parsed = recordSchema.safeParse(store.getValue(PREFIX + job.id));
  return parsed.success && parsed.data.attempt === job.attempts ? parsed.data : undefined;
}

export function writeCoStart(store: StateStore, jobId: string, record: CoStartRecord): void {
  store.setValue(PREFIX + jobId, record as unknown as JsonValue);
}

export function clearCoStart(store: StateStore, jobId: string): void {
  store.deleteValue(PREFIX + jobId);
}

/**
 * A job ended: its record keeps only what the job view shows of it (the release time, start skew and barrier-idle
 * cost); the per-task readiness and start times go, and a record with nothing measured goes whole. Jobs are kept for
 * good, so without this every multi-task job would keep a map entry per task for ever.
 */
export function compactCoStart(store: StateStore, job: JobRecord): void {
  const record = storedCoStart(store, job);
  if (record === undefined) {
    clearCoStart(store, job.id);
    return;
  }
  if (Object.keys(record.ready).length === 0 && Object.keys(record.running).length === 0) return;
  if (record.releasedAtSeconds === undefined && record.startSkewSeconds === undefined) {
    clearCoStart(store, job.id);
    return;
  }
  writeCoStart(store, job.id, { ...record, ready: {}, running: {} });
}

/**
 * The barrier's view of a job being started (the input of round/co-start.ts `coStartDecision`): a task already
 * running (or done) is ready; a task waiting to start is ready once its worker reported it prepared on its target instance.
 */
export function coStartTasks(tasks: readonly TaskRecord[], record: CoStartRecord): CoStartTask[] {
  return tasks.map((t) => {
    if (t.state === 'running' || t.state === 'succeeded') return { taskId: t.id, ready: true };
    const ready = record.ready[t.id];
    const here = ready !== undefined && ready.instanceId === t.instanceId;
    return here
      ? { taskId: t.id, ready: true, readySinceSeconds: ready.sinceSeconds }
      : { taskId: t.id, ready: false };
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
    const ready = record.ready[p.taskId];
    holding.push({
      startSeconds: record.releasedAtSeconds !== undefined && ready !== undefined ? ready.sinceSeconds : at,
      costPerHour,
      share,
    });
  }
  const jobStart =
    record.releasedAtSeconds ??
    running.reduce((m, t) => Math.max(m, t.startSeconds), Number.NEGATIVE_INFINITY);
  return { startSkewSeconds: startSkewSeconds(running), barrierIdleCost: barrierIdleCost(holding, jobStart) };
}

/** The event of a co-started job's decisions; a release names the tasks it set running together. */
export const CO_START_EVENT = 'job.co-start';

/** The event recording that `tasks` of the job were released together (the cost replay reads it: cost-accounting.ts). */
export function coStartReleaseEvent(jobId: string, tasks: readonly string[]): EventInput {
  return {
    kind: CO_START_EVENT,
    jobId,
    message: `released ${tasks.length} task(s) together`,
    data: { decision: 'release', tasks: [...tasks] },
  };
}
