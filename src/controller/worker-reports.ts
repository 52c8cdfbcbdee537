import type { TaskReport } from '../protocol/worker-protocol.js';
import type { StateStore, TaskRecord } from './state-store.js';

/** What an instance's worker said in its latest heartbeat: the tasks it has, by task id. */
export interface InstanceReports {
  readonly seq: number;
  readonly atSeconds: number;
  readonly tasks: ReadonlyMap<string, TaskReport>;
}

/**
 * A report of an earlier attempt of the task's job: after a retry the worker still reports the exit that ended
 * that attempt until it runs the task again.
 */
export function isStaleReport(store: StateStore, report: TaskReport, task: TaskRecord): boolean {
  const job = store.getJob(task.jobId);
  return job !== undefined && (report.attempt ?? 1) < job.attempts;
}
