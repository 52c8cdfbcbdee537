import { successRank, type StageDistribution } from './success.js';

/** Orderings inside a class; selectable per class. */
export type OrderingKind = 'fifo' | 'srpt' | 'success-rank';
export const ORDERING_KINDS: readonly OrderingKind[] = ['fifo', 'srpt', 'success-rank'];

/** What an ordering needs to know about a waiting job. */
export interface OrderableJob {
  readonly id: string;
  readonly arrivalSeconds: number;
  /** When the job (re-)entered the queue (a preempted job re-enters); defaults to its arrival. */
  readonly waitingSinceSeconds?: number | undefined;
  /** Expected remaining work in job-seconds at full throughput (multi-task: summed over tasks, Murmuration SJF). */
  readonly remainingWorkSeconds: number;
  /** Declared success model, if any (success-rank): of one task, so its rank counts every task (`taskCount`). */
  readonly success?: StageDistribution | undefined;
  /** Tasks of the job (default 1): a declared model's rank is per task, the capacity it holds is every task's. */
  readonly taskCount?: number | undefined;
  /** Checkpoints already passed (success-rank re-ranks at every stage). */
  readonly stagesDone?: number | undefined;
}

export interface OrderingOptions {
  /**
   * srpt aging rate λ: key = remaining work − λ·waited (Murmuration digest §7.3, λ default 1.0). With λ > 0 a job
   * that has waited longer than remaining/λ has a negative key and can no longer be overtaken by a newcomer,
   * whose key is ≥ 0: a job's wait behind later arrivals is bounded by remaining/λ (plus the wait for jobs
   * already ahead of it then). λ = 0 is plain SRPT and can starve large jobs.
   */
  readonly srptAgingPerSecond?: number | undefined;
  /**
   * P(success) assumed for jobs that declare nothing under success-rank (digest §9.1: shrink to a global rate;
   * Philly's pass rate was ≈ 0.75). With the same p for everyone, success-rank orders like srpt without aging.
   */
  readonly defaultSuccessProbability?: number | undefined;
}

export const DEFAULT_SRPT_AGING_PER_SECOND = 1.0;
export const DEFAULT_SUCCESS_PROBABILITY = 0.75;

/** The sort key of a job under an ordering (ascending = served first). */
export function orderingKey(
  kind: OrderingKind,
  job: OrderableJob,
  nowSeconds: number,
  options: OrderingOptions = {},
): number {
  switch (kind) {
    case 'fifo':
      return job.arrivalSeconds;
    case 'srpt': {
      const lambda = options.srptAgingPerSecond ?? DEFAULT_SRPT_AGING_PER_SECOND;
      const waited = Math.max(0, nowSeconds - (job.waitingSinceSeconds ?? job.arrivalSeconds));
      return job.remainingWorkSeconds - lambda * waited;
    }
    case 'success-rank':
      // Yao/Paolieri/Golubchik Eq. 23 on the remaining distribution, re-ranked at every stage (digest §4).
      // In task-seconds either way, as `remainingWorkSeconds` is: a job of many tasks holds that many times the room.
      return job.success !== undefined
        ? successRank(job.success, job.stagesDone ?? 0) * (job.taskCount ?? 1)
        : job.remainingWorkSeconds / (options.defaultSuccessProbability ?? DEFAULT_SUCCESS_PROBABILITY);
  }
}

/** Jobs in service order; ties by arrival, then id, so orders are deterministic. */
export function orderQueue<J extends OrderableJob>(
  kind: OrderingKind,
  jobs: readonly J[],
  nowSeconds: number,
  options: OrderingOptions = {},
): J[] {
  const keyed = jobs.map((j) => ({ j, k: orderingKey(kind, j, nowSeconds, options) }));
  keyed.sort(
    (a, b) =>
      a.k - b.k ||
      a.j.arrivalSeconds - b.j.arrivalSeconds ||
      (a.j.id < b.j.id ? -1 : a.j.id > b.j.id ? 1 : 0),
  );
  return keyed.map((e) => e.j);
}
