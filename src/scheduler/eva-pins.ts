import type { InstanceType } from '../core/catalog.js';
import type { ClusterSnapshot, SchedJob } from '../core/model.js';
import { perHourToPerSecond } from '../core/units.js';
import { stayReason } from './baselines/common.js';
import type { PackTask } from './packing.js';

/**
 * What moving a job costs (reference `Job.get_migration_cost`, plus lost work): the seconds it is out of service
 * (checkpoint, fetch, build, restore, init) and the work since its last checkpoint, at the job's reservation
 * price per second.
 */
export function jobMoveCost(job: SchedJob, rpPerHour: number, now: number): number {
  const lost = job.lastCheckpointSeconds === undefined ? 0 : Math.max(0, now - job.lastCheckpointSeconds);
  return (job.migrationDelaySeconds + lost) * perHourToPerSecond(rpPerHour);
}

/**
 * Tasks that no plan may move: jobs being launched or migrated (reference), jobs inside their no-move window,
 * and jobs expected to finish before any move could pay back: even if the move saved the whole price of the
 * job's current instances, the saving until completion would not cover the move's cost.
 */
export function pinnedTasks(
  snapshot: ClusterSnapshot,
  tasks: ReadonlyMap<string, PackTask>,
  instanceType: ReadonlyMap<string, InstanceType>,
  jobRp: ReadonlyMap<string, number>,
  /** A job's latency factor where it is (P_job ≤ 1 stretches its remaining time; 1 when the network does not matter). */
  performanceOf: (jobId: string) => number = () => 1,
): { pinnedTaskIds: Set<string>; pinned: { jobId: string; why: string }[] } {
  const pinnedTaskIds = new Set<string>();
  const pinned: { jobId: string; why: string }[] = [];
  const now = snapshot.nowSeconds;
  for (const job of snapshot.jobs) {
    const placed = job.taskIds
      .map((id) => tasks.get(id))
      .filter((t) => t?.currentInstanceId !== undefined) as PackTask[];
    if (placed.length === 0) continue;
    // Being launched or moved, or inside its no-move window, as every scheduler pins; else a move that cannot pay back.
    let why = stayReason(job, now);
    if (why === undefined && job.expectedRemainingSeconds !== undefined) {
      // At P_job < 1 the job progresses slower where it is: its remaining time there is longer (digest §10.2).
      const remaining = job.expectedRemainingSeconds / performanceOf(job.id);
      const instances = new Set(placed.map((t) => t.currentInstanceId as string));
      let bestSavingPerSecond = 0;
      for (const id of instances)
        bestSavingPerSecond += perHourToPerSecond(instanceType.get(id)?.costPerHour ?? 0);
      const moveCost = jobMoveCost(job, jobRp.get(job.id) ?? 0, now);
      if (remaining * bestSavingPerSecond <= moveCost)
        why = `expected to finish in ${Math.round(remaining)} s, before a move could pay back $${moveCost.toFixed(2)}`;
    }
    if (why === undefined) continue;
    placed.forEach((t) => pinnedTaskIds.add(t.id));
    if (job.reconfigurable) pinned.push({ jobId: job.id, why });
  }
  return { pinnedTaskIds, pinned };
}
