import type { ClusterSnapshot, SchedInstance, SchedJob, SchedTask } from '../core/model.js';
import type { JobNetwork, MeasuredRtt } from '../core/network.js';
import type { NetworkWorld } from './network-world.js';
import type { ThroughputObservation } from '../scheduler/types.js';
import {
  isActive,
  isReconfigurable,
  remainingIterations,
  successProgress,
  type SimInstance,
  type SimJob,
  type SimTask,
} from './entities.js';

/**
 * What the scheduler sees each round (the same ClusterSnapshot the controller builds): arrived, unfinished
 * jobs; jobs being launched or moved are pinned (Eva reference `_create_initial_config`), with only their tasks
 * committed to instances a plan may use when some are bound to an instance going away; instances that are
 * launching or running and still in the plan, with the snapshot's tasks committed to them (empty ones too, so a plan
 * can reuse or release them). `liveJobs` must be integrated up to `nowSeconds`.
 */
export function buildSnapshot(
  nowSeconds: number,
  liveJobs: Iterable<SimJob>,
  assignable: Iterable<SimInstance>,
  network?: NetworkWorld,
): ClusterSnapshot {
  const jobs: SchedJob[] = [];
  const tasks: SchedTask[] = [];
  const measured: MeasuredRtt[] = [];
  const usable = new Set(assignable);
  const shownTasks = new Set<SimTask>();
  for (const job of liveJobs) {
    const reconfigurable = isReconfigurable(job);
    let shown = job.tasks;
    if (!reconfigurable) {
      if (job.tasks.some((t) => t.committed !== undefined && !usable.has(t.committed))) {
        // Bound in part for an instance going away (a drained one), as the controller's snapshot has it: no plan may
        // move the job nor keep that task there, but its tasks committed to instances a plan may use hold their room
        // until it goes back to the queue. Left out with the job while those instances list them, that room would
        // look free (the packing ignores task ids it does not know) and be planned for another job too.
        shown = job.tasks.filter((t) => t.committed !== undefined && usable.has(t.committed));
        if (shown.length === 0) continue;
      } else if (job.tasks.some((t) => t.committed === undefined)) {
        // Bound for no instance (checkpointing back to the queue, its move called off): no plan may move it, nor
        // place it.
        continue;
      }
    }
    for (const t of shown) shownTasks.add(t);
    jobs.push({
      id: job.spec.id,
      taskIds: shown === job.tasks ? job.taskIds : shown.map((t) => t.id),
      reconfigurable,
      arrivalSeconds: job.spec.arrivalSeconds,
      // Initializing, when it will make progress (as the controller's snapshot has it): its no-move window holds it.
      runningSinceSeconds:
        job.activeSinceSeconds ?? (job.status === 'executing' ? job.progressFromSeconds : undefined),
      // max over tasks of (fetch + build + upload) + init (digest §2 "Migration cost").
      migrationDelaySeconds: job.migrationDelaySeconds,
      // Tasks checkpoint when killed, so a move loses no work (as in Eva's simulator).
      lastCheckpointSeconds: job.startSeconds === null ? undefined : nowSeconds,
      // A job with a declared success model is known by its distribution, not by its drawn size.
      expectedRemainingSeconds:
        successProgress(job)?.expectedRemainingSeconds ?? remainingIterations(job) / job.spec.fullThroughput,
      ...(job.spec.network === undefined ? {} : { network: jobNetwork(job) }),
      ...(job.spec.spot === undefined ? {} : { spot: job.spec.spot }),
      ...(job.spec.spotMaxDelaySeconds === undefined
        ? {}
        : { spotMaxDelaySeconds: job.spec.spotMaxDelaySeconds }),
      ...(job.spec.noMoveSeconds === undefined ? {} : { noMoveSeconds: job.spec.noMoveSeconds }),
      ...(job.spec.valueOfTimePerHour === undefined
        ? {}
        : { valueOfTimePerHour: job.spec.valueOfTimePerHour }),
      checkpointIntervalSeconds: job.checkpointIntervalSeconds,
      ...(job.interruptedZones.length === 0 ? {} : { interruptedZones: job.interruptedZones }),
    });
    if (network !== undefined && job.spec.network !== undefined)
      measureJob(job, network, nowSeconds, measured);
    for (const task of shown)
      tasks.push({
        id: task.id,
        jobId: job.spec.id,
        key: task.key,
        demand: task.spec.demand,
        instanceId: task.committed?.id,
      });
  }
  const instances: SchedInstance[] = [];
  for (const inst of usable)
    instances.push({
      id: inst.id,
      typeName: inst.type.name,
      state: inst.lifecycle === 'running' ? 'running' : 'launching',
      // Only the snapshot's tasks, as the controller lists them: a task of a job left out is nobody's to plan.
      taskIds: [...inst.committed].filter((t) => shownTasks.has(t)).map((t) => t.id),
      ...(inst.placement === undefined ? {} : { placement: inst.placement }),
      ...(inst.market === 'spot' ? { market: inst.market } : {}),
      ...(inst.rebalanceRecommended === true ? { rebalanceRecommended: true } : {}),
    });
  return { nowSeconds, jobs, tasks, instances, ...(measured.length === 0 ? {} : { measuredRtts: measured }) };
}

/** The job's network declaration with its root as a task id. */
function jobNetwork(job: SimJob): JobNetwork {
  const n = job.spec.network as NonNullable<SimJob['spec']['network']>;
  return {
    sensitivity: n.sensitivity,
    pattern: n.pattern,
    rootTaskId: job.taskIds[job.rootIndex],
    gibPerHour: n.gibPerHour,
  };
}

/**
 * What the workers of a running multi-task job measure (digest §10.4): the maximum round trip over the last window
 * between every two instances its tasks run on.
 */
function measureJob(job: SimJob, network: NetworkWorld, now: number, out: MeasuredRtt[]): void {
  if (job.tasks.length < 2) return;
  const instances = [...new Set(job.tasks.map((t) => (t.state === 'running' ? t.occupying : undefined)))];
  if (instances.some((i) => i === undefined) || instances.length < 2) return;
  const placed = instances as SimInstance[];
  for (let i = 0; i < placed.length; i++)
    for (let j = i + 1; j < placed.length; j++) {
      const a = placed[i] as SimInstance;
      const b = placed[j] as SimInstance;
      const max = network.measuredMax(a, b, now);
      out.push({
        fromInstanceId: a.id,
        toInstanceId: b.id,
        maxMicroseconds: max,
        p99Microseconds: max,
        atSeconds: now,
      });
    }
}

/**
 * Each running task's normalized throughput, as a worker measures it: its job's throughput over the full
 * throughput, i.e. the min over the job's running tasks' co-location rates times the job's latency factor P_job
 * (the scheduler takes out what it estimates the network costs, and its co-location table attributes the rest).
 * Tasks still in their job's init delay report the rate they run at, as in Eva's reference.
 */
export function observeThroughputs(liveJobs: Iterable<SimJob>): ThroughputObservation[] {
  const out: ThroughputObservation[] = [];
  for (const job of liveJobs) {
    let rate = Infinity;
    for (const t of job.tasks) if (isActive(t)) rate = Math.min(rate, t.rate);
    if (rate === Infinity) continue;
    // The co-location rate alone would show a job slowed by its network as fast, and a scheduler that divides by
    // its estimate of P_job (Eva) would then learn co-location costs nothing.
    const observed = rate * job.latencyFactor;
    for (const t of job.tasks) if (isActive(t)) out.push({ taskId: t.id, normalizedThroughput: observed });
  }
  return out;
}
