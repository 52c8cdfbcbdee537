import type { Catalog } from '../core/catalog.js';
import type { TaskReport } from '../protocol/worker-protocol.js';
import {
  coStartReadinessEvent,
  measuredCoStart,
  readCoStart,
  startMetrics,
  writeCoStart,
  type CoStartRecord,
  type PlacedTask,
} from './co-start-records.js';
import { demandOn } from '../core/resources.js';
import { taskShareOf } from '../scheduler/expected-start.js';
import { instanceBilledPricePerHour } from './instance-market.js';
import { expandTasks } from './job-spec/tasks.js';
import { isFinalJobState } from './state/lifecycle.js';
import type { InstanceRecord, JobRecord, StateStore } from './state-store.js';

/** A multi-task job's start skew and barrier-idle cost, once all its tasks were heard running. */
export interface StartMeasure {
  readonly startSkewSeconds: number;
  readonly barrierIdleCost: number;
  /**
   * Of `barrierIdleCost`, what the holds of this attempt that ended without a release cost: counted as they ended
   * (co-start-records.ts `writeUnreleasedCoStart`), so not again with this start. Absent when none.
   */
  readonly unreleasedIdleCost?: number;
}

/** A job's start measured by a worker's reports. */
export interface MeasuredStart {
  readonly jobId: string;
  readonly measured: StartMeasure;
}

/**
 * A worker's reports update the co-start records of the multi-task jobs with tasks on its instance
 * (co-start-records.ts): which tasks are prepared and held (level-triggered: a task no longer reported ready is not),
 * and when each was first heard running, until the job's start skew and barrier-idle cost are known. Written only
 * when something changed. A readiness is trusted for two to three heartbeat intervals after its worker last said so
 * (`freshUntilSeconds`, renewed about every other heartbeat, so a held task costs a write every other beat, not
 * every one).
 *
 * Returns the starts these reports measured, for the caller to count once what it wrote is committed: counted
 * before, a commit that fails would leave the start unmeasured in the store and the next heartbeat would count it
 * again.
 */
export function recordStartReports(
  store: StateStore,
  catalog: Catalog,
  inst: InstanceRecord,
  reports: readonly TaskReport[],
  now: number,
  heartbeatSeconds: number,
): MeasuredStart[] {
  const measuredStarts: MeasuredStart[] = [];
  const byTask = new Map(reports.map((r) => [r.taskId, r]));
  const records = new Map<string, { job: JobRecord; record: CoStartRecord; changed: boolean }>();
  const entry = (job: JobRecord): { job: JobRecord; record: CoStartRecord; changed: boolean } | undefined => {
    let e = records.get(job.id);
    if (e === undefined) {
      if (expandTasks(job.spec).length < 2) return undefined;
      e = { job, record: readCoStart(store, job), changed: false };
      records.set(job.id, e);
    }
    return e;
  };
  for (const task of store.listTasks({ instanceId: inst.id })) {
    if (task.state !== 'starting' && task.state !== 'running') continue;
    const job = store.getJob(task.jobId);
    if (job === undefined || isFinalJobState(job.state)) continue;
    const report = byTask.get(task.id);
    if (report === undefined && task.state === 'running') continue;
    const e = entry(job);
    if (e === undefined) continue;
    const { record } = e;
    if (task.state === 'starting') {
      const ready = report?.state === 'ready' && (report.attempt ?? 1) === job.attempts;
      const known = record.ready[task.id];
      const freshUntilSeconds = now + 3 * heartbeatSeconds;
      if (ready && known?.instanceId !== inst.id) {
        record.ready[task.id] = {
          instanceId: inst.id,
          sinceSeconds: now,
          freshUntilSeconds,
          costPerHour: holdCostPerHour(store, catalog, inst, job, task.index),
        };
        // In the log too: the cost replay bills the hold from here, as the barrier-idle cost counts it.
        store.appendEvent(coStartReadinessEvent(job.id, task.id, inst.id, true));
      } else if (ready && known !== undefined) {
        // Heard again: trusted for longer, once less than two intervals are left.
        if (known.freshUntilSeconds !== undefined && known.freshUntilSeconds - now >= 2 * heartbeatSeconds)
          continue;
        record.ready[task.id] = { ...known, freshUntilSeconds };
      } else if (!ready && known !== undefined) {
        delete record.ready[task.id];
        store.appendEvent(coStartReadinessEvent(job.id, task.id, known.instanceId, false));
      } else continue;
      e.changed = true;
    } else if (report?.state === 'running' && record.running[task.id] === undefined) {
      record.running[task.id] = now;
      e.changed = true;
    }
  }
  for (const { job, record, changed } of records.values()) {
    if (!changed) continue;
    let written = record;
    if (record.startSkewSeconds === undefined) {
      const tasks = store.listTasks({ jobId: job.id });
      const expanded = expandTasks(job.spec);
      const placed: PlacedTask[] = [];
      for (const t of tasks) {
        const instance = t.instanceId === undefined ? undefined : store.getInstance(t.instanceId);
        const template = expanded.find((x) => x.index === t.index)?.template;
        if (instance !== undefined && template !== undefined)
          placed.push({
            taskId: t.id,
            demand: template.demand,
            typeName: instance.typeName,
            pricePerHour: instanceBilledPricePerHour(catalog, store, instance),
          });
      }
      const measured = placed.length === tasks.length ? startMetrics(record, placed, catalog) : undefined;
      if (measured !== undefined) {
        const unreleased = record.unreleasedIdleCost ?? 0;
        written = measuredCoStart(record, measured);
        measuredStarts.push({
          jobId: job.id,
          measured: unreleased > 0 ? { ...measured, unreleasedIdleCost: unreleased } : measured,
        });
      }
    }
    writeCoStart(store, job.id, written);
  }
  return measuredStarts;
}

/** What holding a task prepared on `inst` costs, $/hour: its share of the instance's billed price. */
function holdCostPerHour(
  store: StateStore,
  catalog: Catalog,
  inst: InstanceRecord,
  job: JobRecord,
  index: number,
): number {
  const type = catalog.types.find((t) => t.name === inst.typeName);
  const template = expandTasks(job.spec).find((x) => x.index === index)?.template;
  const demand =
    type === undefined || template === undefined ? undefined : demandOn(template.demand, type.family);
  if (type === undefined || demand === undefined) return 0;
  const price = instanceBilledPricePerHour(catalog, store, inst);
  return price * taskShareOf(demand, type.capacity);
}
