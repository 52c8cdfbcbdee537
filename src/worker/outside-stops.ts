import type { LocalTask } from './task-record.js';

/**
 * Exits the worker did not ask for that are stops from outside (a host shutdown, `docker stop`, a restarted engine),
 * not the task's own end: such a task resumes from its last checkpoint (task-lifecycle.ts `finished`).
 */

/** A task's exit code when SIGTERM ended it (128 + 15), as Docker and the process executor report it. */
export const SIGTERM_EXIT_CODE = 128 + 15;

/** Stops from outside in a row, none getting further than the furthest, after which an exit is taken at its word. */
const MAX_OUTSIDE_STOPS_WITHOUT_PROGRESS = 3;

/** Its progress so far covers every iteration its job declares (none declared: not known, so no). */
export function reportedAll(t: LocalTask): boolean {
  return t.total !== undefined && (t.completed ?? 0) >= t.total;
}

/**
 * Why an exit the worker did not ask for is taken as a stop from outside, or undefined when it is the task's own end.
 * A host shutting down, `docker stop` or a restarted Docker engine sends the task SIGTERM: a task that checkpoints
 * and exits 0 on it, short of the iterations its job declares, has not finished, and one SIGTERM ended (exit 143)
 * has not failed, nor has one that `docker stop` killed past its grace (exit 137, Docker saying it was not out of
 * memory: `killedFromOutside`). They resume from their last checkpoint. A job that declares no iterations gives nothing to tell a
 * shutdown's exit 0 from its end by: that exit stays a success. The same rule whether the worker watched the exit or
 * adopted it after a restart.
 *
 * Stops from outside in a row that get the task no further (gotFurther) are bounded
 * (MAX_OUTSIDE_STOPS_WITHOUT_PROGRESS): beyond them its exit is taken at its word, or a task that ends early on its
 * own (exit 0 short of its declared iterations), or exits 143 by itself, would run again for ever: its exit 0 is its
 * end, its 143 a failure (counted against its retries). A job stopped again and again, each time getting further (a
 * host restarted every night), resumes every time.
 */
export function stoppedFromOutside(
  t: LocalTask,
  exitCode: number | undefined,
  killedFromOutside: boolean,
): string | undefined {
  if (!gotFurther(t) && (t.outsideStops ?? 0) >= MAX_OUTSIDE_STOPS_WITHOUT_PROGRESS) return undefined;
  if (exitCode === SIGTERM_EXIT_CODE)
    return 'SIGTERM ended it (exit code 143) without the worker asking (a shutdown, `docker stop`): taken as stopped; it resumes from its last checkpoint';
  if (killedFromOutside)
    return (
      'SIGKILL ended it (exit code 137, not out of memory) without the worker asking (`docker stop` of a task that ' +
      'did not exit on SIGTERM, `docker kill`): taken as stopped; it resumes from its last checkpoint'
    );
  if (exitCode === 0 && t.total !== undefined && !reportedAll(t))
    return (
      `it exited (code 0) short of its declared iterations (${t.completed ?? 0} of ${t.total}) without the worker ` +
      'asking: taken as stopped from outside (a shutdown signal, `docker stop`); it resumes from its last checkpoint'
    );
  return undefined;
}

/**
 * Whether this run got the task further than the stops from outside before it: more iterations than the furthest, or
 * a checkpoint of its own (uploaded since it started; a job that reports no iterations shows its progress so).
 */
export function gotFurther(t: LocalTask): boolean {
  if (t.stoppedOutsideAt === undefined || (t.completed ?? 0) > t.stoppedOutsideAt) return true;
  return t.checkpoint !== undefined && t.checkpoint.atSeconds * 1000 >= t.startedAtMs;
}
