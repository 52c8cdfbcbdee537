import type { ObjectStore } from '../storage/object-store.js';
import { checkpointManifestSchema } from './checkpoints.js';
import type { LocalTask } from './task-record.js';

/**
 * Exits the worker did not ask for that are stops from outside (a host shutdown, `docker stop`, a restarted engine; a
 * signal not from the worker for a process task), not the task's own end: such a task resumes from its last
 * checkpoint (task-exit.ts `handleExit`).
 */

/** A task's exit code when SIGTERM ended it (128 + 15), as Docker and the process executor report it. */
export const SIGTERM_EXIT_CODE = 128 + 15;

/** Stops from outside in a row, none getting further than the furthest, after which an exit is taken at its word. */
const MAX_OUTSIDE_STOPS_WITHOUT_PROGRESS = 3;

/**
 * Stops from outside in one attempt of a task on one worker, progress or not, after which an exit is taken at its
 * word: a task that gets a little further in every run (or writes a checkpoint whose bytes differ every time) and
 * ends on its own short of its declared iterations, or exits 143 by itself, would otherwise run again for ever. The
 * count is kept with the task's record on the host (task-record.ts), so a restarted worker goes on with it.
 */
const MAX_OUTSIDE_STOPS_PER_ATTEMPT = 10;

/** Its progress so far covers every iteration its job declares (none declared: not known, so no). */
export function reportedAll(t: LocalTask): boolean {
  return t.total !== undefined && (t.completed ?? 0) >= t.total;
}

/**
 * An exit 0 that leaves the task short of the iterations its job declares. A task that has never reported any in any
 * run (a gang's coordinator, which writes no progress) is not short: its exit 0 is its end, or it would be run again
 * after its peers are gone, and wait for them for ever. Every run starts with an empty progress file, so a run that
 * has not reported yet is short when the task has a past: it restored a checkpoint (resumed after a move, perhaps on
 * a fresh worker, with part of its work done), uploaded one of its own, or an earlier run of it on this worker was
 * stopped from outside having reported (stoppedOutsideAt). A coordinator that checkpoints thus loses its exemption:
 * its exit 0 is taken as a stop until stops that get it no further are spent (outsideStopsSpent).
 */
function endedShort(t: LocalTask): boolean {
  if (t.total === undefined || reportedAll(t)) return false;
  return (
    t.completed !== undefined ||
    t.restoredFrom !== undefined ||
    t.checkpoint !== undefined ||
    (t.stoppedOutsideAt ?? 0) > 0
  );
}

/** What a stop from outside is to the task's executor, in the words of its log and report. */
function fromOutside(executor: 'docker' | 'process'): string {
  return executor === 'docker'
    ? 'taken as stopped from outside the worker (a host shutdown, `docker stop`)'
    : 'taken as killed from outside (a signal not from the worker)';
}

/**
 * Why an exit the worker did not ask for is taken as a stop from outside, or undefined when it is the task's own end.
 * A host shutting down, `docker stop` or a restarted Docker engine sends the task SIGTERM (a process task: any signal
 * from someone other than the worker): a task that checkpoints and exits 0 on it, short of the iterations its job
 * declares, has not finished, and one SIGTERM ended (exit 143) has not failed, nor has one that `docker stop` killed
 * past its grace (exit 137, Docker saying it was not out of memory: `killedFromOutside`). They resume from their
 * last checkpoint. A job that declares no iterations, or a task that never reported any (endedShort), gives nothing
 * to tell a shutdown's exit 0 from its end by: that exit stays a success. The same rule whether the worker watched
 * the exit or adopted it after a restart. How many such stops a task gets is bounded (outsideStopsSpent).
 */
export function stoppedFromOutside(
  t: LocalTask,
  exitCode: number | undefined,
  killedFromOutside: boolean,
  executor: 'docker' | 'process',
): string | undefined {
  const resumes = `${fromOutside(executor)}; it resumes from its last checkpoint`;
  if (exitCode === SIGTERM_EXIT_CODE)
    return `SIGTERM ended it (exit code 143) without the worker asking: ${resumes}`;
  if (killedFromOutside)
    return (
      'SIGKILL ended it (exit code 137, not out of memory) without the worker asking (`docker stop` of a task that ' +
      `did not exit on SIGTERM, \`docker kill\`): ${resumes}`
    );
  if (exitCode === 0 && endedShort(t))
    return (
      `it exited (code 0) short of its declared iterations (${t.completed ?? 0} of ${t.total ?? '?'}) without the ` +
      `worker asking: ${resumes}`
    );
  return undefined;
}

/**
 * Why stops from outside are spent for the task, so that its exit is taken at its word (its exit 0 is its end, its
 * 143 a failure counted against its retries), or undefined while one more may be: 3 in a row that got it no further
 * (`further`: this run's, gotFurther), or 10 in this attempt on this host (`inAttempt`, worker restarts included),
 * however far each got. A job stopped again and again, each time getting further (a host restarted every night),
 * resumes every time up to that bound.
 */
export function outsideStopsSpent(t: LocalTask, further: boolean, inAttempt: number): string | undefined {
  if (inAttempt >= MAX_OUTSIDE_STOPS_PER_ATTEMPT)
    return `it was stopped from outside ${inAttempt} times in this attempt already (at most ${MAX_OUTSIDE_STOPS_PER_ATTEMPT})`;
  if (!further && (t.outsideStops ?? 0) >= MAX_OUTSIDE_STOPS_WITHOUT_PROGRESS)
    return `${t.outsideStops ?? 0} stops from outside in a row got it no further`;
  return undefined;
}

/**
 * Whether this run got the task further than the stops from outside before it. A job that declares its iterations is
 * judged by them alone: more than the furthest any earlier stop reached (a task that starts over at every run and
 * uploads a checkpoint as it goes gets no further by that). One that declares none by its iterations, or by a
 * checkpoint of its own (uploaded since it started) whose content (its manifest's sha256) differs from the one it
 * restored: a task that writes back what it restored has not moved. A manifest the store does not give counts as
 * progress (MAX_OUTSIDE_STOPS_PER_ATTEMPT bounds it).
 */
export async function gotFurther(t: LocalTask, store: ObjectStore | undefined): Promise<boolean> {
  if (t.stoppedOutsideAt === undefined || (t.completed ?? 0) > t.stoppedOutsideAt) return true;
  if (t.total !== undefined) return false;
  const own = t.checkpoint;
  if (own === undefined || own.atSeconds * 1000 < t.startedAtMs) return false;
  if (t.restoredFrom === undefined || store === undefined) return true;
  const [restored, latest] = await Promise.all([
    manifestSha256(store, t.restoredFrom),
    manifestSha256(store, own.key),
  ]);
  return restored === undefined || latest === undefined || restored !== latest;
}

/** The sha256 of the checkpoint whose manifest is at `key`, or undefined when the store does not give it. */
async function manifestSha256(store: ObjectStore, key: string): Promise<string | undefined> {
  try {
    const parsed = checkpointManifestSchema.safeParse(
      JSON.parse((await store.getBuffer(key)).toString('utf8')),
    );
    return parsed.success ? parsed.data.sha256 : undefined;
  } catch {
    return undefined;
  }
}
