import { integrateProgress, isActive, jobRate, type SimTask } from './entities.js';
import { RANK_COMPLETION, type WorldState } from './world-state.js';

/**
 * Progress between events: the rates of co-located tasks and the throughput of their jobs are piecewise constant,
 * so a job's completion time follows analytically from its rate and is rescheduled whenever the rate changes.
 */

/** Normalized throughput of an active task next to the other active tasks of its instance. */
export type TaskRate = (task: SimTask, others: readonly SimTask[]) => number;

/** Tolerance when rounding an analytic completion time up to whole seconds (floating-point noise). */
const COMPLETION_EPSILON_SECONDS = 1e-6;
/** Remaining iterations below this count as done. */
const ITERATION_EPSILON = 1e-9;

/**
 * Recompute the rates (ground truth, or a prediction's expected rates) on instances whose set of active tasks
 * changed, then the throughput of every affected job, and reschedule its completion.
 */
export function refreshRates(state: WorldState, rateOf: TaskRate): void {
  for (const inst of state.dirtyInstances) {
    const active = [...inst.occupants].filter(isActive);
    for (const task of active) {
      task.rate = rateOf(
        task,
        active.filter((o) => o !== task),
      );
      state.dirtyJobs.add(task.job);
    }
  }
  state.dirtyInstances.clear();
  for (const job of state.dirtyJobs) {
    if (job.status === 'finished') continue;
    integrateProgress(job, state.now);
    const throughput = job.active ? jobRate(job) * job.spec.fullThroughput : 0;
    const remaining = job.spec.totalIterations - job.completedIterations;
    job.throughput = throughput;
    job.version += 1;
    if (remaining <= ITERATION_EPSILON)
      state.at(0, { kind: 'completion', job, token: job.version }, RANK_COMPLETION);
    else if (throughput > 0) {
      const end = Math.ceil(state.now + remaining / throughput - COMPLETION_EPSILON_SECONDS);
      state.queue.push({
        kind: 'completion',
        timeSeconds: Math.max(end, state.now),
        rank: RANK_COMPLETION,
        job,
        token: job.version,
      });
    }
  }
  state.dirtyJobs.clear();
}
