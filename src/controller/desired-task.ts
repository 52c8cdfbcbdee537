import type { Catalog } from '../core/catalog.js';
import { demandOn } from '../core/resources.js';
import type { ContextLimits } from '../protocol/context-limits.js';
import { noticeCappedTimeoutSeconds } from '../core/spot.js';
import type { DesiredTask } from '../protocol/worker-protocol.js';
import type { Clock } from './clock.js';
import { expandTasks } from './job-spec/tasks.js';
import { spotNotice } from './spot-interruptions.js';
import type { InstanceRecord, JobRecord, StateStore, TaskRecord } from './state-store.js';

/** What describing a task for its worker needs of the controller's options (WorkerTaskControlOptions). */
export interface DescribeOptions {
  readonly catalog: Catalog;
  /** The build context limits of a team's jobs (default: the defaults). */
  readonly contextLimits?: ((team: string) => ContextLimits) | undefined;
  /** Capacity scale per instance type (local mode on a small host); task limits are scaled alike. Default 1. */
  readonly capacityScale?: ((typeName: string) => number) | undefined;
  /**
   * False: the instances have no GPU devices to give (local mode: worker processes on this host, where GPU types are
   * only played), so a task gets none whatever its demand; asking Docker for them would fail its start. Default true.
   */
  readonly gpuDevices?: boolean | undefined;
  /**
   * Where an instance's spot interruption notice is recorded, and the time now: a checkpoint-stop under a notice is
   * given no more than the time left before EC2 acts (absent: the job's own timeout).
   */
  readonly store?: Pick<StateStore, 'listEvents'> | undefined;
  readonly clock?: Pick<Clock, 'nowSeconds'> | undefined;
}

/**
 * A task as its worker is told to run it (the heartbeat's answer): the image or build, command and environment of
 * its spec, its resource limits on the instance's family, whether to restore a checkpoint, and how to checkpoint.
 */
export function describeTask(
  task: TaskRecord,
  job: JobRecord,
  inst: InstanceRecord,
  action: DesiredTask['action'],
  options: DescribeOptions,
): DesiredTask {
  const expanded = expandTasks(job.spec).find((t) => t.index === task.index);
  if (expanded === undefined) throw new Error(`task ${task.id}: no such task in its job's spec`);
  const template = expanded.template;
  const type = options.catalog.types.find((t) => t.name === inst.typeName);
  const demand = (type === undefined ? undefined : demandOn(template.demand, type.family)) ??
    Object.values(template.demand)[0] ?? [0, 1, 1];
  const scale = Math.min(1, Math.max(0.01, options.capacityScale?.(inst.typeName) ?? 1));
  return {
    taskId: task.id,
    jobId: job.id,
    action,
    // A task that ran before may have uploaded a checkpoint its worker died before reporting: always look for one
    // (the worker starts from zero when there is no good checkpoint).
    restore: task.lastCheckpointKey !== undefined || job.startedAtSeconds !== undefined,
    attempt: job.attempts,
    ...(job.spec.totalIterations === undefined ? {} : { totalIterations: job.spec.totalIterations }),
    launch: {
      ...(template.image === undefined ? {} : { image: template.image }),
      ...(template.build === undefined
        ? {}
        : {
            build: {
              context: template.build.context,
              ...(template.build.dockerfile === undefined ? {} : { dockerfile: template.build.dockerfile }),
              ...(options.contextLimits === undefined ? {} : { limits: options.contextLimits(job.team) }),
            },
          }),
      command: [...(template.command ?? [])],
      env: { ...template.env, ...arrayEnvironment(job) },
      vcpus: Math.max(0.1, demand[1] * scale),
      memoryGiB: demand[2] * scale,
      gpus: options.gpuDevices === false ? 0 : demand[0],
      shmSizeGiB: Math.min(template.shmSizeGiB, demand[2] * scale),
    },
    checkpoint: {
      signal: job.spec.checkpoint.signal,
      timeoutSeconds:
        action === 'checkpoint-stop'
          ? checkpointStopTimeout(job.spec.checkpoint.timeoutSeconds, inst, options)
          : job.spec.checkpoint.timeoutSeconds,
    },
  };
}

/**
 * A checkpoint-stop's timeout: the job's, capped as the worker caps it when it reads the notice itself (the time left
 * less a margin for its last heartbeat, at least a second) when the instance has a spot interruption notice. A notice
 * that reached only the controller (the interruption queue, a worker whose metadata read failed) would otherwise leave
 * a 300 s or 900 s checkpoint timeout running past the reclaim, its upload cut off. A notice recorded with no time that
 * can be read (an older record) is counted from when it was recorded plus EC2's two minutes.
 */
function checkpointStopTimeout(
  timeoutSeconds: number,
  inst: InstanceRecord,
  options: DescribeOptions,
): number {
  if (options.store === undefined || options.clock === undefined) return timeoutSeconds;
  const notice = spotNotice(options.store, inst.id);
  if (notice === undefined) return timeoutSeconds;
  return noticeCappedTimeoutSeconds(timeoutSeconds, notice, options.clock.nowSeconds() * 1000);
}

/**
 * What a job of an array tells its tasks: its index and the array's size, and the index again under AWS Batch's
 * name so that a script written for Batch runs unchanged (it wins over a spec's own AWS_BATCH_JOB_ARRAY_INDEX).
 */
export function arrayEnvironment(job: Pick<JobRecord, 'spec'>): Record<string, string> {
  const array = job.spec.arrayProperties;
  if (array?.index === undefined) return {};
  return {
    FLEETWISE_ARRAY_INDEX: String(array.index),
    FLEETWISE_ARRAY_SIZE: String(array.size),
    AWS_BATCH_JOB_ARRAY_INDEX: String(array.index),
  };
}
