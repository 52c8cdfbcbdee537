import type { JobSpec } from '../../controller/job-spec/spec.js';
import { DEFAULT_CHECKPOINT_TIMEOUT_SECONDS } from '../../controller/job-spec/spec.js';
import { DEFAULT_TRACE_TEAM, type TraceJob } from '../../world/trace.js';

/**
 * A trace job as a user would submit it to the controller, chosen so that the controller's snapshot
 * (src/controller/snapshot.ts) gives the scheduler what the engine's buildSnapshot (src/sim/scheduler-view.ts) gives:
 * - co-location keys: each task's `workload` is the engine's key, `<job name>_<task name>` unless the trace sets one;
 * - expected remaining time: `expectedDurationSeconds` = total iterations / full throughput and `totalIterations`, so
 *   that with the completed iterations the simulated workers report, expected × (1 − completed / total) is the
 *   engine's remaining iterations / full throughput;
 * - migration delay: the snapshot estimates 2 × restore + init, the engine max over tasks of (fetch + build + upload)
 *   + init, so the restore estimate is half of that maximum and the init delay is the job's.
 * Images are named by the trace's image ids (tasks sharing one skip the build on an instance that has it), and
 * dependencies by the ids the controller gave the jobs they name (`controllerIds`).
 */
export function traceJobSpec(
  job: TraceJob,
  controllerIds: ReadonlyMap<string, string>,
  /** Seconds between its own checkpoints as the run has them (the trace's, a run's override, else the default). */
  checkpointIntervalSeconds: number,
): JobSpec {
  const moveSeconds = job.tasks.reduce(
    (m, t) => Math.max(m, t.fetchDelaySeconds + t.buildImageDelaySeconds + t.uploadDelaySeconds),
    0,
  );
  return {
    name: specName(job.name),
    team: job.team ?? DEFAULT_TRACE_TEAM,
    tasks: job.tasks.map((t) => ({
      name: specName(t.name),
      image: `trace/image-${t.imageId}`,
      env: {},
      demand: t.demand,
      replicas: 1,
      shmSizeGiB: t.shmSizeGiB,
      workload: t.key ?? `${job.name}_${t.name}`,
    })),
    checkpoint: {
      signal: 'SIGTERM',
      timeoutSeconds: DEFAULT_CHECKPOINT_TIMEOUT_SECONDS,
      restoreDelaySeconds: moveSeconds / 2,
      initDelaySeconds: job.initDelaySeconds,
      everySeconds: checkpointIntervalSeconds,
    },
    ...(job.spot === undefined ? {} : { spot: job.spot }),
    ...(job.spotMaxDelaySeconds === undefined ? {} : { spotMaxDelaySeconds: job.spotMaxDelaySeconds }),
    ...(job.noMoveSeconds === undefined ? {} : { noMoveSeconds: job.noMoveSeconds }),
    ...(job.valueOfTimePerHour === undefined ? {} : { valueOfTimePerJobHour: job.valueOfTimePerHour }),
    totalIterations: job.totalIterations,
    expectedDurationSeconds: job.totalIterations / job.fullThroughput,
    queue: {},
    ...(job.success === undefined ? {} : { success: job.success }),
    ...(job.dependsOn === undefined
      ? {}
      : { dependsOn: job.dependsOn.map((id) => controllerIdOf(id, controllerIds)) }),
    ...(job.network === undefined
      ? {}
      : {
          network: {
            ...job.network,
            ...(job.network.rootTask === undefined ? {} : { rootTask: specName(job.network.rootTask) }),
          },
        }),
  };
}

/** The controller's id of a trace job submitted before (a dependency is submitted before its dependents). */
function controllerIdOf(traceId: string, controllerIds: ReadonlyMap<string, string>): string {
  const id = controllerIds.get(traceId);
  if (id === undefined) throw new Error(`dependsOn: trace job ${traceId} has not been submitted`);
  return id;
}

/** A trace name (`resnet18[3]`) as a job-spec name: lowercase letters, digits, `.`, `_`, `-`. */
function specName(name: string): string {
  const cleaned = name
    .toLowerCase()
    .replace(/[^a-z0-9._-]+/g, '-')
    .replace(/^[^a-z0-9]+|[^a-z0-9]+$/g, '');
  return (cleaned === '' ? 'job' : cleaned).slice(0, 63);
}
