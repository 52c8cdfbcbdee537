import type { TaskControl } from '../../seams.js';
import { exitedWithin } from '../../state/lifecycle.js';
import type { StateStore, TaskRecord } from '../../state-store.js';

/**
 * When a task's end happened. A worker reports an exit at its next heartbeat, which a controller that was down hears
 * only once it is back; the report says how long ago the task exited (TaskReport.exitedSecondsAgo), and the task, its
 * job or its attempt end that long before the report was heard: their finish times, and where the cost replay stops
 * charging the task's time on its instance to its job (the instance itself ran, and is billed, all the same). An age
 * rather than a time: a worker's clock behind or ahead of this one's would otherwise end every run at its start or
 * when it was heard.
 */

/**
 * When a task exited, on this controller's clock: `ageSeconds` (as its worker reported it) before the report was
 * heard at `heardAtSeconds`; then itself for an age that is no age (negative, not finite).
 */
export function exitedAgo(ageSeconds: number, heardAtSeconds: number): number {
  return Number.isFinite(ageSeconds) && ageSeconds > 0 ? heardAtSeconds - ageSeconds : heardAtSeconds;
}

/** When the task last changed state (for a running task, when its run began), as the store's log says. */
function lastChangeAt(store: StateStore, task: TaskRecord): number | undefined {
  const [last] = store.listEvents({
    jobId: task.jobId,
    taskId: task.id,
    kind: 'task.state',
    newestFirst: true,
    limit: 1,
  });
  return last?.atSeconds;
}

/**
 * When `task`, reported ended, exited: as its worker's report dated it (`exitedAgo`), within its run and now
 * (`exitedWithin`); undefined when the worker gave no age (an older one), and its end is when it is heard.
 */
export function reportedExitAt(
  store: StateStore,
  control: TaskControl,
  task: TaskRecord,
  nowSeconds: number,
): number | undefined {
  const reported = control.exitedAtSeconds?.(task);
  if (reported === undefined) return undefined;
  return exitedWithin(reported, lastChangeAt(store, task) ?? task.updatedAtSeconds, nowSeconds);
}

/**
 * When a job all of whose tasks ended did: when its last task did (each task's end is the time of its last state
 * change, dated at its exit when its worker reported one). Undefined for a job without tasks.
 */
export function lastEndOf(store: StateStore, tasks: readonly TaskRecord[]): number | undefined {
  let end: number | undefined;
  for (const t of tasks) {
    const at = lastChangeAt(store, t);
    if (at !== undefined) end = Math.max(end ?? at, at);
  }
  return end;
}
