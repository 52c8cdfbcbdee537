import { z } from 'zod';
import type { TaskReport } from '../protocol/worker-protocol.js';
import type { ControllerLogger } from './seams.js';
import type { InstanceRecord, StateStore, TaskRecord } from './state-store.js';
import { isStaleReport } from './worker-reports.js';

/**
 * The event of a stop from outside a worker (a host shutdown, `docker stop`, a signal not from the worker) that the
 * worker resumed its task from (TaskReport.outsideStops): one per such restart, shown as a restart in the job's view.
 */
export const TASK_STOPPED_OUTSIDE_EVENT = 'task.stopped-outside';

/** What a TASK_STOPPED_OUTSIDE_EVENT records: the task's attempt, and which of its stops there it was (1, 2, …). */
const stoppedOutsideData = z.object({
  attempt: z.number().int().positive(),
  count: z.number().int().positive(),
});

/**
 * New stops from outside recorded from one report at most. A worker reports each stop before it resumes the task
 * (it waits for the controller's answer), so more than one in a report is heartbeats lost meanwhile; and a worker
 * lets one attempt of a task have 10 (src/worker/outside-stops.ts), so more than that is no count worth an event each.
 */
const MAX_OUTSIDE_STOPS_PER_REPORT = 10;

/** The stops from outside last recorded for a task: those of one attempt of it on one instance. */
interface OutsideStops {
  readonly instanceId: string;
  readonly attempt: number;
  readonly count: number;
}

export class OutsideStopRecords {
  /** Task → its stops from outside recorded so far (TASK_STOPPED_OUTSIDE_EVENT). */
  private readonly outsideStops = new Map<string, OutsideStops>();

  constructor(
    private readonly store: StateStore,
    private readonly log: ControllerLogger,
  ) {}

  /**
   * Stops from outside the worker that a task resumed from (TaskReport.outsideStops, counted in its attempt on that
   * instance, with the task's record there: a restarted worker goes on counting): restarts the controller neither
   * asked for nor sees otherwise (its report goes from `stopped` back to `running`), so each is recorded once, a
   * TASK_STOPPED_OUTSIDE_EVENT with the worker's reason, and the job's view counts it among its restarts. A count
   * below the one recorded is a worker that lost the task's record and counts from 0 again: all it says is new.
   */
  note(task: TaskRecord, inst: InstanceRecord, report: TaskReport): void {
    const count = report.outsideStops;
    if (count === undefined || isStaleReport(this.store, report, task)) return;
    const attempt = report.attempt ?? 1;
    const known = this.knownOutsideStops(task.id, inst.id, attempt);
    if (count === known) return;
    const fresh = Math.min(count > known ? count - known : count, MAX_OUTSIDE_STOPS_PER_REPORT);
    const why =
      report.state === 'stopped' && report.reason !== undefined
        ? report.reason
        : 'stopped from outside its worker; it resumed from its last checkpoint';
    for (let n = count - fresh + 1; n <= count; n++)
      this.store.appendEvent({
        kind: TASK_STOPPED_OUTSIDE_EVENT,
        jobId: task.jobId,
        taskId: task.id,
        instanceId: inst.id,
        message: `task ${task.id} on ${inst.id}: ${why}`,
        data: { attempt, count: n },
      });
    this.outsideStops.set(task.id, { instanceId: inst.id, attempt, count });
    this.log.warn(`task ${task.id} on ${inst.id} was stopped from outside its worker: ${why}`);
  }

  /**
   * How many stops from outside of the task's attempt on the instance are recorded: as this process last recorded
   * them, or (a controller restarted since) as the newest such event says.
   */
  private knownOutsideStops(taskId: string, instanceId: string, attempt: number): number {
    let known = this.outsideStops.get(taskId);
    if (known === undefined) {
      const [last] = this.store.listEvents({
        taskId,
        kind: TASK_STOPPED_OUTSIDE_EVENT,
        newestFirst: true,
        limit: 1,
      });
      const data = stoppedOutsideData.safeParse(last?.data);
      known =
        data.success && last?.instanceId !== undefined
          ? { instanceId: last.instanceId, ...data.data }
          : { instanceId, attempt, count: 0 };
      this.outsideStops.set(taskId, known);
    }
    return known.instanceId === instanceId && known.attempt === attempt ? known.count : 0;
  }
}
