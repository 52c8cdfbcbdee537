import type { ClusterSnapshot, SchedInstance, SchedJob, SchedTask } from '../core/model.js';
import type { ThroughputObservation } from '../scheduler/types.js';
import {
  isActive,
  isReconfigurable,
  remainingIterations,
  successProgress,
  type SimInstance,
  type SimJob,
} from './entities.js';

/**
 * What the scheduler sees each round (the same ClusterSnapshot the controller builds): arrived, unfinished
 * jobs; jobs being launched or moved are pinned (Eva reference `_create_initial_config`); instances that are
 * launching or running and still in the plan, with the tasks committed to them (empty ones too, so a plan can
 * reuse or release them). `liveJobs` must be integrated up to `nowSeconds`.
 */
export function buildSnapshot(
  nowSeconds: number,
  liveJobs: Iterable<SimJob>,
  assignable: Iterable<SimInstance>,
): ClusterSnapshot {
  const jobs: SchedJob[] = [];
  const tasks: SchedTask[] = [];
  for (const job of liveJobs) {
    jobs.push({
      id: job.spec.id,
      taskIds: job.taskIds,
      reconfigurable: isReconfigurable(job),
      arrivalSeconds: job.spec.arrivalSeconds,
      runningSinceSeconds: job.activeSinceSeconds,
      // max over tasks of (fetch + build + upload) + init (digest §2 "Migration cost").
      migrationDelaySeconds: job.migrationDelaySeconds,
      // Tasks checkpoint when killed, so a move loses no work (as in Eva's simulator).
      lastCheckpointSeconds: job.startSeconds === null ? undefined : nowSeconds,
      // A job with a declared success model is known by its distribution, not by its drawn size.
      expectedRemainingSeconds:
        successProgress(job)?.expectedRemainingSeconds ?? remainingIterations(job) / job.spec.fullThroughput,
    });
    for (const task of job.tasks)
      tasks.push({
        id: task.id,
        jobId: job.spec.id,
        key: task.key,
        demand: task.spec.demand,
        instanceId: task.committed?.id,
      });
  }
  const instances: SchedInstance[] = [];
  for (const inst of assignable)
    instances.push({
      id: inst.id,
      typeName: inst.type.name,
      state: inst.lifecycle === 'running' ? 'running' : 'launching',
      taskIds: [...inst.committed].map((t) => t.id),
    });
  return { nowSeconds, jobs, tasks, instances };
}

/**
 * Each running task's normalized throughput, as Eva's simulator reports it: its job's throughput over the full
 * throughput, i.e. the min over the job's running tasks (the scheduler's co-location table attributes it).
 * Tasks still in their job's init delay report the rate they run at, as in the reference.
 */
export function observeThroughputs(liveJobs: Iterable<SimJob>): ThroughputObservation[] {
  const out: ThroughputObservation[] = [];
  for (const job of liveJobs) {
    let rate = Infinity;
    for (const t of job.tasks) if (isActive(t)) rate = Math.min(rate, t.rate);
    if (rate === Infinity) continue;
    for (const t of job.tasks) if (isActive(t)) out.push({ taskId: t.id, normalizedThroughput: rate });
  }
  return out;
}
