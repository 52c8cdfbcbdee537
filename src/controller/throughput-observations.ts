import type { ThroughputObservation } from '../scheduler/types.js';
import { PLACED_TASK_STATES } from './state/lifecycle.js';
import type { InstanceRecord, JsonValue, StateStore, TaskRecord } from './state-store.js';

/**
 * Throughput (Eva §4.3, digest "co-location table"): workers report iterations per second; a task's standalone
 * throughput is the best it showed alone on an instance (kept in the store per workload key); observed / standalone
 * is its normalized throughput, and a job's is its slowest task's (Eva §4.4: a gang runs at its slowest member's pace).
 */

export const STANDALONE_THROUGHPUT_KEY = 'worker.standaloneThroughput';

export class ThroughputObservations {
  private readonly observations = new Map<string, number>();

  constructor(private readonly store: StateStore) {}

  /** The throughputs (task → iterations per second) one heartbeat reported of the tasks running on `inst`. */
  observe(inst: InstanceRecord, throughputs: ReadonlyMap<string, number>): void {
    if (throughputs.size === 0) return;
    const placed = this.store
      .listTasks({ instanceId: inst.id })
      .filter((t) => PLACED_TASK_STATES.includes(t.state));
    const standalone = this.standalone();
    let changed = false;
    const normalized = new Map<string, number>();
    for (const [taskId, perSecond] of throughputs) {
      const task = placed.find((t) => t.id === taskId);
      if (task === undefined || perSecond <= 0) continue;
      if (placed.length === 1 && perSecond > (standalone[task.workloadKey] ?? 0)) {
        standalone[task.workloadKey] = perSecond;
        changed = true;
      }
      const base = standalone[task.workloadKey];
      if (base === undefined) continue; // never seen alone: no reference yet
      normalized.set(taskId, Math.min(1, Math.max(0.01, perSecond / base)));
    }
    if (changed) this.store.setValue(STANDALONE_THROUGHPUT_KEY, standalone);
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

  /** Normalized throughputs observed since the last call (one per running task), for Scheduler.observe. */
  take(): ThroughputObservation[] {
    const out = [...this.observations].map(([taskId, normalizedThroughput]) => ({
      taskId,
      normalizedThroughput,
    }));
    this.observations.clear();
    return out;
  }

  private standalone(): Record<string, number> {
    const value = this.store.getValue(STANDALONE_THROUGHPUT_KEY);
    const out: Record<string, number> = {};
    if (typeof value === 'object' && value !== null && !Array.isArray(value))
      for (const [k, v] of Object.entries(value as Record<string, JsonValue>))
        if (typeof v === 'number') out[k] = v;
    return out;
  }
}
