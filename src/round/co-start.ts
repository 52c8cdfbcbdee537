import type { JobPlacement } from '../scheduler/expected-start.js';

/**
 * Co-start (gang start) of a multi-task job (Murmuration digest §7.2). A synchronous job progresses only once all its
 * tasks run, so a task started before its siblings burns paid capacity waiting for them; its completion is set by its
 * last task. The tasks are therefore prepared independently (instance ready, image fetched or built, checkpoint
 * downloaded) and released together when the last one is ready. The rule of release is the same in both runtimes, the
 * timing of preparation is not: the controller, which cannot know when an instance will register, starts preparing
 * a job's tasks once every one's gate is open, holds them and releases them by `coStartDecision`, with its timeout;
 * the simulator's command issuer knows each instance's ready time, so it starts each task's preparation late enough
 * that all are ready at S_job (`gangStart`'s job start), and needs no timeout (its instances always come). Where
 * preparations differ in length (an image already on one instance), the simulator's job starts by up to that
 * difference sooner.
 */

/** Where one task of a job stands before its release. */
export interface CoStartTask {
  readonly taskId: string;
  /** Prepared on its instance and waiting for the release (the worker reported "ready"; in the simulator, its gate opened). */
  readonly ready: boolean;
  /**
   * When it became ready for its current start (undefined while not ready since that start was asked for: a readiness
   * of an earlier placement, even on the same instance, is none). Also set on a task reported ready whose readiness
   * is no longer trusted (its worker fell silent): it does not release the job, but its wait counts towards the
   * timeout.
   */
  readonly readySinceSeconds?: number | undefined;
}

export type CoStartDecision =
  | { readonly kind: 'release' }
  | { readonly kind: 'wait'; readonly waitingFor: readonly string[] }
  | { readonly kind: 'replan'; readonly reason: string };

/** Default: a job whose first task has waited this long for its siblings is planned again (its slots freed). */
export const DEFAULT_CO_START_TIMEOUT_SECONDS = 900;

/** The timeout doubles at most this many times for a job planned again and again (16 × the timeout). */
export const CO_START_TIMEOUT_DOUBLINGS = 4;

/**
 * The timeout of a job's barrier after `replans` consecutive co-start re-plans of it: doubled at each, up to
 * `CO_START_TIMEOUT_DOUBLINGS` times. A preparation longer than the timeout (a large image or checkpoint restore)
 * would otherwise be cut short and started over for ever; a sibling whose instance never comes still frees the
 * slots, later each time.
 */
export function coStartTimeoutAfter(timeoutSeconds: number, replans: number): number {
  return timeoutSeconds * 2 ** Math.min(Math.max(0, Math.floor(replans)), CO_START_TIMEOUT_DOUBLINGS);
}

/**
 * The barrier, level-triggered: it reads only where each task stands now, so a restarted controller or worker decides
 * as before. All ready → release all at once; some ready for longer than the timeout → re-plan the job (its instance
 * may never come, and its ready tasks hold paid capacity idle); else wait for the ones not ready.
 */
export function coStartDecision(
  tasks: readonly CoStartTask[],
  nowSeconds: number,
  timeoutSeconds = DEFAULT_CO_START_TIMEOUT_SECONDS,
): CoStartDecision {
  const notReady = tasks.filter((t) => !t.ready).map((t) => t.taskId);
  if (notReady.length === 0) return { kind: 'release' };
  // A readiness no longer trusted still held its slot since then: it counts towards the timeout.
  const since = tasks.reduce(
    (m, t) => (t.readySinceSeconds !== undefined ? Math.min(m, t.readySinceSeconds) : m),
    Number.POSITIVE_INFINITY,
  );
  if (Number.isFinite(since) && nowSeconds - since >= timeoutSeconds)
    return {
      kind: 'replan',
      reason: `${notReady.length} task(s) not ready ${Math.round(nowSeconds - since)} s after the first was (timeout ${timeoutSeconds} s)`,
    };
  return { kind: 'wait', waitingFor: notReady };
}

/** A slot a gang start leaves idle until the job's start: offered for backfill by short tasks (digest §7.2 step 3). */
export interface BackfillWindow {
  readonly instanceId: string;
  readonly fromSeconds: number;
  readonly untilSeconds: number;
}

export interface GangStart {
  /** Every task starts at S_job. */
  readonly jobStartSeconds: number;
  readonly starts: readonly {
    readonly taskId: string;
    readonly instanceId: string;
    readonly startSeconds: number;
  }[];
  /** The earlier slots, free for backfill until S_job. */
  readonly backfill: readonly BackfillWindow[];
}

/** The gang rule over a placement: all tasks start at the latest expected start; earlier slots become backfill windows. */
export function gangStart(placement: JobPlacement): GangStart {
  const s = placement.jobStartSeconds;
  return {
    jobStartSeconds: s,
    starts: placement.placements.map((p) => ({
      taskId: p.taskId,
      instanceId: p.instanceId,
      startSeconds: s,
    })),
    backfill: placement.placements
      .filter((p) => p.expectedStartSeconds < s)
      .map((p) => ({ instanceId: p.instanceId, fromSeconds: p.expectedStartSeconds, untilSeconds: s })),
  };
}

/** A backfill candidate fits a window when it is expected to end by the window's end (est ≤ S_job − now). */
export function fitsBackfill(window: BackfillWindow, nowSeconds: number, taskSeconds: number): boolean {
  return Math.max(nowSeconds, window.fromSeconds) + taskSeconds <= window.untilSeconds;
}

/** One task's start, for the metrics: when it began holding its slot and what that slot costs it. */
export interface TaskStart {
  readonly startSeconds: number;
  /** Its instance's $/hour. */
  readonly costPerHour: number;
  /** Its share of that instance (dominant share of the capacity, see taskShareOf). */
  readonly share: number;
}

/** max − min task start (the digest's per-job start skew); 0 for a job of one task. */
export function startSkewSeconds(starts: readonly TaskStart[]): number {
  if (starts.length < 2) return 0;
  let lo = Number.POSITIVE_INFINITY;
  let hi = Number.NEGATIVE_INFINITY;
  for (const t of starts) {
    lo = Math.min(lo, t.startSeconds);
    hi = Math.max(hi, t.startSeconds);
  }
  return hi - lo;
}

/** Σ over tasks of (S_job − start) in task-seconds (digest §7.6 E1). */
export function barrierIdleTaskSeconds(starts: readonly TaskStart[], jobStartSeconds: number): number {
  return starts.reduce((s, t) => s + Math.max(0, jobStartSeconds - t.startSeconds), 0);
}

/** Σ over tasks of (S_job − start) × the task's share of its instance's $/hour, in $ (digest §7.5). */
export function barrierIdleCost(starts: readonly TaskStart[], jobStartSeconds: number): number {
  return starts.reduce(
    (s, t) => s + (Math.max(0, jobStartSeconds - t.startSeconds) * t.costPerHour * t.share) / 3600,
    0,
  );
}
