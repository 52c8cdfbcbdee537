import type { Catalog } from '../core/catalog.js';
import type { Admission } from '../queue/admission.js';
import type { JobQueueView } from '../queue/admission-views.js';
import type { PredictionFork } from '../round/round.js';
import type { Clock } from './clock.js';
import { predictEtas, worldFingerprint, type PredictFn } from './eta-world.js';
import { predictionErrorOf, readQueueRecord, writeQueueRecord, type EtaRecord } from './queue-records.js';
import type { SchedulerState } from './scheduler-state.js';
import type { ControllerLogger } from './seams.js';
import { readSnapshotInputs, type SnapshotInputs } from './snapshot.js';
import type { JobSpec } from './job-spec/spec.js';
import { newJobRecord, newTaskRecords } from './state/lifecycle.js';
import type { JobRecord, StateStore } from './state-store.js';

export interface PredictionsDeps {
  readonly store: StateStore;
  readonly clock: Clock;
  readonly log: ControllerLogger;
  /** Undefined: predictions are off. */
  readonly predict: PredictFn | undefined;
  readonly schedulerState: SchedulerState;
  readonly admission: Admission;
  /** The current catalog (a price refresh replaces it). */
  readonly catalog: () => Catalog;
  readonly roundSeconds: number;
}

/**
 * When the controller predicts completion times and where the ETAs go (PCS §4): at submission, and in a round when
 * the cluster changed or strayed from the last prediction; each job's ETAs and, once it ended, the error of its
 * submission prediction are kept in its queue record. eta-world.ts builds and runs the prediction world itself.
 */
export class Predictions {
  /** The world the last prediction ran on (eta-world.ts worldFingerprint) and what it predicted, to skip reruns. */
  private last: { fingerprint: string; etas: ReadonlyMap<string, EtaRecord> } | undefined;

  constructor(private readonly deps: PredictionsDeps) {}

  /**
   * PCS §4: a prediction when a job is submitted, recorded as its submission prediction (the one its error is
   * measured against). It starts from the early round the submission asked for. A failure only costs the ETA.
   */
  atSubmission(job: JobRecord, earliestRoundSeconds: number): void {
    if (this.deps.predict === undefined || this.deps.schedulerState.scheduler.fork === undefined) return;
    try {
      this.deps.schedulerState.load();
      const now = this.deps.clock.nowSeconds();
      const inputs = readSnapshotInputs(this.deps.store, now);
      this.run(
        inputs,
        { scheduler: this.deps.schedulerState.scheduler.fork(), admission: this.deps.admission.fork() },
        Math.max(now, earliestRoundSeconds),
        undefined,
        [job.id],
      );
    } catch (e) {
      this.deps.log.warn(`cannot predict the completion of ${job.id}`, { error: (e as Error).message });
    }
  }

  /**
   * What a job with this spec would get if submitted now (`submit --dry-run`): the same prediction as at submission,
   * on a copy of the world with the job added and nothing stored. Null when predictions are off or fail.
   */
  estimate(spec: JobSpec, earliestRoundSeconds: number): EtaRecord | null {
    if (this.deps.predict === undefined || this.deps.schedulerState.scheduler.fork === undefined) return null;
    try {
      this.deps.schedulerState.load();
      const now = this.deps.clock.nowSeconds();
      const inputs = readSnapshotInputs(this.deps.store, now);
      // An id no stored job can have (stored ids are job-N).
      const job = newJobRecord('dry-run', spec, now);
      const run = predictEtas(this.deps.predict, {
        inputs: {
          ...inputs,
          jobs: [...inputs.jobs, job],
          tasks: [...inputs.tasks, ...newTaskRecords(job, now)],
        },
        views: undefined,
        scheduler: this.deps.schedulerState.scheduler.fork(),
        admission: this.deps.admission.fork(),
        catalog: this.deps.catalog(),
        roundSeconds: this.deps.roundSeconds,
        firstRoundSeconds: Math.max(now, earliestRoundSeconds),
        targets: [job.id],
      });
      return run.etas.get(job.id) ?? null;
    } catch (e) {
      this.deps.log.warn('cannot predict a dry-run submission', { error: (e as Error).message });
      return null;
    }
  }

  /**
   * Whether this round needs a new prediction: the cluster changed (jobs, tasks, placements, instances), or a job
   * that was predicted to start or end by now has not (the world strayed from the prediction).
   */
  due(inputs: SnapshotInputs): boolean {
    if (this.deps.predict === undefined) return false;
    const last = this.last;
    if (last === undefined || last.fingerprint !== worldFingerprint(inputs)) return true;
    const now = inputs.nowSeconds;
    return inputs.jobs.some((j) => {
      const eta = last.etas.get(j.id);
      if (eta === undefined) return true;
      const overdueStart =
        j.startedAtSeconds === undefined && eta.startSeconds !== null && eta.startSeconds < now;
      const overdueEnd = eta.completionSeconds !== null && eta.completionSeconds < now;
      return overdueStart || overdueEnd;
    });
  }

  /** Predict and store every live job's ETA; a job's first prediction is also kept as its submission prediction. */
  run(
    inputs: SnapshotInputs,
    fork: PredictionFork,
    firstRoundSeconds: number,
    views?: ReadonlyMap<string, JobQueueView>,
    targets?: readonly string[],
  ): void {
    if (this.deps.predict === undefined) return;
    let run;
    try {
      run = predictEtas(this.deps.predict, {
        inputs,
        views,
        scheduler: fork.scheduler,
        admission: fork.admission,
        catalog: this.deps.catalog(),
        roundSeconds: this.deps.roundSeconds,
        firstRoundSeconds,
        targets,
      });
    } catch (e) {
      this.deps.log.warn('completion-time prediction failed; ETAs keep their last values', {
        error: (e as Error).message,
      });
      return;
    }
    if (run.complete) this.last = { fingerprint: worldFingerprint(inputs), etas: run.etas };
    this.deps.store.transaction(() => {
      for (const [jobId, eta] of run.etas) {
        const record = readQueueRecord(this.deps.store, jobId) ?? {};
        writeQueueRecord(this.deps.store, jobId, {
          ...record,
          eta,
          submissionEta: record.submissionEta ?? { ...eta, basis: `at submission: ${eta.basis}` },
        });
      }
    });
    this.deps.log.info(`predicted ${run.etas.size} job(s) in ${run.wallMs.toFixed(0)} ms`);
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
      this.deps.store.appendEvent({
        kind: 'job.prediction-error',
        jobId: job.id,
        message: `job ${job.id} ended ${Math.round(predictionError.errorSeconds)} s ${predictionError.errorSeconds >= 0 ? 'after' : 'before'} its submission prediction`,
        data: { ...predictionError },
      });
    } catch (e) {
      this.deps.log.warn(`cannot record the prediction error of ${job.id}`, { error: (e as Error).message });
    }
  }
}
