import {
  MAX_REPORTED_COUNT,
  MAX_REPORTED_OUTSIDE_STOPS,
  type ReportedTaskState,
  type TaskReport,
} from '../protocol/worker-protocol.js';
import type { LocalTask } from './task-record.js';

/**
 * What the worker's heartbeat reports of a task (the protocol's TaskReport); `outsideStops`: the stops from outside its
 * attempt has had on this worker (task-exit.ts counts them). `nowMs`: this host's clock as the report is made, which
 * an ended task's exit age is counted to (a report is made for each heartbeat, so the age is current when sent).
 */
export function taskReport(t: LocalTask, outsideStops = 0, nowMs = Date.now()): TaskReport {
  const state: ReportedTaskState = t.busy !== undefined && t.phase === 'running' ? 'running' : t.phase;
  const completed = reportable(t.completed);
  const perSecond = state === 'running' ? reportable(t.perSecond) : undefined;
  const checkpointError = t.watcher?.checkpointError;
  return {
    taskId: t.taskId,
    state,
    ...(t.exitCode === undefined ? {} : { exitCode: t.exitCode }),
    ...(t.reason === undefined ? {} : { reason: t.reason.slice(0, 4000) }),
    ...(t.phase === 'failed' && t.hostFault !== undefined ? { hostFault: t.hostFault } : {}),
    ...(completed === undefined ? {} : { completedIterations: completed }),
    ...(perSecond === undefined ? {} : { throughputPerSecond: perSecond }),
    ...(t.checkpoint === undefined ? {} : { checkpoint: t.checkpoint }),
    ...(t.restoredFrom === undefined ? {} : { restoredFrom: t.restoredFrom }),
    ...(checkpointError === undefined ? {} : { checkpointError: checkpointError.slice(0, 4000) }),
    ...(outsideStops > 0 ? { outsideStops: Math.min(outsideStops, MAX_REPORTED_OUTSIDE_STOPS) } : {}),
    ...(t.attempt === undefined ? {} : { attempt: t.attempt }),
    ...(ended(state) ? exitAge(t.exitedAtMs, nowMs) : {}),
  };
}

/** A state that ends the task's run: its report says when it exited. */
function ended(state: ReportedTaskState): boolean {
  return state === 'succeeded' || state === 'failed';
}

/**
 * How long ago a task exited at `exitedAtMs` (both times this host's): never negative (a clock stepped back since
 * the exit makes it now), and nothing for an exit of unknown time.
 */
function exitAge(exitedAtMs: number | undefined, nowMs: number): Pick<TaskReport, 'exitedSecondsAgo'> {
  if (exitedAtMs === undefined || !Number.isFinite(exitedAtMs) || !Number.isFinite(nowMs)) return {};
  return { exitedSecondsAgo: Math.max(0, nowMs - exitedAtMs) / 1000 };
}

/**
 * A count the task's progress file gave, if the protocol can carry it. The file is the task's to write: a value past
 * the protocol's bounds (a 2e15 token counter, a rate over microsecond timestamps) is left out of the report, or the
 * controller would refuse the whole heartbeat, and with it every other task on this instance.
 */
function reportable(n: number | undefined): number | undefined {
  return n !== undefined && Number.isFinite(n) && n >= 0 && n <= MAX_REPORTED_COUNT ? n : undefined;
}
