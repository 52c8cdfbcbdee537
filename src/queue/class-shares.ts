import type { WfqClassSpec, WfqConfig } from './wfq.js';

/** Which WFQ class a job belongs to, and how the capped capacity is shared between the classes. */

const EPS = 1e-9;

/** The class a job belongs to; fixed at arrival (PCS §3: not recomputed from the remaining size). */
export function classify(config: WfqConfig, job: { sizeSeconds: number; team?: string | undefined }): string {
  if (config.classifyBy === 'team') {
    const k = config.classes.find((c) => job.team !== undefined && (c.teams ?? []).includes(job.team));
    // Unknown teams share the last class, like sizes above every threshold.
    return (k ?? (config.classes[config.classes.length - 1] as WfqClassSpec)).id;
  }
  const k = config.classes.find((c) => c.maxSizeSeconds === undefined || job.sizeSeconds <= c.maxSizeSeconds);
  return (k ?? (config.classes[config.classes.length - 1] as WfqClassSpec)).id;
}

/**
 * Weighted max-min water-filling (PCS §3 step 2): each class gets min(demand, level·weight), the level raised until
 * the capacity or every demand is exhausted. An empty class gets 0 and its share flows to the others, in
 * proportion to their weights. This is the exact fixed point of PCS's iterative rescaling.
 */
export function waterFill(
  demands: readonly number[],
  weights: readonly number[],
  capacity: number,
): number[] {
  const alloc = demands.map(() => 0);
  const active = new Set(demands.map((_, i) => i).filter((i) => (demands[i] as number) > EPS));
  let residual = capacity;
  while (active.size > 0 && residual > EPS) {
    const wSum = [...active].reduce((s, i) => s + (weights[i] as number), 0);
    const level = residual / wSum;
    const satisfied = [...active].filter(
      (i) => (demands[i] as number) <= level * (weights[i] as number) + EPS,
    );
    if (satisfied.length === 0) {
      for (const i of active) alloc[i] = level * (weights[i] as number);
      break;
    }
    for (const i of satisfied) {
      alloc[i] = demands[i] as number;
      residual -= demands[i] as number;
      active.delete(i);
    }
  }
  return alloc;
}
