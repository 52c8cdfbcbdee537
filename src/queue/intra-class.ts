/** How a class's share is divided between its jobs, in the class's order (fluid, for the toy model and predictions). */

const EPS = 1e-9;

/** An elastic job's allocation cap from its speedup table (PCS §3 step 3, ζ(g) = speedup[g]/g). */
export interface ElasticJob {
  readonly id: string;
  /** Most units the job can use. */
  readonly maxUnits: number;
  /** speedup[g] relative to 1 unit, speedup[0] = 0; omitted = linear. */
  readonly speedup?: readonly number[] | undefined;
}

/** Largest g ≤ max with speedup[h]/h ≥ ζ for every h ≤ g (PCS demand cap). */
export function demandCap(job: ElasticJob, zeta: number): number {
  if (job.speedup === undefined) return job.maxUnits;
  for (let g = 1; g <= job.maxUnits; g++) if ((job.speedup[g] ?? 0) / g < zeta - EPS) return g - 1;
  return job.maxUnits;
}

/**
 * Intra-class allocation (PCS §3 step 3): walk the class in order giving each job min(left, cap(ζ)); if capacity is
 * left over, lower ζ by δ and redo the walk. Fluid (fractional) — the toy model and predictions use it; whole-job
 * admission uses `admit`.
 */
export function intraClassAllocation(
  ordered: readonly ElasticJob[],
  classUnits: number,
  zetaMin: number,
  zetaStep: number,
): Map<string, number> {
  let zeta = zetaMin;
  for (;;) {
    const out = new Map<string, number>();
    let left = classUnits;
    for (const j of ordered) {
      const give = Math.min(left, demandCap(j, zeta));
      out.set(j.id, give);
      left -= give;
    }
    if (left <= EPS || zeta <= 0) return out;
    zeta = Math.max(0, zeta - zetaStep);
  }
}
