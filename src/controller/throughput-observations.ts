import type { ThroughputObservation } from '../scheduler/types.js';
import { PLACED_TASK_STATES } from './state/lifecycle.js';
import type { InstanceRecord, JsonValue, StateStore, TaskRecord } from './state-store.js';

/**
 * Throughput (Eva §4.3, digest "co-location table"): workers report iterations per second; a task's standalone
 * throughput is what its workload shows alone on an instance (a running estimate, kept in the store per workload key);
 * observed / standalone is its normalized throughput, and a job's is its slowest task's (Eva §4.4: a gang runs at its
 * slowest member's pace).
 */

/** Workload key → estimated iterations per second alone. */
export const STANDALONE_THROUGHPUT_KEY = 'worker.standaloneThroughput';
/** Workload key → how many alone-observations that estimate rests on (at most STANDALONE_OBSERVATIONS). */
export const STANDALONE_OBSERVATIONS_KEY = 'worker.standaloneThroughputObservations';

/**
 * The standalone estimate is the mean of a workload's first STANDALONE_OBSERVATIONS alone-observations (one a
 * heartbeat), then an exponentially weighted mean giving each new one 1/STANDALONE_OBSERVATIONS of the weight. Why not
 * the best rate ever shown alone: one high window (a noisy phase, a short span of coarse stamps) would stand as the
 * reference for good, and every later co-located observation of the workload would read as interference. One outlier
 * moves this mean by 1/n of its excess (n observations so far, at most STANDALONE_OBSERVATIONS), and newer
 * observations wear it off. 20 heartbeats (5 s apart by default) span about two of the workers' 60 s throughput
 * windows: observations within one window overlap, so fewer would follow one window's noise, and many more would be
 * slow to follow a workload whose pace alone has changed.
 */
export const STANDALONE_OBSERVATIONS = 20;

interface StandaloneEstimates {
  readonly rates: Record<string, number>;
  readonly counts: Record<string, number>;
}

export class ThroughputObservations {
  private readonly observations = new Map<string, number>();
  /**
   * The estimates as heartbeats update them, saved once a round (`take`): a store write per heartbeat would be the
   * controller's busiest. Read again from the store after each save, so a controller that has just taken over from
   * another starts from the estimates that one saved.
   */
  private estimates: StandaloneEstimates | undefined;
  private unsaved = false;

  constructor(private readonly store: StateStore) {}

  /** The throughputs (task → iterations per second) one heartbeat reported of the tasks running on `inst`. */
  observe(inst: InstanceRecord, throughputs: ReadonlyMap<string, number>): void {
    if (throughputs.size === 0) return;
    const placed = this.store
      .listTasks({ instanceId: inst.id })
      .filter((t) => PLACED_TASK_STATES.includes(t.state));
    const standalone = this.standalone();
    const normalized = new Map<string, number>();
    for (const [taskId, perSecond] of throughputs) {
      const task = placed.find((t) => t.id === taskId);
      if (task === undefined || !(perSecond > 0) || !Number.isFinite(perSecond)) continue;
      if (placed.length === 1) this.observeAlone(standalone, task.workloadKey, perSecond);
      const base = standalone.rates[task.workloadKey];
      if (base === undefined) continue; // never seen alone: no reference yet
      normalized.set(taskId, Math.min(1, Math.max(0.01, perSecond / base)));
    }
    // A job runs at its slowest task's pace; every one of its tasks is observed at that pace.
    const byJob = new Map<string, number>();
    for (const [taskId, value] of normalized) {
      const jobId = (this.store.getTask(taskId) as TaskRecord).jobId;
      byJob.set(jobId, Math.min(byJob.get(jobId) ?? 1, value));
    }
    for (const [taskId] of normalized) {
      const jobId = (this.store.getTask(taskId) as TaskRecord).jobId;
      this.observations.set(taskId, byJob.get(jobId) as number);
    }
  }

  /**
   * Normalized throughputs observed since the last call (one per running task), for Scheduler.observe; called once a
   * round, it saves the standalone estimates the heartbeats since the last call moved.
   */
  take(): ThroughputObservation[] {
    const out = [...this.observations].map(([taskId, normalizedThroughput]) => ({
      taskId,
      normalizedThroughput,
    }));
    this.observations.clear();
    if (this.unsaved && this.estimates !== undefined) {
      this.store.setValue(STANDALONE_THROUGHPUT_KEY, this.estimates.rates);
      this.store.setValue(STANDALONE_OBSERVATIONS_KEY, this.estimates.counts);
    }
    this.unsaved = false;
    this.estimates = undefined;
    return out;
  }

  /** Fold one alone-observation into the workload's estimate (see STANDALONE_OBSERVATIONS). */
  private observeAlone(standalone: StandaloneEstimates, key: string, perSecond: number): void {
    const before = standalone.rates[key];
    // An estimate saved without its count (a controller that kept the best rate alone) counts as one observation.
    const count = standalone.counts[key] ?? (before === undefined ? 0 : 1);
    const n = Math.min(count + 1, STANDALONE_OBSERVATIONS);
    standalone.rates[key] = before === undefined ? perSecond : before + (perSecond - before) / n;
    standalone.counts[key] = n;
    this.unsaved = true;
  }

  private standalone(): StandaloneEstimates {
    if (this.estimates !== undefined) return this.estimates;
    const rates = numbersByKey(this.store.getValue(STANDALONE_THROUGHPUT_KEY), (v) => v > 0);
    const counts = numbersByKey(
      this.store.getValue(STANDALONE_OBSERVATIONS_KEY),
      (v) => Number.isInteger(v) && v >= 1,
    );
    for (const key of Object.keys(counts)) if (rates[key] === undefined) delete counts[key];
    this.estimates = { rates, counts };
    return this.estimates;
  }
}

/** The entries of a stored `{ key: number }` object that pass `valid` (anything else in it is skipped). */
function numbersByKey(value: JsonValue | undefined, valid: (v: number) => boolean): Record<string, number> {
  const out: Record<string, number> = {};
  if (typeof value === 'object' && value !== null && !Array.isArray(value))
    for (const [k, v] of Object.entries(value as Record<string, JsonValue>))
      if (typeof v === 'number' && Number.isFinite(v) && valid(v)) out[k] = v;
  return out;
}
