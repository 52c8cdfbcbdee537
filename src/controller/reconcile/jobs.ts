import type { JobRecord, JobState, TaskRecord } from '../state-store.js';
import { isFinalJobState, PLACED_TASK_STATES } from '../state/lifecycle.js';
import {
  coStarts,
  coStartUnreleasedEvent,
  readCoStart,
  unreleasedCoStart,
  writeUnreleasedCoStart,
} from '../co-start-records.js';
import type { ReconcileContext } from './context.js';

/** A job's state follows its tasks; tasks on an instance that is gone go back to the queue. */

/**
 * Derive a job's state from its tasks and pending starts: checkpointing → migrating, starting (or waiting to) →
 * starting, all running → running, nothing placed → queued. Only legal transitions are taken (lifecycle.ts); a
 * queued job whose tasks all run passes through starting.
 */
export function settleJob(ctx: ReconcileContext, jobId: string, reason: string): void {
  const job = ctx.store.getJob(jobId);
  if (job === undefined || isFinalJobState(job.state)) return;
  const tasks = ctx.store.listTasks({ jobId });
  const starts = ctx.pendingStartsOf(new Set(tasks.map((t) => t.id)));
  // A move waiting for its new instances (make before break) is under way although its tasks still run.
  const checkpointing =
    tasks.some((t) => t.state === 'checkpointing') || (starts.length > 0 && ctx.moveWaiting(tasks));
  // A task that succeeded has done its part: the job runs while the others do.
  const allRunning =
    tasks.some((t) => t.state === 'running') &&
    tasks.every((t) => t.state === 'running' || t.state === 'succeeded');
  const anyPlaced = tasks.some((t) => PLACED_TASK_STATES.includes(t.state));
  let target: JobState;
  if (checkpointing) target = job.state === 'running' ? 'migrating' : job.state;
  else if (allRunning && starts.length === 0) target = 'running';
  else if (starts.length > 0 || tasks.some((t) => t.state === 'starting')) target = 'starting';
  else if (!anyPlaced) target = 'queued';
  else target = 'queued'; // part of a gang lost: the next plan restarts or requeues it whole
  moveJob(ctx, job, target, reason);
}

function moveJob(ctx: ReconcileContext, job: JobRecord, target: JobState, reason: string): void {
  if (job.state === target) return;
  if (job.state === 'queued' && target === 'running') ctx.store.setJobState(job.id, 'starting', reason);
  if (job.state === 'running' && target === 'starting') return; // only a move (via migrating) restarts a running job
  ctx.store.setJobState(job.id, target, reason);
}

/**
 * Where a job's move (or return to the queue) is kept to count, from the plan that begins it (plan-intents.ts) until a
 * worker reports stopped a task of it that leaves its instance (effects/tasks.ts performStops): the job's
 * `migrations` when it began, so that the move counts once. A move counts exactly when a task changes instance, as in
 * both simulator runtimes: a stop whose task restarts where it stopped (the survivors of a host lost under a
 * multi-task job, restarted in place beside their lost siblings' replacements) moves nothing, nor does one whose
 * instance is gone or whose task ended first.
 */
export const moveToCountKey = (jobId: string): string => `reconcile.move.${jobId}.uncounted`;

/**
 * The job's move kept to count (`moveToCountKey`) is over uncounted when no stop of it can report a task stopped any
 * more: the job ended, or none of its stops is pending (those left failed with their instance). Otherwise a later,
 * unrelated stop of the job could be counted for it, and the key would stay in the store for good.
 */
export function endMoveToCount(ctx: ReconcileContext, jobId: string): void {
  const job = ctx.store.getJob(jobId);
  if (job !== undefined && !isFinalJobState(job.state)) {
    const taskIds = new Set(ctx.store.listTasks({ jobId }).map((t) => t.id));
    const stopping = ctx.store
      .listIntents({ states: ['pending'], kind: 'stop-task' })
      .some((i) => i.kind === 'stop-task' && taskIds.has(i.payload.taskId));
    if (stopping) return;
  }
  ctx.store.deleteValue(moveToCountKey(jobId));
}

/**
 * Tasks on (or headed to) an instance that can no longer host them go back to pending, their pending starts and
 * stops there are failed, and their jobs return to the queue. Returns the affected job ids.
 */
export function releaseTasksOn(ctx: ReconcileContext, instanceId: string, reason: string): Set<string> {
  const jobs = new Set<string>();
  const stopsFailed = new Set<string>();
  for (const intent of ctx.store.listIntents({ states: ['pending'] })) {
    if (
      (intent.kind === 'start-task' || intent.kind === 'stop-task') &&
      intent.payload.instanceId === instanceId
    ) {
      ctx.store.failIntent(intent.id, reason);
      const task = ctx.store.getTask(intent.payload.taskId);
      if (task !== undefined) jobs.add(task.jobId);
      if (task !== undefined && intent.kind === 'stop-task') stopsFailed.add(task.jobId);
    }
  }
  // A move whose stop went down with the instance it left: no worker will report that task stopped.
  for (const jobId of stopsFailed) endMoveToCount(ctx, jobId);
  const placed = ctx.store
    .listTasks({ instanceId })
    .filter((task) => PLACED_TASK_STATES.includes(task.state));
  for (const task of placed) jobs.add(task.jobId);
  // The jobs go back to the queue first: their held starts, here and elsewhere, end together (requeueJob).
  for (const jobId of jobs) requeueJob(ctx, jobId, reason);
  for (const { id } of placed) {
    const task = ctx.store.getTask(id) as TaskRecord;
    if (!PLACED_TASK_STATES.includes(task.state)) continue;
    const job = ctx.store.getJob(task.jobId) as JobRecord;
    const ended = isFinalJobState(job.state);
    // A task of an ended job still held here: its time here was its siblings' wait, not the job's (before its state).
    if (ended && task.state === 'starting' && coStarts(job, ctx.deps.tasks.holdsStarts === true))
      ctx.store.appendEvent(
        coStartUnreleasedEvent(job.id, 'ended', [task.id], `task ${task.id} not released: ${reason}`),
      );
    ctx.store.setTaskState(task.id, ended ? 'stopped' : 'pending');
  }
  return jobs;
}

/**
 * Starts headed to an instance being drained (by request, for a spot interruption, an orphan, a worker that never
 * registered) can never be carried out: a start waits for its instance to run. Jobs with a task on its way there
 * go back to the queue, so the next round places them on capacity that stays; without this a job stays `starting`,
 * left out of every plan (its place is not schedulable), and keeps the drained instance from ever terminating. Tasks
 * already running there stay for the plan to move, and a move that makes before it breaks (its tasks still running
 * where they were) is left to the plan too. Returns the affected job ids.
 */
export function abandonStartsTo(ctx: ReconcileContext, instanceId: string, reason: string): Set<string> {
  const jobs = new Set<string>();
  for (const intent of ctx.store.listIntents({ states: ['pending'], kind: 'start-task' })) {
    if (intent.kind !== 'start-task' || intent.payload.instanceId !== instanceId) continue;
    const task = ctx.store.getTask(intent.payload.taskId);
    if (task?.state === 'starting' && task.instanceId === instanceId) jobs.add(task.jobId);
  }
  for (const jobId of jobs) requeueJob(ctx, jobId, reason);
  return jobs;
}

/**
 * A job that lost part of its gang goes back to the queue: starts elsewhere are void (the next plan places it whole),
 * its tasks on their way to an instance wait to be placed again, and what a co-started task was prepared with is
 * forgotten (its worker drops it: were it placed on the same instance again, that readiness would be stale). A
 * co-started job's starts end unreleased, as at a co-start re-plan: their time so far is its instances' idle time,
 * not the job's, and what the prepared tasks' holds cost is its barrier-idle cost.
 */
function requeueJob(ctx: ReconcileContext, jobId: string, reason: string): void {
  const job = ctx.store.getJob(jobId) as JobRecord;
  if (isFinalJobState(job.state)) return;
  const taskIds = new Set(ctx.store.listTasks({ jobId }).map((t) => t.id));
  for (const start of ctx.pendingStartsOf(taskIds)) ctx.store.failIntent(start.id, reason);
  endStartsUnreleased(ctx, job, reason);
  if (job.state !== 'queued') ctx.store.setJobState(jobId, 'queued', reason);
}

/**
 * The job's tasks on their way to an instance go back to be placed (`pending`). A co-started job's starts end
 * unreleased, as at a co-start re-plan: their time since each was reported ready is its instances' idle time, not the
 * job's, and what the holds cost is its barrier-idle cost (a requeue, or a retry after a task failed).
 */
export function endStartsUnreleased(ctx: ReconcileContext, job: JobRecord, reason: string): void {
  const starting = ctx.store.listTasks({ jobId: job.id }).filter((t) => t.state === 'starting');
  // Before the tasks' states, in this transaction: the cost replay reads it with them (cost-accounting.ts).
  if (starting.length > 0 && coStarts(job, ctx.deps.tasks.holdsStarts === true))
    ctx.store.appendEvent(
      coStartUnreleasedEvent(
        job.id,
        'replan',
        starting.map((t) => t.id),
        `planned again: ${reason}`,
      ),
    );
  const record = readCoStart(ctx.store, job);
  const after = unreleasedCoStart(record, starting, ctx.now());
  for (const task of starting) ctx.store.setTaskState(task.id, 'pending');
  if (Object.keys(after.ready).length < Object.keys(record.ready).length)
    writeUnreleasedCoStart(ctx.store, job.id, record, after, ctx.deps.onBarrierIdle);
}
