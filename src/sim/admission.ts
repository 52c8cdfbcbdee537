import type { Catalog } from '../core/catalog.js';
import { groupBy } from '../core/group.js';
import type { Caps, ClusterSnapshot, SchedJob, SchedTask } from '../core/model.js';
import {
  dominantShare,
  hasAnyCap,
  reservationFootprint,
  type JobFootprint,
  type QueueCaps,
} from '../queue/caps.js';
import type { OrderingKind } from '../queue/ordering.js';
import {
  admit,
  DEFAULT_SIZE_SPLIT,
  singleClassConfig,
  weightsFromDecay,
  type QueuedJob,
  type RunningQueuedJob,
  type WfqConfig,
} from '../queue/wfq.js';
import type { StageDistribution } from '../queue/success.js';
import { PriceBook } from '../scheduler/reservation-price.js';
import { secondsToHours } from '../core/units.js';
import { percentile } from './metrics.js';
import type { JobOutcome } from './types.js';

/**
 * The queue layer in the simulator (issue 6): each round, before the scheduler plans, `admit` (src/queue/wfq.ts)
 * decides which waiting jobs enter the snapshot under the caps; the others are left out of it and wait. Jobs
 * already holding capacity (placed, being launched, moved or checkpointed) always stay in the snapshot.
 * Preemption proposals are not acted on yet (the engine has no "stop this job" hook).
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

/** The plan-level caps Eva enforces on its own plans (EvaOptions.caps): $/hour and instance count. */
export function schedulerCaps(caps: QueueCaps): Caps {
  return {
    ...(caps.maxCostPerHour !== undefined ? { maxCostPerHour: caps.maxCostPerHour } : {}),
    ...(caps.maxInstances !== undefined ? { maxInstances: caps.maxInstances } : {}),
  };
}

interface JobRecord {
  readonly sizeSeconds: number;
  readonly footprint: JobFootprint;
  admittedSeconds: number | undefined;
  /** Σ live-job counts over the rounds the job saw, and their number (PCS N̄_j, for unfairness). */
  liveSum: number;
  rounds: number;
}

/** What the engine tells admission about a job beyond the snapshot: its team and declared success model. */
export interface AdmissionJobInfo {
  readonly team?: string | undefined;
  readonly success?: { readonly distribution: StageDistribution; readonly stagesDone: number } | undefined;
}

export class SimAdmission {
  private readonly prices: PriceBook;
  private records = new Map<string, JobRecord>();
  private shortRounds: ReadonlyMap<string, number> | undefined;
  /**
   * Running jobs the last `filter` chose to stop so a class reclaims its guaranteed share (PCS §3; hysteresis in
   * `admit`). Only jobs at a checkpointable point (executing): the engine checkpoints them back to the queue.
   */
  preempted: readonly string[] = [];

  constructor(
    private readonly catalog: Catalog,
    readonly options: SimQueueOptions,
    private readonly jobInfo: (jobId: string) => AdmissionJobInfo = () => ({}),
  ) {
    this.prices = new PriceBook(catalog);
  }

  /** An independent copy of the queue state, for a prediction run (which does not predict in turn). */
  fork(jobInfo: (jobId: string) => AdmissionJobInfo): SimAdmission {
    const copy = new SimAdmission(this.catalog, { ...this.options, predict: false }, jobInfo);
    copy.records = new Map([...this.records].map(([id, r]) => [id, { ...r }]));
    copy.shortRounds = this.shortRounds;
    return copy;
  }

  /** The snapshot restricted to jobs holding capacity plus the waiting jobs admitted this round. */
  readonly filter = (snapshot: ClusterSnapshot): ClusterSnapshot => {
    const tasksByJob = groupBy(snapshot.tasks, (t) => t.jobId);
    const running: RunningQueuedJob[] = [];
    const executing = new Set<string>();
    const waiting: QueuedJob[] = [];
    for (const job of snapshot.jobs) {
      const tasks = tasksByJob.get(job.id) ?? [];
      const record = this.recordOf(job, tasks);
      record.liveSum += snapshot.jobs.length;
      record.rounds += 1;
      const info = this.jobInfo(job.id);
      // Multi-task jobs are admitted whole (gang); remaining work is summed over tasks (Murmuration SJF).
      const queued: QueuedJob = {
        id: job.id,
        arrivalSeconds: job.arrivalSeconds,
        remainingWorkSeconds: (job.expectedRemainingSeconds ?? 0) * tasks.length,
        sizeSeconds: record.sizeSeconds,
        footprint: record.footprint,
        team: info.team,
        success: info.success?.distribution,
        stagesDone: info.success?.stagesDone,
      };
      const holdsCapacity = !job.reconfigurable || tasks.some((t) => t.instanceId !== undefined);
      if (holdsCapacity) {
        if (job.reconfigurable) executing.add(job.id);
        record.admittedSeconds ??= snapshot.nowSeconds;
        running.push({ ...queued, admittedSeconds: record.admittedSeconds });
      } else {
        // A job the plan sent back to the queue competes again from scratch.
        record.admittedSeconds = undefined;
        waiting.push(queued);
      }
    }
    const result = admit({
      nowSeconds: snapshot.nowSeconds,
      caps: this.options.caps,
      config: this.options.config,
      running,
      waiting,
      shortRounds: this.shortRounds,
    });
    this.shortRounds = result.shortRounds;
    this.preempted = result.preemptions.map((p) => p.jobId).filter((id) => executing.has(id));
    const keep = new Set<string>([...running.map((j) => j.id), ...result.admitted]);
    for (const id of result.admitted)
      (this.records.get(id) as JobRecord).admittedSeconds = snapshot.nowSeconds;
    if (keep.size === snapshot.jobs.length) return snapshot;
    return {
      ...snapshot,
      jobs: snapshot.jobs.filter((j) => keep.has(j.id)),
      tasks: snapshot.tasks.filter((t) => keep.has(t.jobId)),
    };
  };

  private recordOf(job: SchedJob, tasks: readonly SchedTask[]): JobRecord {
    let r = this.records.get(job.id);
    if (r === undefined) {
      // Class by size at first sight = arrival (PCS §3: fixed, not recomputed from the remaining size).
      r = {
        sizeSeconds: (job.expectedRemainingSeconds ?? 0) * tasks.length,
        footprint: reservationFootprint(
          job.id,
          tasks.map((t) => t.demand),
          this.prices,
        ),
        admittedSeconds: undefined,
        liveSum: 0,
        rounds: 0,
      };
      this.records.set(job.id, r);
    }
    return r;
  }

  /**
   * Mean PCS unfairness in percent (digest §2): unfair_j = 100 · max(0, JCT_j / FFT_j − 1) with
   * FFT_j = service_j / min(C / N̄_j, demand_j). Here the capacity C is the capped capacity (= 1 in dominant-share
   * units, `dominantShare`), demand_j the job's dominant share and N̄_j the mean number of live jobs over the rounds
   * the job saw, itself included. Null without any cap (nobody queues, a fair share is undefined) or finished job.
   */
  unfairnessPercent(jobs: readonly JobOutcome[], serviceSeconds: ReadonlyMap<string, number>): number | null {
    if (!hasAnyCap(this.options.caps)) return null;
    const values: number[] = [];
    for (const j of jobs) {
      const r = this.records.get(j.id);
      const service = serviceSeconds.get(j.id);
      if (r === undefined || service === undefined || j.jctSeconds === null || r.rounds === 0) continue;
      const demand = dominantShare(r.footprint, this.options.caps);
      const nBar = r.liveSum / r.rounds;
      const rate = Math.min(1 / nBar, demand) / demand; // fraction of full speed the fair share allows
      if (!(rate > 0) || !Number.isFinite(rate)) continue;
      values.push(100 * Math.max(0, j.jctSeconds / (service / rate) - 1));
    }
    return values.length === 0 ? null : values.reduce((a, b) => a + b, 0) / values.length;
  }
}

/** p99 of the finished jobs' JCT in hours (nearest rank, as p95JctHours); null when no job finished. */
export function p99JctHours(jobs: readonly JobOutcome[]): number | null {
  const jcts = jobs.flatMap((j) => (j.jctSeconds === null ? [] : [secondsToHours(j.jctSeconds)]));
  return jcts.length === 0 ? null : percentile(jcts, 99);
}
