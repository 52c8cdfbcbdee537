import { demandOn, type Resources } from '../../../core/resources.js';
import {
  coStartDecision,
  coStartTimeoutAfter,
  DEFAULT_CO_START_TIMEOUT_SECONDS,
} from '../../../round/co-start.js';
import {
  makesBeforeBreak,
  moveStopGate,
  startGate,
  type GateWait,
  type MoveTarget,
} from '../../../round/gates.js';
import {
  coStartReleaseEvent,
  coStarts,
  coStartTasks,
  coStartUnreleasedEvent,
  readCoStart,
  releasedCoStart,
  replannedCoStart,
  withoutEarlierReadiness,
  writeCoStart,
  writeUnreleasedCoStart,
} from '../../co-start-records.js';
import { expandTasks } from '../../job-spec/tasks.js';
import { isFinalJobState, PLACED_TASK_STATES } from '../../state/lifecycle.js';
import type { InstanceRecord, IntentRecord, JobRecord, TaskRecord } from '../../state-store.js';
import type { ReconcileContext } from '../context.js';
import { abandonStartsTo, endMoveToCount, moveToCountKey, releaseTasksOn, settleJob } from '../jobs.js';
import { Slices } from '../yielding.js';
import { hasSpotNotice } from '../../spot-interruptions.js';
import { notePrepared } from './prepared-jobs.js';
import { announce, taskFailed } from './task-failures.js';
import { taskEnded } from './task-endings.js';

/** Task effects: stops (checkpointing off an instance), starts once their gate opens, and task completions. */

/**
 * Level-triggered safety net: a task still placed although its job ended (e.g. the job was ended by another writer
 * of the store, not through ControllerService.cancel) gets a stop intent, so its instance can empty and terminate.
 */
export function stopTasksOfEndedJobs(ctx: ReconcileContext): void {
  const stopping = new Set<string>();
  for (const i of ctx.store.listIntents({ states: ['pending'], kind: 'stop-task' }))
    if (i.kind === 'stop-task') stopping.add(i.payload.taskId);
  const ended = new Map<string, boolean>();
  for (const task of ctx.store.listTasks({ states: [...PLACED_TASK_STATES] })) {
    if (stopping.has(task.id) || task.instanceId === undefined) continue;
    let final = ended.get(task.jobId);
    if (final === undefined) {
      final = isFinalJobState((ctx.store.getJob(task.jobId) as JobRecord).state);
      ended.set(task.jobId, final);
    }
    if (final)
      ctx.store.recordIntent({
        kind: 'stop-task',
        payload: { taskId: task.id, instanceId: task.instanceId, checkpoint: false },
      });
  }
}

/**
 * A stop in the job's move kept to count (`moveToCountKey`) came back with its task stopped off the instance it
 * leaves: the move counts now, once. Answers whether it did.
 */
function countMoveStopped(ctx: ReconcileContext, jobId: string): boolean {
  const kept = ctx.store.getValue(moveToCountKey(jobId));
  if (kept === undefined) return false;
  ctx.store.deleteValue(moveToCountKey(jobId));
  if (ctx.store.getJob(jobId)?.migrations !== kept) return false;
  ctx.store.countMigration(jobId);
  return true;
}

export async function performStops(ctx: ReconcileContext): Promise<string[]> {
  const done: string[] = [];
  const slices = new Slices();
  const stops = ctx.store.listIntents({ states: ['pending'], kind: 'stop-task' });
  // Only a stop that may wait (make before break) needs to know; without it every stop goes at once anyway.
  const noticed = makesBeforeBreak(ctx.settings.makeBeforeBreak === true, ctx.settings.caps)
    ? jobsLeavingNoticedInstances(ctx, stops)
    : new Set<string>();
  for (const intent of stops) {
    if (intent.kind !== 'stop-task') continue;
    await slices.next();
    // Settled while the pass let the API in (a cancel fails the job's pending starts).
    if (ctx.store.getIntent(intent.id)?.state !== 'pending') continue;
    const { taskId, instanceId } = intent.payload;
    const task = ctx.store.getTask(taskId);
    const instance = ctx.store.getInstance(instanceId);
    if (
      task === undefined ||
      instance === undefined ||
      task.instanceId !== instanceId ||
      !PLACED_TASK_STATES.includes(task.state)
    ) {
      ctx.store.transaction(() => {
        ctx.store.completeIntent(intent.id); // already off the instance
        // Its job moved on first (the task succeeded, the job ended): a move kept to count may be over, as below.
        if (task !== undefined) endMoveToCount(ctx, task.jobId);
      });
      continue;
    }
    // A job that ended while its move waited or checkpointed (a cancel, maxRunSeconds, a sibling's failure): its task
    // stops now, without the move's checkpoint, as the end's own stop would have (the end left the move's stop in
    // place of one of its own). Read from the store on every pass, so a restarted controller asks the same: a worker
    // told `stop` while its checkpoint-stop waits for the task's exit kills it at once (task-reconciliation.ts).
    const ended = isFinalJobState(ctx.store.getJob(task.jobId)?.state ?? 'cancelled');
    const checkpoint = intent.payload.checkpoint && !ended;
    // Make before break: a moving task still running works on until its job's new instances are ready.
    if (checkpoint && task.state === 'running') {
      if (!noticed.has(task.jobId) && moveStopWait(ctx, task) !== undefined) continue;
      // The move (or, called off, the return to the queue) happens now; it was kept to count when planned.
      ctx.store.setTaskState(taskId, 'checkpointing');
    }
    // A task can only be running where the instance ever ran; otherwise there is nothing to stop there.
    const mayRunThere =
      instance.runningAtSeconds !== undefined &&
      (instance.state === 'running' || instance.state === 'draining');
    // A move kept to count counts at a stop that takes its task off this instance for good: restarted here (in place,
    // beside a replacement for a sibling lost with its host), the task moved nothing.
    const moveToCount =
      checkpoint &&
      mayRunThere &&
      ctx.store.getValue(moveToCountKey(task.jobId)) !== undefined &&
      !restartsOn(ctx, taskId, instanceId);
    // Whether the task had ended (succeeded, failed) as the stop reached it: then the stop moved nothing either.
    let endedFirst = false;
    if (mayRunThere) {
      ctx.fault('stop:before-call', taskId);
      const outcome = await ctx.deps.tasks.stop({ task, instance, checkpoint });
      ctx.fault('stop:after-call', taskId);
      if (outcome === 'pending') continue;
      if (moveToCount) {
        const status = await ctx.deps.tasks.status(task, instance);
        endedFirst = status === 'succeeded' || status === 'failed';
      }
    }
    const moved = ctx.store.transaction(() => {
      const counted = moveToCount && !endedFirst && countMoveStopped(ctx, task.jobId);
      stopDone(ctx, intent.id, taskId, instanceId);
      // Over (every stop of it done, or its job ended) with none that moved a task: nothing is counted.
      endMoveToCount(ctx, task.jobId);
      return counted;
    });
    if (moved) ctx.deps.onMoveBegun?.(task.jobId);
    done.push(taskId);
  }
  return done;
}

/** Whether the task's next start (its pending start intent) is on this instance: a restart in place. */
function restartsOn(ctx: ReconcileContext, taskId: string, instanceId: string): boolean {
  const next = ctx.pendingStartsOf(new Set([taskId]))[0];
  return next?.kind === 'start-task' && next.payload.instanceId === instanceId;
}

/** The stop is done: its task is off its instance, and starts where its job goes next, if anywhere. */
function stopDone(ctx: ReconcileContext, intentId: number, taskId: string, instanceId: string): void {
  ctx.store.completeIntent(intentId);
  const current = ctx.store.getTask(taskId) as TaskRecord;
  if (current.instanceId !== instanceId || !PLACED_TASK_STATES.includes(current.state)) return;
  const job = ctx.store.getJob(current.jobId) as JobRecord;
  // A co-started task that ends held (its job ended before the release) held its slot for its siblings: the cost
  // replay counts that time as idle, as it does a released task's (before its state, in this transaction).
  if (
    current.state === 'starting' &&
    isFinalJobState(job.state) &&
    coStarts(job, ctx.deps.tasks.holdsStarts === true)
  )
    ctx.store.appendEvent(
      coStartUnreleasedEvent(job.id, 'ended', [taskId], `task ${taskId} not released: the job ${job.state}`),
    );
  ctx.store.setTaskState(taskId, 'stopped');
  if (isFinalJobState(job.state)) return;
  const next = ctx.pendingStartsOf(new Set([taskId]))[0];
  if (next?.kind === 'start-task') {
    const target = ctx.store.getInstance(next.payload.instanceId);
    if (target !== undefined && target.state !== 'terminated' && target.state !== 'terminating')
      ctx.store.setTaskState(taskId, 'starting', target.id);
    else ctx.store.failIntent(next.id, `instance ${next.payload.instanceId} is gone`);
  }
  settleJob(ctx, current.jobId, 'checkpointed and stopped');
}

/**
 * Jobs with a pending stop and a task on an instance under a spot interruption notice: every pending stop of such a
 * job goes now, not only one off the noticed instance (as the simulated world's `stopMovesOff` issues them), since a
 * job restarts only once all its tasks have stopped. EC2's two minutes are for the checkpoint, not for a boot. Read
 * once per pass, before any stop of the pass moves a task off its instance.
 */
function jobsLeavingNoticedInstances(ctx: ReconcileContext, stops: readonly IntentRecord[]): Set<string> {
  const noticedOf = new Map<string, boolean>(); // instance → under a notice
  const noticed = (instanceId: string): boolean => {
    let under = noticedOf.get(instanceId);
    if (under === undefined) {
      under = hasSpotNotice(ctx.store, instanceId);
      noticedOf.set(instanceId, under);
    }
    return under;
  };
  const asked = new Set<string>();
  const jobs = new Set<string>();
  for (const intent of stops) {
    if (intent.kind !== 'stop-task') continue;
    const jobId = ctx.store.getTask(intent.payload.taskId)?.jobId;
    if (jobId === undefined || asked.has(jobId)) continue;
    asked.add(jobId);
    // On an instance: running there, or checkpointing off it (a task only `starting` is headed to one).
    const onNoticed = ctx.store
      .listTasks({ jobId })
      .some(
        (t) =>
          (t.state === 'running' || t.state === 'checkpointing') &&
          t.instanceId !== undefined &&
          noticed(t.instanceId),
      );
    if (onNoticed) jobs.add(jobId);
  }
  return jobs;
}

/**
 * What a moving task's checkpoint-stop still waits for (round/gates.ts `moveStopGate`, as in the simulated world):
 * the instances its job's tasks start on next, launched and not yet ready. An instance not launched yet (its launch
 * keeps failing) is not waited for; nor is anything with the setting off or under caps (`makesBeforeBreak`). A job
 * leaving an instance under a spot interruption notice does not ask (`jobsLeavingNoticedInstances`).
 */
function moveStopWait(ctx: ReconcileContext, task: TaskRecord): GateWait {
  if (!makesBeforeBreak(ctx.settings.makeBeforeBreak === true, ctx.settings.caps)) return undefined;
  const siblings = new Set(ctx.store.listTasks({ jobId: task.jobId }).map((t) => t.id));
  const targets: MoveTarget[] = [];
  for (const start of ctx.pendingStartsOf(siblings)) {
    if (start.kind !== 'start-task') continue;
    const target = ctx.store.getInstance(start.payload.instanceId);
    if (target === undefined) continue;
    targets.push({
      launched: target.state === 'launching' || target.state === 'running',
      ready: isReady(ctx, target),
    });
  }
  return moveStopGate(targets);
}

function isReady(ctx: ReconcileContext, instance: InstanceRecord): boolean {
  if (instance.state !== 'running') return false;
  const registered = ctx.deps.tasks.workerRegistered;
  return registered === undefined ? true : registered.call(ctx.deps.tasks, instance);
}

/**
 * Carry out pending starts whose gate (round/gates.ts `startGate`, the rule the simulated world follows too) is
 * open: the task's own stop is done, no task of its job is still to stop or checkpointing, its instance is ready, and
 * the instance has room for it next to what occupies it now.
 */
export async function performStarts(ctx: ReconcileContext): Promise<string[]> {
  const started: string[] = [];
  // A task still running where a pending stop will take it off (a move making before it breaks) has not stopped yet:
  // its job restarts once every task has stopped.
  const stopsPending = new Set<string>(); // task@instance
  for (const i of ctx.store.listIntents({ states: ['pending'], kind: 'stop-task' }))
    if (i.kind === 'stop-task') stopsPending.add(`${i.payload.taskId}@${i.payload.instanceId}`);
  const stoppingOf = new Map<string, number>(); // job → tasks still to stop or checkpointing
  const used = new Map<string, Resources>(); // instance → what its occupants use
  const familyOf = new Map<string, string | undefined>(); // instance → its type's family, read once per pass
  const family = (instanceId: string): string | undefined => {
    if (!familyOf.has(instanceId)) {
      const inst = ctx.store.getInstance(instanceId);
      familyOf.set(instanceId, inst === undefined ? undefined : ctx.typeOf(inst.typeName)?.family);
    }
    return familyOf.get(instanceId);
  };
  const occupy = (task: TaskRecord, instanceId: string): void => {
    const f = family(instanceId);
    const d = f === undefined ? undefined : demandOn(ctx.demandOf(task), f);
    if (d === undefined) return;
    const u = used.get(instanceId) ?? [0, 0, 0];
    used.set(instanceId, [u[0] + d[0], u[1] + d[1], u[2] + d[2]]);
  };
  for (const t of ctx.store.listTasks({ states: ['running', 'checkpointing'] })) {
    if (t.state === 'checkpointing' || stopsPending.has(`${t.id}@${t.instanceId ?? ''}`))
      stoppingOf.set(t.jobId, (stoppingOf.get(t.jobId) ?? 0) + 1);
    if (t.instanceId !== undefined) occupy(t, t.instanceId);
  }
  const slices = new Slices(ctx.store);
  // Co-started jobs (round/co-start.ts): their starts whose gate opened in this pass, issued together afterwards.
  const gangs = new Map<string, HeldStart[]>();
  const holds = ctx.deps.tasks.holdsStarts === true;
  for (const intent of ctx.store.listIntents({ states: ['pending'], kind: 'start-task' })) {
    if (intent.kind !== 'start-task') continue;
    await slices.next();
    // Settled while the pass let the API in (a cancel fails the job's pending starts).
    if (ctx.store.getIntent(intent.id)?.state !== 'pending') continue;
    const { taskId, instanceId } = intent.payload;
    const task = ctx.store.getTask(taskId);
    const job = task === undefined ? undefined : ctx.store.getJob(task.jobId);
    const instance = ctx.store.getInstance(instanceId);
    if (task === undefined || job === undefined || isFinalJobState(job.state)) {
      ctx.store.failIntent(intent.id, 'the job ended');
      continue;
    }
    if (instance === undefined || instance.state === 'terminated' || instance.state === 'terminating') {
      ctx.store.transaction(() => {
        ctx.store.failIntent(intent.id, `instance ${instanceId} is gone`);
        releaseTasksOn(ctx, instanceId, `instance ${instanceId} is gone`);
      });
      continue;
    }
    if (instance.state === 'draining') {
      const reason = `instance ${instanceId} is draining${instance.reason === undefined ? '' : ` (${instance.reason})`}`;
      const requeued = ctx.store.transaction(() => abandonStartsTo(ctx, instanceId, reason));
      if (requeued.size > 0) ctx.requestRound(`jobs headed to ${instanceId} planned again: it is draining`);
      continue;
    }
    const type = ctx.typeOf(instance.typeName);
    const demand = type === undefined ? undefined : demandOn(ctx.demandOf(task), type.family);
    if (type === undefined || demand === undefined) continue; // the diff never plans this; nothing can start it
    const occupied = used.get(instanceId) ?? [0, 0, 0];
    const wait = startGate({
      taskStopped: task.state === 'starting' && task.instanceId === instanceId,
      jobTasksStopping: stoppingOf.get(job.id) ?? 0,
      instanceReady: isReady(ctx, instance),
      freeCapacity: [
        type.capacity[0] - occupied[0],
        type.capacity[1] - occupied[1],
        type.capacity[2] - occupied[2],
      ],
      demand,
    });
    if (wait !== undefined) continue;
    if (coStarts(job, holds)) {
      const gang = gangs.get(job.id) ?? [];
      gang.push({ intentId: intent.id, startedAtSeconds: intent.createdAtSeconds, task, instance });
      gangs.set(job.id, gang);
      occupy(task, instanceId); // its room is taken, held or running
      continue;
    }
    ctx.fault('start:before-call', taskId);
    await ctx.deps.tasks.start({ task, job, instance, intentId: intent.id });
    ctx.fault('start:after-call', taskId);
    slices.defer(() => {
      // Failed meanwhile (a cancel while the start was under way): completing it would throw and roll back the slice.
      if (ctx.store.getIntent(intent.id)?.state !== 'pending') return undefined;
      ctx.store.completeIntent(intent.id);
      // Cancelled meanwhile: its stop intent (recorded by the cancel) stops it.
      const still = stillStartingOn(ctx, taskId, instanceId);
      if (still === undefined) return undefined;
      const { task: current, job: currentJob } = still;
      ctx.store.setTaskState(taskId, 'running');
      if (expandTasks(currentJob.spec).length > 1) restartMeasure(ctx, currentJob, [taskId]);
      settleJob(ctx, current.jobId, 'all tasks running');
      return undefined;
    });
    occupy(task, instanceId);
    started.push(taskId);
  }
  slices.commit();
  for (const [jobId, gang] of gangs) started.push(...(await coStart(ctx, jobId, gang)));
  return started;
}

/** The task and its job, read again, when the task is still starting on the instance and its job has not ended. */
function stillStartingOn(
  ctx: ReconcileContext,
  taskId: string,
  instanceId: string,
): { readonly task: TaskRecord; readonly job: JobRecord } | undefined {
  const task = ctx.store.getTask(taskId);
  const job = task === undefined ? undefined : ctx.store.getJob(task.jobId);
  if (task === undefined || job === undefined || isFinalJobState(job.state)) return undefined;
  return task.state === 'starting' && task.instanceId === instanceId ? { task, job } : undefined;
}

interface HeldStart {
  readonly intentId: number;
  /** When its start was asked for (its intent's creation): a readiness reported before it was for another start. */
  readonly startedAtSeconds: number;
  readonly task: TaskRecord;
  readonly instance: InstanceRecord;
}

/**
 * The co-start barrier of one job (round/co-start.ts `coStartDecision`; the simulator releases alike but times each
 * task's preparation from the ready times it knows, round/co-start.ts). Its tasks
 * start preparing only once every one of them can (each start's gate is open: all its instances are up), so that
 * they are ready close together; each is then held on its instance, prepared, until the
 * last is ready, and all are released at once: their starts complete and they turn `running` together (the job's
 * clock starts then), which their workers hear on their next heartbeat. A job some of whose tasks stay unready past
 * the timeout is planned again: its starts fail, its tasks go back to pending and the next round places it anew.
 * Returns the tasks released.
 */
async function coStart(
  ctx: ReconcileContext,
  jobId: string,
  opened: readonly HeldStart[],
): Promise<string[]> {
  const before = ctx.store.getJob(jobId);
  if (before === undefined || isFinalJobState(before.state)) return [];
  const settled = await heldTasksEnded(ctx, before);
  if (settled === 'failed') return [];
  // A task found done is off the barrier (and its start over): the rest go on, unless that ended the job.
  const job = ctx.store.getJob(jobId);
  const gang = opened.filter((g) => !settled.has(g.task.id));
  if (job === undefined || isFinalJobState(job.state) || gang.length === 0) return [];
  const tasks = ctx.store.listTasks({ jobId });
  const waiting = new Set(gang.map((g) => g.task.id));
  // A task neither running (or done) nor with an open start: the gang waits for it before any task prepares.
  if (tasks.some((t) => t.state !== 'running' && t.state !== 'succeeded' && !waiting.has(t.id))) return [];
  for (const g of gang) {
    ctx.fault('start:before-call', g.task.id);
    await ctx.deps.tasks.start({ task: g.task, job, instance: g.instance, intentId: g.intentId });
    ctx.fault('start:after-call', g.task.id);
  }
  const now = ctx.now();
  const stored = readCoStart(ctx.store, job);
  // Only a readiness reported for the starts open now counts (an earlier one was for another placement).
  const record = withoutEarlierReadiness(stored, new Map(gang.map((g) => [g.task.id, g.startedAtSeconds])));
  if (record !== stored) writeCoStart(ctx.store, jobId, record);
  const decision = coStartDecision(
    coStartTasks(ctx.store.listTasks({ jobId }), record, now),
    now,
    coStartTimeoutAfter(
      ctx.settings.coStartTimeoutSeconds ?? DEFAULT_CO_START_TIMEOUT_SECONDS,
      record.replans ?? 0,
    ),
  );
  if (decision.kind === 'wait') return [];
  return ctx.store.transaction(() => {
    const current = ctx.store.getJob(jobId) as JobRecord;
    if (isFinalJobState(current.state)) return [];
    const open = gang.filter((g) => ctx.store.getIntent(g.intentId)?.state === 'pending');
    if (decision.kind === 'replan') {
      for (const g of open) ctx.store.failIntent(g.intentId, `co-start: ${decision.reason}`);
      const held = ctx.store.listTasks({ jobId }).filter((t) => t.state === 'starting');
      // Before the tasks' states: the cost replay counts their starts so far as held (idle), not as the job's work.
      ctx.store.appendEvent(
        coStartUnreleasedEvent(
          jobId,
          'replan',
          held.map((t) => t.id),
          `planned again: ${decision.reason}`,
        ),
      );
      for (const t of held) ctx.store.setTaskState(t.id, 'pending');
      // The readiness goes; what the holds cost stays (and is counted once), and the next barrier waits longer.
      writeUnreleasedCoStart(
        ctx.store,
        jobId,
        record,
        replannedCoStart(record, held, now),
        ctx.deps.onBarrierIdle,
      );
      settleJob(ctx, jobId, `co-start timed out: ${decision.reason}`);
      ctx.requestRound(`job ${jobId} planned again (co-start timeout)`);
      return [];
    }
    const released: string[] = [];
    for (const g of open) {
      ctx.store.completeIntent(g.intentId);
      const t = ctx.store.getTask(g.task.id) as TaskRecord;
      if (t.state !== 'starting' || t.instanceId !== g.instance.id) continue;
      ctx.store.setTaskState(t.id, 'running');
      released.push(t.id);
    }
    writeCoStart(ctx.store, jobId, releasedCoStart(record, released, now));
    ctx.store.appendEvent(coStartReleaseEvent(jobId, released));
    settleJob(ctx, jobId, 'all tasks ready: released together');
    // Released only with every task ready: prepared now, as far as the controller knows.
    notePrepared(ctx, jobId, 'released ready together');
    return released;
  });
}

/**
 * Held tasks whose workers reported them ended. A held task that could not be prepared (its image, build context or
 * checkpoint failed) fails its job as a started task would: the job is retried under its retryStrategy or fails (or,
 * its instance's host at fault, is queued again without using an attempt: host-faults.ts), and its siblings are let
 * go. A held task found to have succeeded already (its exit was stored where it ran before, and it is not run again:
 * worker/task-start.ts) is settled as a started task that succeeded (`heldTaskSucceeded`). Polling reads only
 * running tasks, and a held task stays `starting` until the release, so without this the barrier would only time
 * out, and the job be planned again, prepared and end the same way, for ever. Asked before the starts are repeated,
 * which clear what the task control knows of the end. Answers 'failed' when one failed, else the tasks settled.
 */
async function heldTasksEnded(ctx: ReconcileContext, job: JobRecord): Promise<'failed' | Set<string>> {
  const settled = new Set<string>();
  for (const task of ctx.store.listTasks({ jobId: job.id })) {
    if (task.state !== 'starting' || task.instanceId === undefined) continue;
    const instanceId = task.instanceId;
    const instance = ctx.store.getInstance(instanceId);
    const status = instance === undefined ? undefined : await ctx.deps.tasks.status(task, instance);
    if (status === 'succeeded') {
      if (heldTaskSucceeded(ctx, task, instanceId)) settled.add(task.id);
      continue;
    }
    if (status !== 'failed') continue;
    const outcome = ctx.store.transaction(() => {
      const still = stillStartingOn(ctx, task.id, instanceId);
      if (still === undefined) return undefined;
      const { task: current, job: currentJob } = still;
      // The job's held starts are void whatever follows: it fails, or its next attempt is placed anew.
      const taskIds = new Set(ctx.store.listTasks({ jobId: job.id }).map((t) => t.id));
      for (const start of ctx.pendingStartsOf(taskIds))
        ctx.store.failIntent(start.id, `task ${task.id} failed while it was prepared`);
      ctx.store.setTaskState(task.id, 'failed');
      return taskFailed(ctx, currentJob, current);
    });
    if (outcome === undefined) continue;
    announce(ctx, outcome);
    return 'failed';
  }
  return settled;
}

/**
 * A held task whose worker found it succeeded: its start is done (as a one-task job's completes once asked for), and
 * it ends as polling ends a running task that succeeded (`taskEnded`), dated at its reported exit. Answers whether it
 * was settled.
 */
function heldTaskSucceeded(ctx: ReconcileContext, task: TaskRecord, instanceId: string): boolean {
  const ended = ctx.store.transaction(() => {
    if (stillStartingOn(ctx, task.id, instanceId) === undefined) return undefined;
    for (const start of ctx.pendingStartsOf(new Set([task.id]))) ctx.store.completeIntent(start.id);
    return taskEnded(ctx, task, instanceId, 'starting', 'succeeded');
  });
  if (ended === undefined) return false;
  if (ended.outcome !== undefined) announce(ctx, ended.outcome);
  return true;
}

/** Tasks of a multi-task job (re)started without a hold: their start metrics are measured again. */
function restartMeasure(ctx: ReconcileContext, job: JobRecord, taskIds: readonly string[]): void {
  const record = readCoStart(ctx.store, job);
  for (const id of taskIds) delete record.running[id];
  writeCoStart(ctx.store, job.id, {
    ...record,
    releasedAtSeconds: undefined,
    heldSinceSeconds: undefined,
    startSkewSeconds: undefined,
    barrierIdleCost: undefined,
  });
}
