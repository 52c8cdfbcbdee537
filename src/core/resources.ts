/**
 * Resource vectors: [GPUs, vCPUs, memory GiB], the three dimensions Eva packs (§3, Table 2).
 * A task's demand is given per instance family (Eva §5: a CPU task may need more vCPUs on a P3 than on a C7i);
 * the key `any` applies to every family that has no vector of its own.
 */
export type Resources = readonly [gpus: number, vcpus: number, memoryGiB: number];

export const RESOURCE_NAMES = ['gpus', 'vcpus', 'memoryGiB'] as const;
export const ZERO: Resources = [0, 0, 0];

/** Demand per family name (`p3`, `c7i`, …) or `any`. */
export type FamilyDemand = Readonly<Record<string, Resources>>;

export const ANY_FAMILY = 'any';

/** The demand of a task on a family, or undefined when the task cannot run there. */
export function demandOn(demand: FamilyDemand, family: string): Resources | undefined {
  return demand[family] ?? demand[ANY_FAMILY];
}

export function add(a: Resources, b: Resources): Resources {
  return [a[0] + b[0], a[1] + b[1], a[2] + b[2]];
}

export function sub(a: Resources, b: Resources): Resources {
  return [a[0] - b[0], a[1] - b[1], a[2] - b[2]];
}

export function scale(a: Resources, k: number): Resources {
  return [a[0] * k, a[1] * k, a[2] * k];
}

/** a ≤ b in every dimension (with a tiny tolerance for fractional demands). */
export function fits(a: Resources, b: Resources): boolean {
  const eps = 1e-9;
  return a[0] <= b[0] + eps && a[1] <= b[1] + eps && a[2] <= b[2] + eps;
}

/**
 * Tetris-style alignment of a demand with the remaining capacity (Eva reference `alignment score`):
 * Σ_i (d_i/C_i)·(r_i/C_i) over dimensions with C_i > 0. Used only to break ties.
 */
export function alignment(demand: Resources, remaining: Resources, capacity: Resources): number {
  let s = 0;
  for (let i = 0; i < 3; i++) {
    const c = capacity[i] as number;
    if (c > 0) s += ((demand[i] as number) / c) * ((remaining[i] as number) / c);
  }
  return s;
}

export function formatResources(r: Resources): string {
  return `[${r[0]} GPU, ${r[1]} vCPU, ${r[2]} GiB]`;
}
