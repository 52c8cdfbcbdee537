/** Compact snapshot builders for the baseline scheduler tests. */
import { loadCatalogFile } from '../../../src/cloud/catalog-file.js';
import type { ClusterSnapshot, InstanceState, SchedJob, SchedTask } from '../../../src/core/model.js';
import type { FamilyDemand, Resources } from '../../../src/core/resources.js';
import type { Configuration, PlannedInstance } from '../../../src/scheduler/types.js';

export const catalog = loadCatalogFile();

export interface JobSpec {
  readonly id: string;
  /** One demand for every family (`any`), or a per-family demand. */
  readonly demand: Resources | FamilyDemand;
  /** Instance of each task (one string for a single-task job); undefined = pending. */
  readonly on?: string | readonly (string | undefined)[];
  readonly tasks?: number;
  readonly key?: string;
  readonly remainingSeconds?: number;
  readonly reconfigurable?: boolean;
  readonly arrivalSeconds?: number;
  readonly runningSinceSeconds?: number;
  readonly noMoveSeconds?: number;
}

export interface InstanceSpec {
  readonly id: string;
  readonly type: string;
  readonly state?: InstanceState;
}

export function taskId(jobId: string, i = 0): string {
  return `${jobId}-${i}`;
}

export function snapshot(spec: {
  now?: number;
  instances?: readonly InstanceSpec[];
  jobs: readonly JobSpec[];
}): ClusterSnapshot {
  const jobs: SchedJob[] = [];
  const tasks: SchedTask[] = [];
  const onInstance = new Map<string, string[]>();
  for (const j of spec.jobs) {
    const n = j.tasks ?? 1;
    const ids = Array.from({ length: n }, (_, i) => taskId(j.id, i));
    const demand: FamilyDemand = Array.isArray(j.demand)
      ? { any: j.demand as Resources }
      : (j.demand as FamilyDemand);
    ids.forEach((id, i) => {
      const instanceId = typeof j.on === 'string' ? j.on : j.on?.[i];
      tasks.push({ id, jobId: j.id, key: j.key ?? j.id, demand, instanceId });
      if (instanceId !== undefined) onInstance.set(instanceId, [...(onInstance.get(instanceId) ?? []), id]);
    });
    jobs.push({
      id: j.id,
      taskIds: ids,
      reconfigurable: j.reconfigurable ?? true,
      arrivalSeconds: j.arrivalSeconds ?? 0,
      runningSinceSeconds: j.runningSinceSeconds,
      noMoveSeconds: j.noMoveSeconds,
      migrationDelaySeconds: 30,
      expectedRemainingSeconds: j.remainingSeconds,
    });
  }
  return {
    nowSeconds: spec.now ?? 0,
    jobs,
    tasks,
    instances: (spec.instances ?? []).map((i) => ({
      id: i.id,
      typeName: i.type,
      state: i.state ?? 'running',
      taskIds: onInstance.get(i.id) ?? [],
    })),
  };
}

/** The plan as `id:type[tasks]` strings, sorted, for readable exact comparisons. */
export function layout(config: Configuration): string[] {
  return config.instances
    .map((i: PlannedInstance) => `${i.id}:${i.typeName}[${[...i.taskIds].sort().join(',')}]`)
    .sort();
}

export function hostOf(config: Configuration, task: string): PlannedInstance | undefined {
  return config.instances.find((i) => i.taskIds.includes(task));
}
