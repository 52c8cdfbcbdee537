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

/**
 * What ran on a controller, as a fleetwise trace (`fleetwise export-trace`): each job at its submission time
 * (relative to the first exported job), with its spec's tasks and demands, running for the time its state history
 * shows it `running` past its init delays, or for its declared `expectedDurationSeconds` when it never finished.
 */

/** The jobs and their state changes (`job.state` events), in submission and event order. */
export interface StateHistory {
  readonly jobs: readonly JobRecord[];
  readonly jobStateEvents: readonly EventRecord[];
  /** The scheduler's saved learned state (controller/scheduler-state.ts), as stored; absent when none was saved. */
  readonly schedulerState?: unknown;
}

/** The event kind a job's state change is recorded under (controller/state/lifecycle.ts transitionJob). */
export const JOB_STATE_EVENT = 'job.state';

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
 * Seconds each job spent `running`, summed over its state history (a move's checkpoint and restart excluded), less
 * `initDelaySeconds(job)` of each stretch (not below zero): the controller marks a job running once all its tasks
 * have started, so each stretch holds the job's initialization before its progress.
 */
export function runningSeconds(
  events: readonly EventRecord[],
  initDelaySeconds: (jobId: string) => number = () => 0,
): ReadonlyMap<string, number> {
  const total = new Map<string, number>();
  const since = new Map<string, number>();
  for (const e of events) {
    if (e.kind !== JOB_STATE_EVENT || e.jobId === undefined) continue;
    const data = e.data;
    if (typeof data !== 'object' || data === null || Array.isArray(data)) continue;
    const { from, to } = data as { readonly from?: unknown; readonly to?: unknown };
    const started = since.get(e.jobId);
    if (from === 'running' && started !== undefined) {
      const stretch = Math.max(0, e.atSeconds - started - initDelaySeconds(e.jobId));
      total.set(e.jobId, (total.get(e.jobId) ?? 0) + stretch);
      since.delete(e.jobId);
    }
    if (to === 'running') since.set(e.jobId, e.atSeconds);
  }
  return total;
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
  const ran = runningSeconds(history.jobStateEvents, (id) => initDelays.get(id) ?? 0);
  const raw = runningSeconds(history.jobStateEvents);
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
