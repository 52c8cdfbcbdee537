import { z } from 'zod';
import { JOB_STATES, type EventRecord, type JobState } from './state-store.js';

/** A job's history of states, read from its `job.state` events (lifecycle.ts writes them). */

/** What a `job.state` event's data says of the change (lifecycle.ts writes it). */
const transitionData = z.object({ to: z.enum(JOB_STATES) });

/** One change of a job's state, from its `job.state` event. */
export interface JobTransition {
  readonly atSeconds: number;
  readonly to: JobState;
}

/** Seconds spent in `running` by a job whose state changes are `transitions` (oldest first), up to `nowSeconds`. */
export function runningSecondsOf(transitions: readonly JobTransition[], nowSeconds: number): number {
  let total = 0;
  let since: number | undefined;
  for (const t of transitions) {
    if (t.to === 'running') since ??= t.atSeconds;
    else if (since !== undefined) {
      total += t.atSeconds - since;
      since = undefined;
    }
  }
  if (since !== undefined) total += Math.max(0, nowSeconds - since);
  return total;
}

/** The state changes a `job.state` event log records (events of other kinds, or without a target state, skipped). */
export function jobTransitions(events: readonly EventRecord[]): JobTransition[] {
  const transitions: JobTransition[] = [];
  for (const e of events) {
    if (e.kind !== 'job.state') continue;
    const data = transitionData.safeParse(e.data);
    if (data.success) transitions.push({ atSeconds: e.atSeconds, to: data.data.to });
  }
  return transitions;
}

/** When the job last entered `running`, if it ever did. */
export function lastEnteredRunning(transitions: readonly JobTransition[]): number | undefined {
  for (let i = transitions.length - 1; i >= 0; i--)
    if (transitions[i]?.to === 'running') return transitions[i]?.atSeconds;
  return undefined;
}
