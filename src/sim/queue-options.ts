import { singleClassConfig, weightsFromDecay, DEFAULT_SIZE_SPLIT, type WfqConfig } from '../queue/wfq.js';
import type { QueueCaps } from '../queue/caps.js';
import type { AdmitBy } from '../queue/admission.js';
import type { OrderingKind } from '../queue/ordering.js';
import { secondsToHours } from '../core/units.js';
import { percentile } from '../world/metrics.js';
import type { JobOutcome } from '../world/run-result.js';

/**
 * The queue options of a simulation: caps, WFQ config, predictions. The queue layer itself is the round's
 * (src/queue/admission.ts), the same the controller runs.
 */
export interface SimQueueOptions {
  readonly caps: QueueCaps;
  /** WFQ classes and orderings (PCS §3); `singleClassConfig(kind)` for one ordering over every job. */
  readonly config: WfqConfig;
  /**
   * Predict every job's completion when a round first sees it (PCS §4: run the world forward with the same
   * admission and scheduler, learned throughputs, no future arrivals); the runs get predErrAvg/predErrP99.
   */
  readonly predict?: boolean | undefined;
  /** How jobs are sized against a $/hour cap (AdmissionSettings.admitBy; default standalone). */
  readonly admitBy?: AdmitBy | undefined;
  /** The run buys spot (`--spot on`): jobs that may go on spot are sized at spot prices (AdmissionSettings.spot). */
  readonly spot?: boolean | undefined;
}

/** `--queue` choices of `fleetwise simulate`. */
export const QUEUE_KINDS = ['fifo', 'wfq', 'srpt', 'success-rank'] as const;
export type QueueKind = (typeof QUEUE_KINDS)[number];

/**
 * The WFQ config for a `--queue` kind. `wfq`: two size classes split at a percentile of the trace's job sizes in
 * task-seconds (PCS derives thresholds from a sample of the workload, digest §6), weights and fifo inside each
 * class as `DEFAULT_SIZE_SPLIT` (its comment has the sweep behind the choice).
 */
export function queueConfigFor(kind: QueueKind, jobSizesSeconds: readonly number[]): WfqConfig {
  if (kind !== 'wfq') return singleClassConfig(kind satisfies OrderingKind);
  const [small, large] = weightsFromDecay(2, DEFAULT_SIZE_SPLIT.decay) as [number, number];
  const threshold = Math.max(1, percentile(jobSizesSeconds, DEFAULT_SIZE_SPLIT.percentile));
  return {
    ...singleClassConfig('fifo'),
    classes: [
      { id: 'small', weight: small, maxSizeSeconds: threshold, ordering: 'fifo' },
      { id: 'large', weight: large, ordering: 'fifo' },
    ],
  };
}

/** p99 of the finished jobs' JCT in hours (nearest rank, as p95JctHours); null when no job finished. */
export function p99JctHours(jobs: readonly JobOutcome[]): number | null {
  const jcts = jobs.flatMap((j) => (j.jctSeconds === null ? [] : [secondsToHours(j.jctSeconds)]));
  return jcts.length === 0 ? null : percentile(jcts, 99);
}
