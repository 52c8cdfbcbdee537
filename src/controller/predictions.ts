import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import type { Catalog } from '../core/catalog.js';
import type { Admission } from '../queue/admission.js';
import type { JobQueueView } from '../queue/admission-views.js';
import type { Clock } from './clock.js';
import type { PredictionRun } from './eta-predictions.js';
import { worldFingerprint } from './eta-world.js';
import type { PredictionEngine } from './prediction-engine.js';
import { predictionInputs, type PortableFork, type PredictionJob } from './prediction-job.js';
import { predictionErrorOf, readQueueRecord, writeQueueRecord, type EtaRecord } from './queue-records.js';
import type { SchedulerRecipe } from './scheduler-recipe.js';
import type { SchedulerState } from './scheduler-state.js';
import type { ControllerLogger } from './seams.js';
import { readSnapshotInputs, type SnapshotInputs } from './snapshot.js';
import type { JobSpec } from './job-spec/spec.js';
import { isFinalJobState, newJobRecord, newTaskRecords } from './state/lifecycle.js';
import { unmetOf } from './job-dependencies.js';
import type { JobRecord, StateStore } from './state-store.js';

export interface PredictionsDeps {
  readonly store: StateStore;
  readonly clock: Clock;
  readonly log: ControllerLogger;
  /** Where ETAs are predicted (a worker thread in production); undefined: predictions are off. */
  readonly engine: PredictionEngine | undefined;
  /** Where `submit --dry-run` estimates are predicted (its own lane, so they never wait behind the ETAs). */
  readonly estimator: PredictionEngine | undefined;
  /** How to rebuild the scheduler where the prediction runs. */
  readonly recipe: SchedulerRecipe;
  readonly schedulerState: SchedulerState;
  readonly admission: Admission;
  /** The current catalog (a price refresh replaces it). */
  readonly catalog: () => Catalog;
  readonly roundSeconds: number;
  /** When the next round may happen: a prediction outside a round starts from it. */
  readonly nextRoundSeconds: () => number;
  readonly horizonSeconds: number;
  readonly budgetSeconds: number;
}

/** A prediction asked for and not started yet: the newest replaces it. */
type Wanted =
  /** Built by a round from its own snapshot and fork (it replays that round). */
  | { readonly kind: 'round'; readonly job: PredictionJob; readonly fingerprint: string }
  /** After a submission: the snapshot is read when the prediction starts, so a burst costs one. */
  | { readonly kind: 'fresh' };

/** After each prediction the engine rests this many times as long as it ran. */
const REST_FACTOR = 2;

/**
 * Submissions closer together than this make a burst; a prediction waits until the burst has been quiet this long.
 * A prediction reads the whole queue, and one made in the middle of a burst is stale by its end: the burst's
 * submissions share the one made after it (and the API keeps the cores meanwhile).
 */
export const BURST_QUIET_MS = 1000;

/** A prediction waits at most this long behind a burst that does not stop (a steady stream still gets ETAs). */
export const BURST_MAX_WAIT_MS = 30_000;

/** How long after a burst looked quiet it is looked at again before the prediction starts. */
const QUIET_CONFIRM_MS = 100;

/** ETAs written per transaction. */
const STORE_SLICE = 200;

/** At most this many dry-run estimates wait for the estimator; more are answered without an ETA. */
const MAX_WAITING_ESTIMATES = 4;

/**
 * When the controller predicts completion times and where the ETAs go (PCS §4): after submissions, and in a round
 * when the cluster changed or strayed from the last prediction; each job's ETAs and, once it ended, the error of its
 * submission prediction are kept in its queue record. eta-world.ts builds and runs the prediction world itself.
 *
 * Nothing here runs a prediction on the caller's turn. A submission only marks a prediction as wanted (O(1), whatever
 * the number of jobs) and returns; a round hands over the snapshot it already read. One prediction runs at a time on
 * the engine (a worker thread in production), from a snapshot of the whole queue; what is asked meanwhile is
 * coalesced, the newest request replacing older ones, since its snapshot includes theirs. Between two runs the engine
 * rests twice as long as the last run took, so predictions take at most about a third of a core under a stream of
 * changes (on a small controller host the API and the loop need the rest; an ETA is hours ahead, seconds late), and
 * none starts while a burst of submissions goes on (BURST_QUIET_MS, at most BURST_MAX_WAIT_MS): the burst shares the
 * prediction made after it, instead of one that runs on the cores the burst needs and is stale by its end. A
 * job's first ETA is also kept as its submission prediction, which its error is measured against; until it has one,
 * its view says the ETA is pending.
 */
export class Predictions {
  /** The last completed prediction of every live job: what it predicted, for the overdue check. */
  private last: ReadonlyMap<string, EtaRecord> | undefined;
  /** The world of the latest prediction asked for (eta-world.ts worldFingerprint), so it is not asked twice. */
  private requestedFingerprint: string | undefined;
  private wanted: Wanted | undefined;
  private running = false;
  private resting: NodeJS.Timeout | undefined;
  /** No prediction starts before this (performance.now() milliseconds): the rest after the last one. */
  private restUntilMs = Number.NEGATIVE_INFINITY;
  /** When the latest submission came (performance.now() milliseconds), and when the burst it is part of began. */
  private lastSubmissionMs = Number.NEGATIVE_INFINITY;
  private burstSinceMs: number | undefined;
  /** When the burst looked quiet (and is looked at once more, QUIET_CONFIRM_MS later). */
  private quietSeenAtMs: number | undefined;
  private closed = false;
  private idleWaiters: (() => void)[] = [];
  private waitingEstimates = 0;

  constructor(private readonly deps: PredictionsDeps) {}

  /**
   * Whether predictions are on (and so whether a job without an ETA yet is waiting for one). Any scheduler: the
   * prediction rebuilds it from its recipe, with the state it exports (none for the baselines, which keep none).
   */
  get enabled(): boolean {
    return this.deps.engine !== undefined;
  }

  /** PCS §4: a job was submitted; its first ETA, from the next prediction, is its submission prediction. O(1). */
  afterSubmission(): void {
    if (!this.enabled || this.closed) return;
    const now = performance.now();
    if (now - this.lastSubmissionMs < BURST_QUIET_MS) this.burstSinceMs ??= this.lastSubmissionMs;
    else this.burstSinceMs = undefined; // a lone submission is predicted at once
    this.lastSubmissionMs = now;
    this.quietSeenAtMs = undefined;
    this.wanted = { kind: 'fresh' };
    this.startNext();
  }

  /**
   * Whether this round needs a new prediction: the cluster changed (jobs, tasks, placements, instances) since the
   * latest one asked for, or a job that was predicted to start or end by now has not (the world strayed).
   */
  due(inputs: SnapshotInputs): boolean {
    if (!this.enabled) return false;
    if (worldFingerprint(inputs) !== this.requestedFingerprint) return true;
    // The prediction of this very world is on its way.
    if (this.running || this.wanted !== undefined) return false;
    const last = this.last;
    if (last === undefined) return true;
    const now = inputs.nowSeconds;
    return inputs.jobs.some((j) => {
      const eta = last.get(j.id);
      if (eta === undefined) return true;
      // A job back in the queue is to start again: its first start, on its record, is not the one predicted.
      const overdueStart =
        (j.startedAtSeconds === undefined || j.state === 'queued') &&
        eta.startSeconds !== null &&
        eta.startSeconds < now;
      const overdueEnd = eta.completionSeconds !== null && eta.completionSeconds < now;
      return overdueStart || overdueEnd;
    });
  }

  /**
   * The admission and the scheduler as they are now, as data: a round takes it before it plans, so the prediction
   * replays that round (round/round.ts forkForPrediction, in portable form).
   */
  captureFork(): PortableFork {
    const scheduler = this.deps.schedulerState.scheduler;
    const admission = this.deps.admission;
    return {
      scheduler: { recipe: this.deps.recipe, state: scheduler.exportState?.() },
      admission: {
        // All of them: a prediction that sized jobs otherwise than the rounds (`admitBy`) would admit others.
        settings: admission.settings,
        state: admission.exportState(),
      },
    };
  }

  /** Ask for a prediction of every live job from a round's snapshot and fork (taken before it planned). */
  afterRound(
    inputs: SnapshotInputs,
    fork: PortableFork,
    firstRoundSeconds: number,
    views: ReadonlyMap<string, JobQueueView>,
  ): void {
    if (!this.enabled || this.closed) return;
    const fingerprint = worldFingerprint(inputs);
    this.requestedFingerprint = fingerprint;
    this.wanted = { kind: 'round', fingerprint, job: this.job(inputs, fork, firstRoundSeconds, views) };
    this.startNext();
  }

  /** Resolves once no prediction is running or wanted (tests, and a controller stopping). */
  settled(): Promise<void> {
    if (this.isIdle()) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** Stop: nothing more is predicted, and a prediction running is abandoned (the engines terminate their threads). */
  async close(): Promise<void> {
    this.closed = true;
    this.wanted = undefined;
    if (this.resting !== undefined) clearTimeout(this.resting);
    this.resting = undefined;
    await Promise.all([this.deps.engine?.close(), this.deps.estimator?.close()]);
    this.notifyIdle();
  }

  /**
   * What a job with this spec would get if submitted now (`submit --dry-run`): the same prediction as for a
   * submission, on a copy of the world with the job added and nothing stored. Null when predictions are off (or the
   * controller stops); when the estimator is busy with other dry runs or the prediction fails, an ETA without a
   * completion whose basis says why, as a stored job's is after a failed prediction.
   */
  async estimate(spec: JobSpec): Promise<EtaRecord | null> {
    const estimator = this.deps.estimator;
    if (estimator === undefined || !this.enabled || this.closed) return null;
    const now = this.deps.clock.nowSeconds();
    if (this.waitingEstimates >= MAX_WAITING_ESTIMATES)
      return noEta(now, "the controller is busy with other dry runs' estimates; ask again");
    this.waitingEstimates += 1;
    try {
      this.deps.schedulerState.load();
      const inputs = readSnapshotInputs(this.deps.store, now);
      // An id no stored job can have (stored ids are job-N).
      const job = newJobRecord('dry-run', spec, now);
      const tasks = newTaskRecords(job, now);
      // Held, as the submission would be, while a dependency has not succeeded.
      const unmet = unmetOf(spec.dependsOn, this.deps.store);
      const withJob: SnapshotInputs =
        unmet.length > 0
          ? {
              ...inputs,
              heldJobs: [...(inputs.heldJobs ?? []), job],
              heldTasks: [...(inputs.heldTasks ?? []), ...tasks],
              heldFor: new Map([...(inputs.heldFor ?? []), [job.id, unmet]]),
            }
          : { ...inputs, jobs: [...inputs.jobs, job], tasks: [...inputs.tasks, ...tasks] };
      const request: PredictionJob = {
        ...this.job(withJob, this.captureFork(), this.firstRoundSeconds(now), undefined),
        targets: [job.id],
      };
      const run = await estimator.run(request);
      return run.etas.get(job.id) ?? noEta(now, 'the prediction did not reach this job');
    } catch (e) {
      if (this.closed) return null;
      const message = (e as Error).message;
      this.deps.log.warn('cannot predict a dry-run submission', { error: message });
      return noEta(now, `the prediction failed (${message.slice(0, 300)})`);
    } finally {
      this.waitingEstimates -= 1;
    }
  }

  /** PCS §2: how far the submission prediction was off, for a job that completed (its error is measured). */
  recordError(job: JobRecord): void {
    try {
      const record = readQueueRecord(this.deps.store, job.id);
      const predicted = record?.submissionEta?.completionSeconds;
      if (record === undefined || job.state !== 'succeeded' || job.finishedAtSeconds === undefined) return;
      if (predicted === undefined || predicted === null) return;
      const predictionError = predictionErrorOf(predicted, job.submittedAtSeconds, job.finishedAtSeconds);
      writeQueueRecord(this.deps.store, job.id, { ...record, predictionError });
      // The magnitude, in whole seconds; the words say which way (the signed figure is in the event's data).
      const off = Math.round(Math.abs(predictionError.errorSeconds));
      const when =
        off === 0
          ? 'as predicted at submission'
          : `${off} s ${predictionError.errorSeconds > 0 ? 'after' : 'before'} its submission prediction`;
      this.deps.store.appendEvent({
        kind: 'job.prediction-error',
        jobId: job.id,
        message: `job ${job.id} ended ${when}`,
        data: { ...predictionError },
      });
    } catch (e) {
      this.deps.log.warn(`cannot record the prediction error of ${job.id}`, { error: (e as Error).message });
    }
  }

  // -------------------------------------------------------------------------------------------------------------

  private job(
    inputs: SnapshotInputs,
    fork: PortableFork,
    firstRoundSeconds: number,
    views: ReadonlyMap<string, JobQueueView> | undefined,
  ): PredictionJob {
    return {
      // Only what a prediction reads of each spec: the job crosses to the prediction thread as a copy.
      inputs: predictionInputs(inputs),
      views,
      fork,
      catalog: this.deps.catalog(),
      roundSeconds: this.deps.roundSeconds,
      firstRoundSeconds,
      targets: undefined,
      horizonSeconds: this.deps.horizonSeconds,
      budgetMs: this.deps.budgetSeconds * 1000,
    };
  }

  private firstRoundSeconds(now: number): number {
    return Math.max(now, this.deps.nextRoundSeconds());
  }

  private isIdle(): boolean {
    return !this.running && this.resting === undefined && (this.wanted === undefined || this.closed);
  }

  private notifyIdle(): void {
    if (!this.isIdle()) return;
    for (const resolve of this.idleWaiters.splice(0)) resolve();
  }

  private startNext(): void {
    if (this.running || this.resting !== undefined || this.closed) return;
    const wanted = this.wanted;
    if (wanted === undefined) return this.notifyIdle();
    const now = performance.now();
    let startAtMs = this.restUntilMs;
    if (this.burstSinceMs !== undefined) {
      const limitMs = this.burstSinceMs + BURST_MAX_WAIT_MS;
      const quietAtMs = this.lastSubmissionMs + BURST_QUIET_MS;
      if (now < Math.min(quietAtMs, limitMs)) startAtMs = Math.max(startAtMs, Math.min(quietAtMs, limitMs));
      else if (now < limitMs && this.quietSeenAtMs === undefined) {
        // Quiet as far as this turn knows; but a turn that ran late (the loop was busy) comes before the requests
        // that queued up meanwhile. Look once more after the loop has read them.
        this.quietSeenAtMs = now;
        startAtMs = Math.max(startAtMs, now + QUIET_CONFIRM_MS);
      }
    }
    const restMs = startAtMs - now;
    if (restMs > 0) {
      this.resting = setTimeout(() => {
        this.resting = undefined;
        this.startNext();
      }, restMs);
      this.resting.unref();
      return;
    }
    this.wanted = undefined;
    this.burstSinceMs = undefined; // submissions from now on wait for the next prediction, at most as long again
    this.quietSeenAtMs = undefined;
    this.running = true;
    const startedMs = performance.now();
    void this.execute(wanted)
      .catch((e: unknown) =>
        this.deps.log.warn('completion-time prediction failed', { error: (e as Error).message }),
      )
      .finally(() => {
        this.running = false;
        // Rest twice as long as the run took (at most twice its budget): a third of a core at most, whatever is asked.
        const tookMs = performance.now() - startedMs;
        this.restUntilMs = performance.now() + REST_FACTOR * Math.min(tookMs, this.deps.budgetSeconds * 1000);
        this.startNext();
      });
  }

  private async execute(wanted: Wanted): Promise<void> {
    const engine = this.deps.engine;
    if (engine === undefined) return;
    let job: PredictionJob;
    try {
      // Never on the asker's turn: a submission returns first, and a burst of them shares one snapshot.
      await yieldToEventLoop();
      if (this.closed) return;
      // A round that ran meanwhile read a newer snapshot than the one asked for, with its queue views: run it instead.
      const newer = this.wanted;
      if (newer?.kind === 'round') this.wanted = undefined;
      const chosen = newer?.kind === 'round' ? newer : wanted;
      job = chosen.kind === 'round' ? chosen.job : this.freshJob();
    } catch (e) {
      this.deps.log.warn('cannot read the state for a completion-time prediction', {
        error: (e as Error).message,
      });
      return;
    }
    let run: PredictionRun;
    try {
      run = await engine.run(job);
    } catch (e) {
      if (this.closed) return;
      this.deps.log.warn('completion-time prediction failed; ETAs keep their last values', {
        error: (e as Error).message,
      });
      this.recordFailure(job, (e as Error).message);
      return;
    }
    if (this.closed) return;
    if (run.complete) this.last = run.etas;
    try {
      await this.store(run);
    } catch (e) {
      this.deps.log.warn('cannot store the predicted ETAs', { error: (e as Error).message });
      return;
    }
    this.deps.log.info(`predicted ${run.etas.size} job(s) in ${run.wallMs.toFixed(0)} ms`);
  }

  /** A prediction of every live job from the state as it is now (after submissions). */
  private freshJob(): PredictionJob {
    this.deps.schedulerState.load();
    const now = this.deps.clock.nowSeconds();
    const inputs = readSnapshotInputs(this.deps.store, now);
    // Whatever was asked until now is in this snapshot: the newest wins.
    this.wanted = undefined;
    this.requestedFingerprint = worldFingerprint(inputs);
    return this.job(inputs, this.captureFork(), this.firstRoundSeconds(now), undefined);
  }

  /**
   * Each predicted job's ETA; its first one is also its submission prediction. Jobs that ended meanwhile keep theirs.
   * Written in slices, each its own transaction, yielding in between: the API and the loop never wait for more than
   * a slice.
   */
  private async store(run: PredictionRun): Promise<void> {
    const entries = [...run.etas];
    for (let i = 0; i < entries.length && !this.closed; i += STORE_SLICE) {
      if (i > 0) await yieldToEventLoop();
      this.deps.store.transaction(() => {
        for (const [jobId, eta] of entries.slice(i, i + STORE_SLICE)) {
          const job = this.deps.store.getJob(jobId);
          if (job === undefined || isFinalJobState(job.state)) continue;
          const record = readQueueRecord(this.deps.store, jobId) ?? {};
          writeQueueRecord(this.deps.store, jobId, {
            ...record,
            eta,
            submissionEta: record.submissionEta ?? { ...eta, basis: `at submission: ${eta.basis}` },
          });
        }
      });
    }
  }

  /** A failed prediction: jobs still waiting for their first ETA are told why they get none (not left pending). */
  private recordFailure(job: PredictionJob, message: string): void {
    try {
      this.deps.store.transaction(() => {
        for (const { id } of [...job.inputs.jobs, ...(job.inputs.heldJobs ?? [])]) {
          const current = this.deps.store.getJob(id);
          if (current === undefined || isFinalJobState(current.state)) continue;
          const record = readQueueRecord(this.deps.store, id) ?? {};
          if (record.eta !== undefined) continue;
          writeQueueRecord(this.deps.store, id, {
            ...record,
            eta: noEta(job.inputs.nowSeconds, `the prediction failed (${message.slice(0, 300)})`),
          });
        }
      });
    } catch (e) {
      this.deps.log.warn('cannot record a failed prediction', { error: (e as Error).message });
    }
  }
}

/** An ETA that predicts nothing, its basis saying why (`fleetwise job` and `submit --dry-run` print it). */
function noEta(computedAtSeconds: number, why: string): EtaRecord {
  return { startSeconds: null, completionSeconds: null, computedAtSeconds, basis: `no ETA: ${why}` };
}
