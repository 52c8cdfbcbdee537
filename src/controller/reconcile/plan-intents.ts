import type { ConfigurationDiff } from '../../scheduler/actions.js';
import type { Configuration, Plan } from '../../scheduler/types.js';
import { PLACED_TASK_STATES } from '../state/lifecycle.js';
import { storedCoStart, writeCoStart } from '../co-start-records.js';
import {
  launchIntentKey,
  type InstanceRecord,
  type JobRecord,
  type JsonValue,
  type TaskRecord,
} from '../state-store.js';
import type { ReconcileContext } from './context.js';
import { moveToCountKey, settleJob } from './jobs.js';
import { makesBeforeBreak } from '../../round/gates.js';

/**
 * The event a make-before-break move begins with, written with the job's change to `migrating`: its tasks work on
 * until its new instances are ready, so `export-trace` counts that time as running (up to its tasks' stop).
 */
export const JOB_MOVE_WAITS_EVENT = 'job.move-waits';

/** What the reason of such a change says (states written before JOB_MOVE_WAITS_EVENT carry only this). */
export const WORKS_ON_UNTIL_READY = 'works on until its new instances are ready';

export interface AppliedPlan {
  readonly round: number;
  /** Plan ids (`new-<n>`) → instance records created for them. */
  readonly launched: ReadonlyMap<string, string>;
  readonly configuration: Configuration;
}

/**
 * Record the round and turn its diff into intents and state changes, all in one transaction: a crash before the
 * commit leaves no trace (the next round plans again), after it every effect is recorded as pending.
 */
export function applyPlan(
  ctx: ReconcileContext,
  plan: Plan,
  diff: ConfigurationDiff,
  recordAlso?: () => void,
): AppliedPlan {
  const applied = ctx.store.transaction(() => {
    const launched = new Map<string, string>();
    for (const action of diff.actions)
      if (action.kind === 'launch-instance')
        launched.set(
          action.instanceId,
          // Where the plan wants it (latency-aware placement): the launch asks the cloud for this zone and group.
          ctx.store.createInstance({
            typeName: action.typeName,
            availabilityZone: action.placement?.zone,
            placementGroup: action.placement?.placementGroup,
          }).id,
        );
    const resolve = (id: string): string => launched.get(id) ?? id;
    const configuration: Configuration = {
      instances: plan.configuration.instances.map((i) => ({ ...i, id: resolve(i.id) })),
    };
    const { round } = ctx.store.recordRound({ configuration, decision: plan.decision });
    const touchedJobs = new Set<string>();
    for (const action of diff.actions) {
      switch (action.kind) {
        case 'launch-instance': {
          const instance = ctx.store.getInstance(resolve(action.instanceId)) as InstanceRecord;
          // The plan's purchase option for the new instance, when its planner chose one (on demand otherwise).
          const planned = plan.configuration.instances.find((i) => i.id === action.instanceId);
          // (read structurally: the planner's instance type gains the field with spot planning)
          const market =
            planned !== undefined && 'market' in planned && planned.market === 'spot' ? 'spot' : 'on-demand';
          ctx.store.recordIntent(
            {
              kind: 'launch',
              payload: {
                instanceId: instance.id,
                typeName: instance.typeName,
                launchToken: instance.launchToken,
                ...(market === 'spot' ? { market } : {}),
              },
            },
            { key: launchIntentKey(instance.id), round },
          );
          break;
        }
        case 'checkpoint-stop': {
          ctx.store.recordIntent(
            {
              kind: 'stop-task',
              payload: { taskId: action.taskId, instanceId: action.instanceId, checkpoint: true },
            },
            { round },
          );
          // Make before break: a moving task runs on until its job's new instances are ready (performStops).
          const later =
            action.then === 'move' &&
            makesBeforeBreak(ctx.settings.makeBeforeBreak === true, ctx.settings.caps);
          if (!later) ctx.store.setTaskState(action.taskId, 'checkpointing');
          const job = ctx.store.getJob(action.jobId) as JobRecord;
          const why =
            action.then === 'queue' ? `returned to the queue (round ${round})` : `moving (round ${round})`;
          if (job.state === 'running') {
            if (later)
              ctx.store.appendEvent({
                kind: JOB_MOVE_WAITS_EVENT,
                jobId: job.id,
                message: `job ${job.id} moves once its new instances are ready (round ${round}); it works on until then`,
                data: { round },
              });
            ctx.store.setJobState(job.id, 'migrating', later ? `${why}: ${WORKS_ON_UNTIL_READY}` : why);
          }
          // The move (or return to the queue) counts once a worker reports stopped a task of it that leaves its
          // instance (performStops): a restart in place moves nothing, nor does a stop whose instance is gone, and a
          // move dropped because its job ended counts nothing. A job that lost a host (queued, its survivors still
          // running) moves when the plan restarts it: it counts only if a survivor goes elsewhere.
          if (job.state === 'running' || (job.state === 'queued' && action.then === 'move'))
            ctx.store.setValue(moveToCountKey(job.id), job.migrations);
          touchedJobs.add(action.jobId);
          break;
        }
        case 'start-task': {
          recordTaskStart(ctx, action.taskId, resolve(action.instanceId), round);
          touchedJobs.add(action.jobId);
          break;
        }
        case 'terminate-instance': {
          // One still to be launched (its launch keeps failing) has nothing to drain: it goes straight to
          // terminating, whose pass fails its launch (or terminates what a launch in flight brings). Draining is not a
          // state a requested instance may take: the whole round used to fail on it, and every round after.
          const requested = ctx.store.getInstance(action.instanceId)?.state === 'requested';
          ctx.store.setInstanceState(action.instanceId, requested ? 'terminating' : 'draining', {
            reason: `not in the plan of round ${round}`,
          });
          break;
        }
      }
    }
    for (const jobId of touchedJobs) settleJob(ctx, jobId, `round ${round}`);
    ctx.store.appendEvent({
      kind: 'round.applied',
      message: `round ${round}: ${diff.actions.length} action(s), ${launched.size} launch(es), ${diff.movedJobIds.length} move(s), ${diff.startedJobIds.length} start(s)`,
      data: {
        round,
        launched: Object.fromEntries(launched),
        moved: [...diff.movedJobIds],
        started: [...diff.startedJobIds],
        queued: [...diff.queuedJobIds],
        terminated: diff.actions.filter((a) => a.kind === 'terminate-instance').map((a) => a.instanceId),
      },
    });
    // What the round records beside its plan (the queue's preemptions) commits with it or not at all.
    recordAlso?.();
    ctx.fault('round:planned', `round ${round}`);
    return { round, launched, configuration };
  });
  ctx.fault('round:committed', `round ${applied.round}`);
  return applied;
}

/** A pending start of the task on the instance; the task counts as starting there from now on. */
function recordTaskStart(
  ctx: ReconcileContext,
  taskId: string,
  instanceId: string,
  round: number | undefined,
): void {
  ctx.store.recordIntent(
    { kind: 'start-task', payload: { taskId, instanceId } },
    round === undefined ? {} : { round },
  );
  const task = ctx.store.getTask(taskId) as TaskRecord;
  if (!PLACED_TASK_STATES.includes(task.state)) ctx.store.setTaskState(task.id, 'starting', instanceId);
  forgetReadiness(ctx, task);
}

/**
 * A new start prepares the task afresh: its worker's earlier "ready" (a hold already released, or one on the same
 * instance before a move) would otherwise count for the co-start barrier at once, and with a time since long past,
 * trip its timeout while the task's siblings are still preparing. The worker reports it ready again when it is.
 */
function forgetReadiness(ctx: ReconcileContext, task: TaskRecord): void {
  const job = ctx.store.getJob(task.jobId);
  const record = job === undefined ? undefined : storedCoStart(ctx.store, job);
  if (record?.ready[task.id] === undefined) return;
  const { [task.id]: _forgotten, ...ready } = record.ready;
  writeCoStart(ctx.store, task.jobId, { ...record, ready });
}

/** A job placed between rounds (round/place-waiting.ts): its tasks and where each goes, and why, for its events. */
export interface BetweenRoundsStart {
  readonly jobId: string;
  readonly starts: readonly { readonly taskId: string; readonly instanceId: string }[];
  readonly message: string;
  readonly data: JsonValue;
}

/**
 * Jobs placed between rounds on capacity already paid for: their start intents and states in one transaction, as a
 * round's would be (no instance is launched or stopped, so nothing else changes). The next round sees them placed.
 */
export function applyBetweenRoundsStarts(ctx: ReconcileContext, jobs: readonly BetweenRoundsStart[]): void {
  if (jobs.length === 0) return;
  ctx.store.transaction(() => {
    for (const job of jobs) {
      for (const s of job.starts) recordTaskStart(ctx, s.taskId, s.instanceId, undefined);
      settleJob(ctx, job.jobId, 'placed between rounds');
      ctx.store.appendEvent({
        kind: 'job.placed-between-rounds',
        jobId: job.jobId,
        message: job.message,
        data: job.data,
      });
    }
  });
}
