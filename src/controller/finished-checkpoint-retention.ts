import { z } from 'zod';
import { jobCheckpointsPrefix } from '../protocol/object-keys.js';
import type { ObjectStore } from '../storage/object-store.js';
import type { Clock } from './clock.js';
import type { ControllerLogger } from './seams.js';
import type { ControllerSettings } from './settings.js';
import { JOB_STATES, type EventRecord, type StateStore } from './state-store.js';
import { isFinalJobState } from './state/lifecycle.js';

/** Days a finished job's checkpoints are kept when the settings do not say (`finishedCheckpointDays`). */
export const DEFAULT_FINISHED_CHECKPOINT_DAYS = 30;
/** The event that records, once per job, that its checkpoints are gone: a job with one is never listed again. */
export const CHECKPOINTS_DELETED_EVENT = 'job.checkpoints-deleted';
/** The store's key-value holding how far the passes have read the job ends, and the jobs to try again. */
export const FINISHED_CHECKPOINTS_PROGRESS_KEY = 'checkpoints.finishedJobs';

/** Jobs cleared (or tried) in one pass at most: a pass stays short, the next one goes on. */
const JOBS_PER_PASS = 200;
/** `job.state` events read in one pass at most (most are not ends), in pages of this many. */
const EVENTS_PER_PASS = 5_000;
const EVENT_PAGE = 500;
/** Seconds between two passes once one found nothing left over (as history-retention.ts's event pruning). */
const PASS_EVERY_SECONDS = 3600;
/** Deletes of one job's objects in flight together: the store has no bulk delete. */
const DELETES_IN_FLIGHT = 8;
/** Jobs failing one after the other that end a pass: the store itself is likely down, and each call waits its timeouts. */
const FAILURES_THAT_END_A_PASS = 3;

const DAY_SECONDS = 86_400;

const progressSchema = z.object({
  /** The last `job.state` event a pass went past (every job it ended settled, or in `retry`). */
  afterSeq: z.number().int().nonnegative(),
  /** Ended jobs whose checkpoints a pass could not delete (the store failed): tried first by the next one. */
  retry: z.array(z.string()),
});
type Progress = z.infer<typeof progressSchema>;

const endSchema = z.object({ to: z.enum(JOB_STATES) });

/** What one pass did. */
interface FinishedCheckpointPass {
  /** Jobs whose checkpoints were deleted (none left under their prefix), now recorded. */
  readonly jobs: number;
  readonly objects: number;
  /** Jobs the store failed on: left unrecorded, tried again by the next pass. */
  readonly failed: number;
  /** The pass stopped at its bounds with ended jobs still to look at: the next one is due at once. */
  readonly more: boolean;
}

export interface FinishedCheckpointRetentionDeps {
  readonly store: StateStore;
  readonly clock: Clock;
  readonly log: ControllerLogger;
  /** Where workers put checkpoints; without one there is nothing to delete. */
  readonly objectStore: ObjectStore | undefined;
  /** A dry run deletes nothing (it makes no change outside its own state). */
  readonly settings: Pick<ControllerSettings, 'finishedCheckpointDays' | 'dryRun'>;
  /** Jobs per pass (default 200). */
  readonly jobsPerPass?: number | undefined;
}

type Outcome =
  | { readonly kind: 'deleted'; readonly objects: number }
  | { readonly kind: 'failed' }
  /** Recorded by an earlier pass, or not a finished job (any more): nothing to do. */
  | { readonly kind: 'settled' }
  /** Ended too recently: neither it nor any job that ended after it is due yet. */
  | { readonly kind: 'not-due' };

/**
 * A finished job's checkpoints (`checkpoints/<job>/…`) are deleted from the object store `finishedCheckpointDays` after
 * it ended (succeeded, failed, cancelled, unsuccessful): a worker keeps its task's newest three while it runs, and the
 * last ones of a job that ended would otherwise stay for ever, a storage bill growing with the whole history. A
 * retried job is queued again, not finished, and keeps them.
 *
 * Candidates are read from the `job.state` events, which are in the order jobs ended, from where the last pass
 * stopped (the store's key-values keep it), not from every job each pass. A job cleared is recorded with a
 * `job.checkpoints-deleted` event (how many objects went) and never listed again, after a restart too. A pass runs
 * beside the loop, at most hourly and one at a time, after a round; it clears at most 200 jobs (the next starts at
 * the next round while more are due). A job the store fails on is logged, left unrecorded and tried first next pass;
 * three failing in a row end the pass (the store is likely down). A dry run deletes nothing.
 */
export class FinishedCheckpointRetention {
  private nextPassSeconds = Number.NEGATIVE_INFINITY;
  private passing: Promise<void> | undefined;
  private stopping = false;

  constructor(private readonly deps: FinishedCheckpointRetentionDeps) {}

  private get days(): number {
    return this.deps.settings.finishedCheckpointDays ?? DEFAULT_FINISHED_CHECKPOINT_DAYS;
  }

  /** After a round: start a pass when one is due and none is under way. Never waits for it. */
  afterRound(): void {
    const objectStore = this.deps.objectStore;
    const days = this.days;
    if (objectStore === undefined || days <= 0 || this.deps.settings.dryRun) return;
    if (this.stopping || this.passing !== undefined) return;
    const now = this.deps.clock.nowSeconds();
    if (now < this.nextPassSeconds) return;
    const passing = this.pass(objectStore, now, days)
      .then(
        (done) => {
          this.nextPassSeconds = done.more ? this.deps.clock.nowSeconds() : now + PASS_EVERY_SECONDS;
        },
        (e: unknown) => {
          this.nextPassSeconds = now + PASS_EVERY_SECONDS;
          this.deps.log.warn('cannot delete the checkpoints of finished jobs', {
            error: (e as Error).message,
          });
        },
      )
      .finally(() => {
        if (this.passing === passing) this.passing = undefined;
      });
    this.passing = passing;
  }

  /** Resolves once no pass is under way. */
  async settle(): Promise<void> {
    await this.passing;
  }

  /** The pass under way ends after the job it is at, and no other starts (the controller is stopping). */
  async stop(): Promise<void> {
    this.stopping = true;
    await this.passing;
  }

  private async pass(objectStore: ObjectStore, now: number, days: number): Promise<FinishedCheckpointPass> {
    const { store } = this.deps;
    const cutoff = now - days * DAY_SECONDS;
    const budget = this.deps.jobsPerPass ?? JOBS_PER_PASS;
    const progress = this.readProgress();
    let afterSeq = progress.afterSeq;
    const retry: string[] = [];
    let tried = 0;
    let jobs = 0;
    let objects = 0;
    let inARow = 0;
    const clear = async (jobId: string, endedAtSeconds: number): Promise<Outcome> => {
      const outcome = await this.clear(objectStore, jobId, endedAtSeconds, cutoff, days);
      if (outcome.kind === 'deleted' || outcome.kind === 'failed') tried += 1;
      if (outcome.kind === 'deleted') {
        jobs += 1;
        objects += outcome.objects;
      }
      if (outcome.kind === 'failed') retry.push(jobId);
      inARow = outcome.kind === 'failed' ? inARow + 1 : 0;
      return outcome;
    };
    const halted = (): boolean => this.stopping || inARow >= FAILURES_THAT_END_A_PASS;

    // Jobs an earlier pass could not clear come first; those this pass does not reach wait for the next, and so does
    // one no longer due (`finishedCheckpointDays` was raised since): the events read past it are not read again.
    const earlier = [...progress.retry];
    while (earlier.length > 0 && tried < budget && !halted()) {
      const jobId = earlier.shift() as string;
      if ((await clear(jobId, Number.NEGATIVE_INFINITY)).kind === 'not-due') retry.push(jobId);
    }
    retry.push(...earlier);

    let more = false;
    let read = 0;
    scan: while (!halted()) {
      const page = store.listEvents({ kind: 'job.state', afterSeq, limit: EVENT_PAGE });
      if (page.length === 0) break;
      for (const event of page) {
        // Events are in the order jobs changed state: from this one on, every job ended less than `days` ago.
        if (event.atSeconds >= cutoff) break scan;
        if (halted()) break scan;
        if (tried >= budget || read >= EVENTS_PER_PASS) {
          more = true;
          break scan;
        }
        read += 1;
        const jobId = endedJob(event);
        if (jobId !== undefined && (await clear(jobId, event.atSeconds)).kind === 'not-due') break scan;
        afterSeq = event.seq;
      }
    }
    store.setValue(FINISHED_CHECKPOINTS_PROGRESS_KEY, { afterSeq, retry });
    const failed = tried - jobs;
    this.deps.log.info('deleted the checkpoints of finished jobs', {
      jobs,
      objects,
      failed,
      olderThanDays: days,
    });
    return { jobs, objects, failed, more };
  }

  private async clear(
    objectStore: ObjectStore,
    jobId: string,
    endedAtSeconds: number,
    cutoff: number,
    days: number,
  ): Promise<Outcome> {
    const { store } = this.deps;
    const job = store.getJob(jobId);
    if (job === undefined || !isFinalJobState(job.state)) return { kind: 'settled' };
    if ((job.finishedAtSeconds ?? endedAtSeconds) >= cutoff) return { kind: 'not-due' };
    if (store.listEvents({ jobId, kind: CHECKPOINTS_DELETED_EVENT, limit: 1 }).length > 0)
      return { kind: 'settled' };
    let objects: number;
    try {
      objects = await deleteAll(objectStore, jobCheckpointsPrefix(jobId));
    } catch (e) {
      this.deps.log.warn('cannot delete the checkpoints of a finished job; trying again next pass', {
        job: jobId,
        error: (e as Error).message,
      });
      return { kind: 'failed' };
    }
    store.appendEvent({
      kind: CHECKPOINTS_DELETED_EVENT,
      jobId,
      message: `${objects} checkpoint object(s) of ${jobId} deleted, more than ${days} days after it ended`,
      data: { objects },
    });
    return { kind: 'deleted', objects };
  }

  private readProgress(): Progress {
    const parsed = progressSchema.safeParse(this.deps.store.getValue(FINISHED_CHECKPOINTS_PROGRESS_KEY));
    return parsed.success ? parsed.data : { afterSeq: 0, retry: [] };
  }
}

/** The job a `job.state` event says ended, if it says one did. */
function endedJob(event: EventRecord): string | undefined {
  const to = endSchema.safeParse(event.data);
  return event.jobId !== undefined && to.success && isFinalJobState(to.data.to) ? event.jobId : undefined;
}

/** Delete every object under `prefix`; how many there were. Throws the first failure, once no delete is in flight. */
async function deleteAll(objectStore: ObjectStore, prefix: string): Promise<number> {
  const keys: string[] = [];
  for await (const object of objectStore.list(prefix)) keys.push(object.key);
  let next = 0;
  const lane = async (): Promise<void> => {
    for (let key = keys[next++]; key !== undefined; key = keys[next++]) await objectStore.delete(key);
  };
  const lanes = await Promise.allSettled(
    Array.from({ length: Math.min(DELETES_IN_FLIGHT, keys.length) }, lane),
  );
  const failure = lanes.find((l): l is PromiseRejectedResult => l.status === 'rejected');
  if (failure !== undefined) throw failure.reason;
  return keys.length;
}
