import { availableParallelism, totalmem } from 'node:os';
import type { Catalog, InstanceType } from '../../core/catalog.js';

/**
 * Local mode runs every "instance" on this machine, so a catalog type larger than the host is scaled down to it: the
 * worker's task limits are the planned demands times the type's scale (one factor for vCPUs and memory, so the ratios
 * the scheduler reasons about are kept). GPUs cannot be conjured: GPU types keep their GPU count in the plan and their
 * tasks get no device (the start-up report says so).
 */
export interface HostCapacity {
  readonly vcpus: number;
  readonly memoryGiB: number;
}

export function hostCapacity(): HostCapacity {
  return { vcpus: availableParallelism(), memoryGiB: totalmem() / 1024 ** 3 };
}

/** Factor in (0, 1] applied to a type's vCPUs and memory on this host. */
export function capacityScale(type: InstanceType, host: HostCapacity): number {
  const [, vcpus, memoryGiB] = type.capacity;
  return Math.min(1, vcpus > 0 ? host.vcpus / vcpus : 1, memoryGiB > 0 ? host.memoryGiB / memoryGiB : 1);
}

/** One paragraph for the controller's start-up output. */
export function describeLocalCapacity(catalog: Catalog, host: HostCapacity): string {
  const scaled = catalog.types.filter((t) => capacityScale(t, host) < 1);
  const gpu = catalog.types.filter((t) => t.capacity[0] > 0);
  const parts = [
    `local mode: this host has ${host.vcpus} vCPUs and ${host.memoryGiB.toFixed(1)} GiB; instances are worker processes here`,
  ];
  if (scaled.length > 0) {
    const sample = scaled
      .slice(0, 3)
      .map(
        (t) => `${t.name} ${t.capacity[1]} vCPU/${t.capacity[2]} GiB ×${capacityScale(t, host).toFixed(2)}`,
      )
      .join(', ');
    parts.push(
      `${scaled.length} of ${catalog.types.length} catalog types are larger than the host and run scaled down (task limits × the scale; e.g. ${sample})`,
    );
  }
  if (gpu.length > 0) parts.push(`${gpu.length} GPU types have no GPU here: their tasks run without devices`);
  return parts.join('; ');
}
