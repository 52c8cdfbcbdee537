/**
 * The simulator's hidden truth about interference: the normalized throughput (in (0, 1]) of a task of workload
 * `target` sharing an instance with tasks of `others` (a multiset, one entry per co-located active task).
 * Normally Eva's measured matrix (`ContentionMatrix.rate` from traces/contention-matrix.ts); tests inject
 * simpler models. Schedulers never see it, only the throughputs it produces (Eva §4.3).
 */
export type GroundTruth = (targetWorkload: string, otherWorkloads: readonly string[]) => number;

/** Every co-located task multiplies a task's throughput by `pairRate` (Eva's simulator fallback, digest §7). */
export function constantPairwise(pairRate: number): GroundTruth {
  if (!(pairRate > 0 && pairRate <= 1)) throw new Error(`pair rate must be in (0, 1], got ${pairRate}`);
  return (_target, others) => pairRate ** others.length;
}

/**
 * Memoize a ground truth by (target, sorted others), since a run asks for the same few compositions again and
 * again. The cache lives with the returned function, so each run creates its own (no state shared by runs).
 */
export function memoized(truth: GroundTruth): GroundTruth {
  const cache = new Map<string, number>();
  return (target, others) => {
    if (others.length === 0) return 1;
    const key =
      others.length === 1
        ? `${target}\u0001${others[0]}`
        : `${target}\u0001${[...others].sort().join('\u0001')}`;
    let r = cache.get(key);
    if (r === undefined) {
      r = truth(target, others);
      if (!(r > 0 && r <= 1 + 1e-12))
        throw new Error(`ground truth for ${target} with [${others.join(', ')}] must be in (0, 1], got ${r}`);
      cache.set(key, r);
    }
    return r;
  };
}
