import {
  crossZoneCostPerHour,
  crossZoneShare,
  jobPerformance,
  latencyDomain,
} from '../core/latency-model.js';
import { isLatencySensitive } from '../core/latency-curves.js';
import {
  integrateProgress,
  isActive,
  jobRate,
  type SimInstance,
  type SimJob,
  type SimTask,
} from './entities.js';
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
    const network = networkEffect(state, job);
    job.latencyFactor = network.factor;
    job.crossZoneCostPerHour = network.crossZoneCostPerHour;
    // A job runs at its slowest task's co-location rate times its latency factor P_job (digest §10.2).
    const throughput = job.active ? jobRate(job) * job.spec.fullThroughput * job.latencyFactor : 0;
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

/**
 * What the network does to a running job now (the ground truth): its latency factor P_job, its curve at the true
 * round trip its pattern depends on, and the $/hour of its traffic crossing zones. A job not running, of one task, or
 * without a network declaration runs at 1 and sends nothing billed.
 */
export function networkEffect(
  state: WorldState,
  job: SimJob,
): { factor: number; crossZoneCostPerHour: number } {
  const network = state.network;
  const declared = job.spec.network;
  if (network === undefined || declared === undefined || !job.active || job.tasks.length < 2)
    return { factor: 1, crossZoneCostPerHour: 0 };
  const instances = job.tasks.map((t) => t.occupying);
  if (instances.some((i) => i === undefined)) return { factor: 1, crossZoneCostPerHour: 0 };
  const placed = instances as SimInstance[];
  const now = state.now;
  const factor = jobPerformance(declared.sensitivity, declared.pattern, job.rootIndex, placed, (a, b) =>
    network.rtt(a, b, now),
  );
  const cost =
    declared.gibPerHour > 0
      ? crossZoneCostPerHour(
          declared.gibPerHour,
          crossZoneShare(
            declared.pattern,
            job.rootIndex,
            placed,
            (a, b) => latencyDomain(a, b) !== 'cross-zone',
          ),
          network.crossZonePricePerGiB,
        )
      : 0;
  return { factor, crossZoneCostPerHour: cost };
}

/**
 * A network tick (the noise interval): the round trips of latency-sensitive jobs spread over instances may have
 * changed; those whose P_job did are re-integrated and rescheduled.
 */
export function refreshNetwork(state: WorldState): void {
  for (const job of state.liveJobs.values()) {
    const declared = job.spec.network;
    if (!job.active || declared === undefined || !isLatencySensitive(declared.sensitivity)) continue;
    if (networkEffect(state, job).factor !== job.latencyFactor) state.dirtyJobs.add(job);
  }
}
