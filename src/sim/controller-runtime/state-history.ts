import { expectedDurationOf } from '../../controller/job-spec/spec.js';
import type { EventRecord, JobRecord, JobState } from '../../controller/state-store.js';
import {
  FLEETWISE_TRACE_FORMAT,
  type FleetwiseTraceDocument,
  type FleetwiseTraceJob,
} from '../traces/fleetwise-json.js';
import { fleetwiseTrace } from '../traces/fleetwise-json.js';
import { dependencyFault, type DependencyFault } from '../../world/job-dependencies.js';
import { specTraceJob } from './spec-trace.js';
import { JOB_MOVE_WAITS_EVENT, WORKS_ON_UNTIL_READY } from '../../controller/reconcile/plan-intents.js';
import { JOB_RAN_UNTIL_EVENT, ranUntilOf, workEndSeconds } from '../../controller/job-transitions.js';

/**
 * What ran on a controller, as a fleetwise trace (`fleetwise export-trace`): each job at its submission time
 * (relative to the first exported job), with its spec's tasks and demands, running for the time its state history
 * shows it working past its init delays, or for its declared `expectedDurationSeconds` when it never finished.
 */

/** The jobs and their state changes (`job.state` events), in submission and event order. */
export interface StateHistory {
  readonly jobs: readonly JobRecord[];
  readonly jobStateEvents: readonly EventRecord[];
  /**
   * The events besides its state changes that say when a job worked (WORK_EVENT_KINDS; of `task.state`, only the
   * changes into `checkpointing`), in event order. Without them a job works only while `running`.
   */
  readonly workEvents?: readonly EventRecord[];
  /** The scheduler's saved learned state (controller/scheduler-state.ts), as stored; absent when none was saved. */
  readonly schedulerState?: unknown;
}

/** The event kind a job's state change is recorded under (controller/state/lifecycle.ts transitionJob). */
export const JOB_STATE_EVENT = 'job.state';

/** The event kind a task's state change is recorded under (controller/state/lifecycle.ts transitionTask). */
export const TASK_STATE_EVENT = 'task.state';

/**
 * The kinds of `StateHistory.workEvents`: a move that waits for its new instances (its job works on while
 * `migrating`), a task told to checkpoint and stop (its job's work stops there), and the real end of a job's work on
 * an instance lost while no one saw (its return to the queue is written later).
 */
export const WORK_EVENT_KINDS: readonly string[] = [
  JOB_MOVE_WAITS_EVENT,
  TASK_STATE_EVENT,
  JOB_RAN_UNTIL_EVENT,
];

/** A job left out of the trace, and why. */
export interface SkippedJob {
  readonly id: string;
  readonly reason: string;
}

export interface HistoryTrace {
  readonly document: FleetwiseTraceDocument;
  readonly skipped: readonly SkippedJob[];
}

const FINAL: readonly JobState[] = ['succeeded', 'failed', 'cancelled', 'unsuccessful'];

/** The duration of a job that ran only within its init delay: a trace's durations are positive. */
const MIN_MEASURED_SECONDS = 1;

/**
 * Seconds each job worked, summed over its history, less `initDelaySeconds(job)` of each stretch (not below zero):
 * the controller marks a job running once all its tasks have started, so each stretch holds the job's initialization
 * before its progress. `events` are its `job.state` events and, where the store has them, the `WORK_EVENT_KINDS`
 * ones, in event order. A job works while `running`, and while `migrating` in a move that makes before it breaks
 * (its tasks work on until its new instances are ready) until a task of it is told to checkpoint and stop; such a
 * move called off leaves it working in one stretch. A stretch ends where a `job.ran-until` event before its end says
 * the work did (never before the stretch began, nor after its change: `workEndSeconds`, as the run limits count).
 */
export function runningSeconds(
  events: readonly EventRecord[],
  initDelaySeconds: (jobId: string) => number = () => 0,
): ReadonlyMap<string, number> {
  const total = new Map<string, number>();
  // Open stretches: when the job began working.
  const since = new Map<string, number>();
  // Jobs whose next change to `migrating` is a move that waits, and when the work of open stretches really ended.
  const waits = new Set<string>();
  const ranUntil = new Map<string, number>();
  const states = new Map<string, unknown>();
  const close = (jobId: string, atSeconds: number): void => {
    const started = since.get(jobId);
    if (started === undefined) return;
    const end = workEndSeconds(started, atSeconds, ranUntil.get(jobId));
    const stretch = Math.max(0, end - started - initDelaySeconds(jobId));
    total.set(jobId, (total.get(jobId) ?? 0) + stretch);
    since.delete(jobId);
    ranUntil.delete(jobId);
  };
  for (const e of events) {
    const { jobId, data } = e;
    if (jobId === undefined) continue;
    if (e.kind === JOB_MOVE_WAITS_EVENT) {
      waits.add(jobId);
      continue;
    }
    const until = ranUntilOf(e);
    if (until !== undefined) {
      if (since.has(jobId)) ranUntil.set(jobId, Math.min(until, ranUntil.get(jobId) ?? until));
      continue;
    }
    if (typeof data !== 'object' || data === null || Array.isArray(data)) continue;
    const fields = data as Readonly<Record<string, unknown>>;
    switch (e.kind) {
      case TASK_STATE_EVENT:
        // A task told to stop ends a waiting move's work; one of a running job is followed by its change to migrating.
        if (fields['to'] === 'checkpointing' && states.get(jobId) === 'migrating') close(jobId, e.atSeconds);
        break;
      case JOB_STATE_EVENT: {
        const { from, to, reason } = fields;
        const works =
          (from === 'running' &&
            to === 'migrating' &&
            (waits.has(jobId) ||
              (typeof reason === 'string' && reason.endsWith(`: ${WORKS_ON_UNTIL_READY}`)))) ||
          (from === 'migrating' && to === 'running');
        if (!works) close(jobId, e.atSeconds);
        if (to === 'running' && !since.has(jobId)) since.set(jobId, e.atSeconds);
        waits.delete(jobId);
        ranUntil.delete(jobId);
        states.set(jobId, to);
        break;
      }
    }
  }
  return total;
}

/** The history's events as `runningSeconds` reads them: its state changes and work events, in event order. */
export function historyEvents(history: StateHistory): EventRecord[] {
  return inEventOrder(history.jobStateEvents, history.workEvents ?? []);
}

/** Two lists of events in event order as one (`seq` order). */
function inEventOrder(a: readonly EventRecord[], b: readonly EventRecord[]): EventRecord[] {
  const merged: EventRecord[] = [];
  let i = 0;
  let j = 0;
  while (i < a.length || j < b.length) {
    const x = a[i];
    const y = b[j];
    if (y === undefined || (x !== undefined && x.seq <= y.seq)) {
      merged.push(x as EventRecord);
      i++;
    } else {
      merged.push(y);
      j++;
    }
  }
  return merged;
}

/**
 * The history as a fleetwise trace. A finished job runs for its measured running time less its declared init delay
 * each time it entered running (the replay adds that delay back on every start); what is left includes any slowdown
 * it had next to its neighbours (the simulator's own interference comes on top). A job that has not finished
 * runs for its declared duration. Jobs that never ran (cancelled while queued, failed before they started) and
 * unfinished jobs without a declared duration are left out, each with its reason, and so are the jobs that depend on
 * one left out; the others keep their `dependsOn`, so a pipeline replays in order.
 */
export function historyTrace(
  history: StateHistory,
  options: { readonly name: string; readonly source: string },
): HistoryTrace {
  // The replay adds the init delay the trace declares (the spec's estimate) before progress on every (re)start,
  // as the controller's model does after each entry to running; the measured stretches already hold the real one,
  // so that estimate is taken off each, or a replayed job would initialize twice.
  const initDelays = new Map(history.jobs.map((j) => [j.id, j.spec.checkpoint.initDelaySeconds ?? 0]));
  const events = historyEvents(history);
  const ran = runningSeconds(events, (id) => initDelays.get(id) ?? 0);
  const raw = runningSeconds(events);
  const skipped: SkippedJob[] = [];
  const kept: { job: JobRecord; durationSeconds: number; durationFrom: 'measured' | 'declared' }[] = [];
  // What the trace will say of each kept job, for its dependents: the rules the trace is read with (dependencyFault).
  const keptViews = new Map<string, DependencyView>();
  // In submission order, so a dependency is decided before its dependents: one left out takes them along, and so
  // does one kept as failed (the trace's reader refuses a dependent of a failed job: it could never start).
  const keep = (job: JobRecord, durationSeconds: number, durationFrom: 'measured' | 'declared'): void => {
    const view: DependencyView = {
      id: job.id,
      arrivalSeconds: job.submittedAtSeconds,
      team: job.spec.team,
      successful: job.state === 'succeeded' || !FINAL.includes(job.state) ? undefined : false,
    };
    for (const id of job.spec.dependsOn ?? []) {
      const fault = dependencyFault(view, id, keptViews.get(id));
      if (fault !== undefined) {
        skipped.push({ id: job.id, reason: dependencyReason(id, fault) });
        return;
      }
    }
    kept.push({ job, durationSeconds, durationFrom });
    keptViews.set(job.id, view);
  };
  for (const job of history.jobs) {
    if (FINAL.includes(job.state)) {
      const measured = ran.get(job.id) ?? 0;
      if (measured > 0) keep(job, measured, 'measured');
      // It ran, but never past its declared init delay: the least duration a trace takes, so that the replay still
      // holds its instances through the init (and a failure there still fails its dependents).
      else if ((raw.get(job.id) ?? 0) > 0) keep(job, MIN_MEASURED_SECONDS, 'measured');
      else skipped.push({ id: job.id, reason: `${job.state} without ever running` });
      continue;
    }
    const declared = expectedDurationOf(job.spec);
    if (declared !== undefined) keep(job, declared, 'declared');
    else
      skipped.push({
        id: job.id,
        reason: `${job.state}, not finished, and its spec declares no expectedDurationSeconds`,
      });
  }
  // A loop, not Math.min(...): spreading every kept job as arguments overflows the call stack past ~100,000 jobs.
  let start = Infinity;
  for (const k of kept) if (k.job.submittedAtSeconds < start) start = k.job.submittedAtSeconds;
  const jobs: FleetwiseTraceJob[] = kept.map(({ job, durationSeconds, durationFrom }) =>
    specTraceJob(job.spec, {
      id: job.id,
      arrivalSeconds: job.submittedAtSeconds - start,
      durationSeconds,
      durationFrom,
      ...(job.state === 'succeeded' || !FINAL.includes(job.state) ? {} : { successful: false }),
      dependsOn: job.spec.dependsOn,
    }),
  );
  const document: FleetwiseTraceDocument = {
    format: FLEETWISE_TRACE_FORMAT,
    name: options.name,
    source: options.source,
    jobs,
  };
  // Read back as `simulate` will read it, so an export never writes a trace that cannot be replayed.
  if (jobs.length > 0) fleetwiseTrace(document, `the trace exported from ${options.source}`);
  return { document, skipped };
}

type DependencyView = Parameters<typeof dependencyFault>[0];

/** Why a job is left out for a dependency the trace could not replay. */
function dependencyReason(id: string, fault: DependencyFault): string {
  switch (fault.kind) {
    case 'fails':
      return `it depends on ${id}, which failed (successful: false in the trace), so it could never start`;
    case 'itself':
      return 'it depends on itself';
    case 'not-earlier':
      return `it depends on ${id}, which is not in the trace`;
    case 'arrives-later':
      return `it depends on ${id}, which was submitted after it`;
    case 'other-team':
      return `it depends on ${id}, a job of team ${fault.team}`;
  }
}
