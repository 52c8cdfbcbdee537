import { moveToCountKey } from './reconcile/jobs.js';
import { isFinalJobState, PLACED_TASK_STATES } from './state/lifecycle.js';
import type { IntentRecord, JobRecord, JobState, JobStateOptions, StateStore } from './state-store.js';

/** The states a job ends in. */
export type EndedJobState = 'succeeded' | 'failed' | 'cancelled' | 'unsuccessful';

export function isEndedJobState(state: JobState): state is EndedJobState {
  return isFinalJobState(state);
}

/**
 * End a job in the store, with its tasks: the one rule every way a job is ended outside its tasks' own reports uses
 * (a cancel, a failure or an unsuccessful mark by request, a restore ending a job as the job archive says it ended).
 * Inside the caller's transaction. Its pending starts fail, its placed tasks are asked to stop without a checkpoint
 * (a stop already pending stands: a move's, waiting or checkpointing, is carried out without its checkpoint once its
 * job has ended, effects/tasks.ts performStops), and its tasks never placed end `stopped` with it: they will never
 * start, and would otherwise show `pending` for ever. A move it was making ends with it, uncounted.
 *
 * `pending`: the store's pending intents, read once by a caller ending many jobs (intents name one job's tasks each);
 * read here when not given.
 */
export function endJobWithTasks(
  store: StateStore,
  jobId: string,
  state: EndedJobState,
  reason: string,
  options: JobStateOptions & { readonly pending?: readonly IntentRecord[] } = {},
): JobRecord {
  const ended = store.setJobState(
    jobId,
    state,
    reason,
    options.atSeconds === undefined ? {} : { atSeconds: options.atSeconds },
  );
  store.deleteValue(moveToCountKey(jobId));
  const tasks = store.listTasks({ jobId });
  const taskIds = new Set(tasks.map((t) => t.id));
  const stopping = new Set<string>();
  for (const intent of options.pending ?? store.listIntents({ states: ['pending'] })) {
    if (intent.kind === 'start-task' && taskIds.has(intent.payload.taskId))
      store.failIntent(intent.id, `job ${state}`);
    if (intent.kind === 'stop-task' && taskIds.has(intent.payload.taskId))
      stopping.add(intent.payload.taskId);
  }
  for (const task of tasks) {
    if (PLACED_TASK_STATES.includes(task.state) && task.instanceId !== undefined && !stopping.has(task.id))
      store.recordIntent({
        kind: 'stop-task',
        payload: { taskId: task.id, instanceId: task.instanceId, checkpoint: false },
      });
    else if (task.state === 'pending') store.setTaskState(task.id, 'stopped');
  }
  return ended;
}
