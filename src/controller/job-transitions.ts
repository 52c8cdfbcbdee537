import { z } from 'zod';
import { JOB_STATES, type EventRecord, type JobState } from './state-store.js';

/*
 * A job's history of states, read from its `job.state` events (lifecycle.ts writes them) and its `job.ran-until` ones
 * (cloud-sync.ts writes them when its work on a lost instance ended before its return to the queue was written).
 */

/**
 * When a job's work on a lost instance really ended, written just before its return to the queue when that comes later
 * (a sync after the controller was stopped, a worker's heartbeat timeout): its running stretch ends there, not at the
 * change, for its run limit and for `export-trace`.
 */
export const JOB_RAN_UNTIL_EVENT = 'job.ran-until';

/** The kind of a job's state change (controller/state/lifecycle.ts transitionJob). */
const JOB_STATE_EVENT = 'job.state';

/** The event kinds `jobTransitions` reads: what a read of the store for `runningSecondsOf` asks for. */
export const JOB_HISTORY_EVENT_KINDS: readonly string[] = [JOB_STATE_EVENT, JOB_RAN_UNTIL_EVENT];

/** What a `job.state` event's data says of the change (lifecycle.ts writes it). */
const transitionData = z.object({ to: z.enum(JOB_STATES) });

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
 * Seconds spent in `running` by a job whose state changes are `transitions` (oldest first), up to `nowSeconds`. A
 * stretch ends where its work did (`workEndSeconds`), so the time a controller was stopped, or an instance gone before
 * anyone saw, is not run time.
 */
export function runningSecondsOf(transitions: readonly JobTransition[], nowSeconds: number): number {
  let total = 0;
  let since: number | undefined;
  for (const t of transitions) {
    if (t.to === 'running') since ??= t.atSeconds;
    else if (since !== undefined) {
      total += workEndSeconds(since, t.atSeconds, t.workedUntilSeconds) - since;
      since = undefined;
    }
  }
  if (since !== undefined) total += Math.max(0, nowSeconds - since);
  return total;
}

/**
 * The state changes a job's event log records, in its order (events of other kinds, or without a target state,
 * skipped). A `job.ran-until` event is kept with the change that follows it (the earliest, when there are several).
 */
export function jobTransitions(events: readonly EventRecord[]): JobTransition[] {
  const transitions: JobTransition[] = [];
  let workedUntil: number | undefined;
  for (const e of events) {
    const until = ranUntilOf(e);
    if (until !== undefined) workedUntil = Math.min(until, workedUntil ?? until);
    if (e.kind !== JOB_STATE_EVENT) continue;
    const data = transitionData.safeParse(e.data);
    const worked = workedUntil;
    workedUntil = undefined;
    if (!data.success) continue;
    transitions.push({
      atSeconds: e.atSeconds,
      to: data.data.to,
      ...(worked === undefined ? {} : { workedUntilSeconds: worked }),
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
