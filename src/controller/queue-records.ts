import { z } from 'zod';
import type { JobQueueView } from '../queue/admission-views.js';
import type { JsonValue, StateStore } from './state-store.js';

/**
 * What the queue layer keeps per job in the store's key-values (`queue.job.<id>`), so the API (and a restarted
 * controller) can read it: the job's place in the queue, its latest completion-time prediction, the prediction
 * made at submission (never overwritten) and, once the job ended, that prediction's error (PCS §4).
 */

/** How the basis of a job the caps can never admit (or one held for it) begins: clients show such an ETA `never`. */
export const NEVER_UNDER_CAPS_BASIS = 'never under the caps:';

export interface EtaRecord {
  /** Predicted start (epoch seconds); null when the prediction does not reach it. */
  readonly startSeconds: number | null;
  /** Predicted completion (epoch seconds); null when unknown (see basis). */
  readonly completionSeconds: number | null;
  /**
   * When the prediction stopped short of the job's completion (its horizon or its time budget): the job completes
   * after this time, if at all ("beyond N days").
   */
  readonly completesAfterSeconds?: number | undefined;
  readonly computedAtSeconds: number;
  /** How it was obtained, e.g. "simulated 14 rounds ahead with eva; 3 jobs ahead in class small; no future arrivals". */
  readonly basis: string;
}

export interface PredictionError {
  readonly predictedCompletionSeconds: number;
  readonly actualCompletionSeconds: number;
  /** actual − predicted (positive: later than predicted). */
  readonly errorSeconds: number;
  /**
   * PCS §2 (digest shared/research/pcs-wfq-predictions.md §2): 100 · |JCT − predicted JCT| / predicted JCT, JCTs
   * counted from submission. Null when the predicted JCT is 0 (PCS skips those).
   */
  readonly errorPercent: number | null;
}

export interface JobQueueRecord {
  readonly queue?: JobQueueView | undefined;
  readonly eta?: EtaRecord | undefined;
  readonly submissionEta?: EtaRecord | undefined;
  readonly predictionError?: PredictionError | undefined;
}

const etaSchema = z.object({
  startSeconds: z.number().nullable(),
  completionSeconds: z.number().nullable(),
  completesAfterSeconds: z.number().optional(),
  computedAtSeconds: z.number(),
  basis: z.string(),
});

const recordSchema = z.object({
  queue: z
    .object({
      classId: z.string(),
      status: z.enum(['admitted', 'waiting']),
      position: z.number().int().positive().nullable(),
      reason: z.enum(['class-share', 'caps', 'never-fits']).nullable(),
      detail: z.string(),
      sinceSeconds: z.number(),
    })
    .optional(),
  eta: etaSchema.optional(),
  submissionEta: etaSchema.optional(),
  predictionError: z
    .object({
      predictedCompletionSeconds: z.number(),
      actualCompletionSeconds: z.number(),
      errorSeconds: z.number(),
      errorPercent: z.number().nullable(),
    })
    .optional(),
});

export function queueRecordKey(jobId: string): string {
  return `queue.job.${jobId}`;
}

/** The job's queue record; an unreadable one (written by another version) reads as none. */
export function readQueueRecord(store: StateStore, jobId: string): JobQueueRecord | undefined {
  const value = store.getValue(queueRecordKey(jobId));
  if (value === undefined) return undefined;
  const parsed = recordSchema.safeParse(value);
  return parsed.success ? parsed.data : undefined;
}

/** A job's latest predicted completion (epoch seconds); none for one cut at its horizon (no end predicted). */
export function predictedCompletionIn(store: StateStore): (jobId: string) => number | undefined {
  return (jobId) => readQueueRecord(store, jobId)?.eta?.completionSeconds ?? undefined;
}

export function writeQueueRecord(store: StateStore, jobId: string, record: JobQueueRecord): void {
  store.setValue(queueRecordKey(jobId), JSON.parse(JSON.stringify(record)) as JsonValue);
}

/** PCS §2's error of a submission-time prediction, once the job ended at `actualSeconds`. */
export function predictionErrorOf(
  predictedCompletionSeconds: number,
  submittedAtSeconds: number,
  actualSeconds: number,
): PredictionError {
  const predictedJct = predictedCompletionSeconds - submittedAtSeconds;
  const errorSeconds = actualSeconds - predictedCompletionSeconds;
  return {
    predictedCompletionSeconds,
    actualCompletionSeconds: actualSeconds,
    errorSeconds,
    errorPercent: predictedJct > 0 ? (100 * Math.abs(errorSeconds)) / predictedJct : null,
  };
}
