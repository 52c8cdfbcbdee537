import { z } from 'zod';
import { JOB_MOVE_WAITS_EVENT, WORKS_ON_UNTIL_READY } from './reconcile/plan-intents.js';
import { JOB_STATES, type EventRecord, type JobState } from './state-store.js';

/*
 * A job's history of states, read from its `job.state` events (lifecycle.ts writes them) and its `job.ran-until` ones
 * (cloud-sync.ts writes them when its work on a lost instance ended before its return to the queue was written), with
 * the events that say when a job worked while `migrating`: a move that makes before it breaks (`job.move-waits`) and
 * its tasks' changes to `checkpointing` (`task.state`), read as `export-trace` reads them
 * (sim/controller-runtime/state-history.ts `runningSeconds`).
 */

/**
 * When a job's work on a lost instance really ended, written just before its return to the queue when that comes later
 * (a sync after the controller was stopped, a worker's heartbeat timeout): its running stretch ends there, not at the
 * change, for its run limit and for `export-trace`.
 */
export const JOB_RAN_UNTIL_EVENT = 'job.ran-until';

/** The kind of a job's state change (controller/state/lifecycle.ts transitionJob). */
const JOB_STATE_EVENT = 'job.state';

/** The kind of a task's state change (controller/state/lifecycle.ts transitionTask); it names the task's job. */
const TASK_STATE_EVENT = 'task.state';

/** The event kinds `jobTransitions` reads: what a read of the store for `runningSecondsOf` asks for. */
export const JOB_HISTORY_EVENT_KINDS: readonly string[] = [
  JOB_STATE_EVENT,
  JOB_RAN_UNTIL_EVENT,
  JOB_MOVE_WAITS_EVENT,
  TASK_STATE_EVENT,
];

/** What a `job.state` event's data says of the change (lifecycle.ts writes it). */
const transitionData = z.object({
  from: z.enum(JOB_STATES).optional(),
  to: z.enum(JOB_STATES),
  reason: z.string().optional(),
});

/** What a `task.state` event's data says of the change: only its target state is read. */
const taskTransitionData = z.object({ to: z.string() });

/** What a `job.ran-until` event's data says (cloud-sync.ts writes it); a finite number of seconds. */
const ranUntilData = z.object({ ranUntilSeconds: z.number() });

/** One change of a job's state, from its `job.state` event. */
export interface JobTransition {
  readonly atSeconds: number;
  readonly to: JobState;
  /**
   * When the job's work really ended before this change, as the earliest `job.ran-until` event since the previous
   * change says: a change written after the work stopped unseen (a controller started again after a clean stop, an
   * instance EC2 ended, a worker gone silent) does not mark the work's end.
   */
  readonly workedUntilSeconds?: number;
  /**
   * A change from `running` to `migrating` in a move that makes before it breaks: the job's tasks work on until its new
   * instances are ready, so its run goes on through the change, until `workStoppedSeconds`.
   */
  readonly worksOn?: true;
  /**
   * When such a move's work stopped: a task of the job was told to checkpoint and stop (or its work ended earlier, as
   * a `job.ran-until` event said). Absent while its tasks still work.
   */
  readonly workStoppedSeconds?: number;
}

/** When a `job.ran-until` event says the job's work ended; undefined for any other event. */
export function ranUntilOf(event: EventRecord): number | undefined {
  if (event.kind !== JOB_RAN_UNTIL_EVENT) return undefined;
  const data = ranUntilData.safeParse(event.data);
  return data.success ? data.data.ranUntilSeconds : undefined;
}

/**
 * Where a stretch of work that began at `beganSeconds` and was ended by a change at `changedSeconds` really ended: at
 * `workedUntilSeconds` when a `job.ran-until` event said so, never before the stretch began nor after the change.
 * Both the run limits and `export-trace` (sim/controller-runtime/state-history.ts) measure a job's work by this rule.
 */
export function workEndSeconds(
  beganSeconds: number,
  changedSeconds: number,
  workedUntilSeconds: number | undefined,
): number {
  if (workedUntilSeconds === undefined) return changedSeconds;
  return Math.min(changedSeconds, Math.max(beganSeconds, workedUntilSeconds));
}

/**
 * Seconds a job whose state changes are `transitions` (oldest first) worked, up to `nowSeconds`: its time in
 * `running`, and in `migrating` while a move that makes before it breaks leaves its tasks working (`worksOn`, until
 * `workStoppedSeconds`; a move called off leaves one stretch). A stretch ends where its work did (`workEndSeconds`),
 * so the time a controller was stopped, or an instance gone before anyone saw, is not run time.
 */
export function runningSecondsOf(transitions: readonly JobTransition[], nowSeconds: number): number {
  let total = 0;
  let since: number | undefined;
  for (const t of transitions) {
    if (t.to === 'running') since ??= t.atSeconds;
    else if (since !== undefined) {
      if (t.to === 'migrating' && t.worksOn === true) {
        // Works on: the stretch goes on until the stop, which already holds an earlier end of the work.
        if (t.workStoppedSeconds === undefined) continue;
        total += Math.max(0, t.workStoppedSeconds - since);
      } else total += workEndSeconds(since, t.atSeconds, t.workedUntilSeconds) - since;
      since = undefined;
    }
  }
  if (since !== undefined) total += Math.max(0, nowSeconds - since);
  return total;
}

/**
 * Whether the job still works as its last change left it (its run time grows with the clock): `running`, or
 * `migrating` in a move that makes before it breaks whose tasks have not yet been told to stop.
 */
export function worksNow(transitions: readonly JobTransition[]): boolean {
  const last = transitions[transitions.length - 1];
  if (last === undefined) return false;
  return last.to === 'running' || (last.worksOn === true && last.workStoppedSeconds === undefined);
}

/**
 * The state changes a job's event log records, in its order (events of other kinds, or without a target state,
 * skipped). A `job.ran-until` event is kept with the change that follows it (the earliest, when there are several).
 * A change from `running` to `migrating` right after a `job.move-waits` event (or, in a store older than that event,
 * one whose reason says the job works on until its new instances are ready) is `worksOn`, and the first change of a
 * task of the job to `checkpointing` after it says when that work stopped: the stop is what ends it, whichever pass
 * issues it (the gate opening, a spot notice), and before it every task of the job still runs.
 */
export function jobTransitions(events: readonly EventRecord[]): JobTransition[] {
  const transitions: JobTransition[] = [];
  let workedUntil: number | undefined;
  // A move that waits for its new instances was written just before the job's change to `migrating`.
  let moveWaits = false;
  for (const e of events) {
    const until = ranUntilOf(e);
    if (until !== undefined) workedUntil = Math.min(until, workedUntil ?? until);
    if (e.kind === JOB_MOVE_WAITS_EVENT) moveWaits = true;
    if (e.kind === TASK_STATE_EVENT) {
      const last = transitions[transitions.length - 1];
      const task = taskTransitionData.safeParse(e.data);
      if (
        last?.worksOn === true &&
        last.workStoppedSeconds === undefined &&
        task.data?.to === 'checkpointing'
      ) {
        const stopped = Math.min(e.atSeconds, workedUntil ?? e.atSeconds);
        transitions[transitions.length - 1] = { ...last, workStoppedSeconds: stopped };
      }
    }
    if (e.kind !== JOB_STATE_EVENT) continue;
    const data = transitionData.safeParse(e.data);
    const worked = workedUntil;
    const waits = moveWaits;
    workedUntil = undefined;
    moveWaits = false;
    if (!data.success) continue;
    const { to, reason } = data.data;
    const from = data.data.from ?? transitions[transitions.length - 1]?.to;
    const worksOn =
      from === 'running' &&
      to === 'migrating' &&
      (waits || (reason !== undefined && reason.endsWith(`: ${WORKS_ON_UNTIL_READY}`)));
    transitions.push({
      atSeconds: e.atSeconds,
      to,
      ...(worked === undefined ? {} : { workedUntilSeconds: worked }),
      ...(worksOn ? { worksOn: true as const } : {}),
    });
  }
  return transitions;
}

/** When the job last entered `running`, if it ever did. */
export function lastEnteredRunning(transitions: readonly JobTransition[]): number | undefined {
  for (let i = transitions.length - 1; i >= 0; i--)
    if (transitions[i]?.to === 'running') return transitions[i]?.atSeconds;
  return undefined;
}
