import { z } from 'zod';
import type { FamilyDemand, Resources } from '../../core/resources.js';
import { parseWith } from '../../core/validation.js';
import { traceShmGiB } from './trace-bounds.js';

/**
 * Eva's profiled workload catalog (`src/workloads/workload_catalog.json`, research digest §4). The values in
 * this file win over the digest's table and over the workloads' own config.json files (e.g. a3c's full
 * throughput is 12.736 here, 14.79 in its config.json; gcn runs 1000 iterations here, 370 there).
 */
export interface WorkloadTask {
  readonly name: string;
  readonly demand: FamilyDemand;
  readonly shmSizeGiB: number;
  /** Iterations per second when running alone. */
  readonly fullThroughput: number;
}

export interface Workload {
  /** Catalog key, e.g. `two_node_Resnet18`. */
  readonly key: string;
  /** Workload name: its interference identity (a row/column of contention_matrix.csv), e.g. `resnet18`. */
  readonly name: string;
  readonly tasks: readonly WorkloadTask[];
  /** Demand of the (first) task per family; the traces' jobs copy it or replace it (Alibaba). */
  readonly demand: FamilyDemand;
  readonly fullThroughput: number;
  readonly totalIterations: number;
  /** Profiled standalone duration (Stratus uses it; trace generators draw their own). */
  readonly durationSeconds: number;
  readonly supportThroughputAware: boolean;
  /** Job-level launch delay after all tasks start (paper Table 7 "Launch"). */
  readonly initDelaySeconds: number;
  readonly fetchDelaySeconds: number;
  readonly buildImageDelaySeconds: number;
  readonly killDelaySeconds: number;
  readonly uploadDelaySeconds: number;
  /**
   * Eva numbers images by a counter over the catalog's tasks in file order (trace_generator.py), so jobs
   * of one workload share an image (a cached build) on an instance. We keep those numbers, so a trace
   * generated here and an Eva JSON trace use the same ids.
   */
  readonly imageId: string;
}

export interface WorkloadCatalog {
  readonly workloads: readonly Workload[];
}

const nonNegative = z.number().finite().nonnegative();
const resourcesSchema = z.tuple([nonNegative, nonNegative, nonNegative]);
/**
 * `{family or "any": [gpus, vcpus, memoryGiB]}`; at least one entry, each asking for something: a task of [0, 0, 0]
 * would hold no capacity, yet the instance it is placed on is billed whole.
 */
export const familyDemandSchema = z
  .record(
    z.string().min(1),
    resourcesSchema.refine(
      (r) => r.some((x) => x > 0),
      'asks for nothing ([0, 0, 0]): a demand needs a positive GPU, vCPU or memory entry',
    ),
  )
  .refine((d) => Object.keys(d).length > 0, 'a demand needs at least one family (or "any")');

const taskSchema = z.object({
  name: z.string().min(1),
  demand: familyDemandSchema,
  shm_size: traceShmGiB,
  full_throughput: z.number().finite().positive(),
});

const workloadSchema = z.object({
  name: z.string().min(1),
  tasks: z.array(taskSchema).min(1, 'a workload needs at least one task'),
  total_iters: z.number().int().positive(),
  support_throughput_aware: z.boolean(),
  duration: z.number().finite().positive(),
  init_delay: nonNegative,
  fetch_delay: nonNegative,
  build_image_delay: nonNegative,
  kill_delay: nonNegative,
  upload_delay: nonNegative,
});

const catalogSchema = z
  .record(z.string().min(1), workloadSchema)
  .refine((c) => Object.keys(c).length > 0, 'the workload catalog is empty');

function toFamilyDemand(d: Record<string, readonly [number, number, number]>): FamilyDemand {
  const out: Record<string, Resources> = {};
  for (const [family, r] of Object.entries(d)) out[family] = [r[0], r[1], r[2]];
  return out;
}

/** Validate parsed JSON as Eva's workload catalog; `source` names the file in errors. */
export function parseWorkloadCatalog(json: unknown, source = 'workload catalog'): WorkloadCatalog {
  const file = parseWith(catalogSchema, json, source);
  let imageCounter = 0;
  const workloads = Object.entries(file).map(([key, w]): Workload => {
    const tasks = w.tasks.map((t): WorkloadTask => ({
      name: t.name,
      demand: toFamilyDemand(t.demand),
      shmSizeGiB: t.shm_size,
      fullThroughput: t.full_throughput,
    }));
    const imageId = String(imageCounter);
    imageCounter += tasks.length;
    const first = tasks[0] as WorkloadTask;
    return {
      key,
      name: w.name,
      tasks,
      demand: first.demand,
      fullThroughput: first.fullThroughput,
      totalIterations: w.total_iters,
      durationSeconds: w.duration,
      supportThroughputAware: w.support_throughput_aware,
      initDelaySeconds: w.init_delay,
      fetchDelaySeconds: w.fetch_delay,
      buildImageDelaySeconds: w.build_image_delay,
      killDelaySeconds: w.kill_delay,
      uploadDelaySeconds: w.upload_delay,
      imageId,
    };
  });
  return { workloads };
}

/**
 * The workloads trace generators draw from: single-task entries only, as Eva's Alibaba generator does
 * (`if len(tasks) > 1: continue`), which also avoids `two_node_Resnet18` shadowing `resnet18` (both are
 * named "resnet18"). With the bundled catalog: 9 workloads, in file order.
 */
export function singleTaskWorkloads(catalog: WorkloadCatalog): readonly Workload[] {
  return catalog.workloads.filter((w) => w.tasks.length === 1);
}

/** Find a workload by catalog key or by name (the first match), or throw naming the known ones. */
export function findWorkload(catalog: WorkloadCatalog, keyOrName: string): Workload {
  const w =
    catalog.workloads.find((x) => x.key === keyOrName) ?? catalog.workloads.find((x) => x.name === keyOrName);
  if (w === undefined)
    throw new Error(
      `unknown workload ${keyOrName} (the catalog has ${catalog.workloads.map((x) => x.key).join(', ')})`,
    );
  return w;
}

/** The base workload of an Eva job name: the part before `[` (`cyclegan[3]` → `cyclegan`). */
export function baseWorkloadOf(jobName: string): string {
  const bracket = jobName.indexOf('[');
  return bracket < 0 ? jobName : jobName.slice(0, bracket);
}
