import type { GLPK, LP } from 'glpk.js/node';
import type { Catalog, InstanceType } from '../core/catalog.js';
import { demandOn, RESOURCE_NAMES, type FamilyDemand, type Resources } from '../core/resources.js';
import { offeringsOf, type SpotMarket } from '../core/spot.js';
import { canHost, demandSignature, PriceBook } from '../scheduler/reservation-price.js';
import type { TraceJob } from '../world/trace.js';

/**
 * Lower bounds on what any scheduler can pay for a trace: the yardstick for "how close to optimal" (a scheduler's
 * simulated cost over a bound is its overhead, whatever the baselines do).
 *
 * Both relax the problem to a *fluid* fleet: instances can be bought in fractions and resized at any instant, each
 * task may be split across families it fits on, and nothing costs time (no launch, init or migration delays, no
 * interference). The cheapest fluid fleet for a demand is a small LP: with n_c tasks of demand class c, y_cf of
 * them on family f and x_k instances of type k,
 *
 *   min Σ_k price_k·x_k   s.t.   Σ_f y_cf = n_c,   Σ_c d_cf·y_cf ≤ Σ_{k ∈ f} cap_k·x_k  (each family, dimension),
 *
 * where c may use f only if one type of f hosts a task of c alone (as every real schedule must).
 *
 * - **Work bound** (any schedule): the LP for the task-hours of the whole trace. The LP's cost is positively
 *   homogeneous and subadditive in the demand, so a schedule that hosts R(t) at time t pays at least
 *   ∫ LP(R(t)) dt ≥ LP(∫ R(t) dt) ≥ LP(task-hours): delaying, bunching or stretching jobs cannot beat it.
 * - **Timed bound** (schedules where no job waits or slows down): every job runs exactly during
 *   [arrival, arrival + standalone duration]; the LP is solved between consecutive arrivals and completions and
 *   integrated over time. A real schedule can go below it only by delaying jobs to pack them with later ones.
 *
 * With a spot market open, each type may also be bought at its cheapest pool's spot price (x'_k), and the family rows
 * hold all tasks on on-demand plus spot capacity, while a second set of rows holds the tasks of jobs that never run on
 * spot on the on-demand capacity alone. Interruptions only add instance time, so this stays a lower bound on what a
 * schedule's instances cost; not on its bill, since AWS charges nothing for a spot instance EC2 reclaims in its first
 * hour (core/spot.ts `FREE_INTERRUPTED_SPOT_SECONDS`): a run with such reclaims may be billed less than the bounds.
 */
export interface CostBounds {
  readonly workBound: number;
  readonly timedBound: number;
  /** Σ over jobs of the standalone reservation prices × duration: No-Packing without any delay. */
  readonly standaloneCost: number;
  /** Intervals between consecutive job events with at least one job running (LPs solved for the timed bound). */
  readonly segments: number;
  /** The timed bound accumulated over time: its value so far at each distinct job event (seconds, $). */
  readonly timedSeries: { readonly timeSeconds: number[]; readonly cumulativeCost: number[] };
}

interface DemandClass {
  readonly signature: string;
  readonly demand: FamilyDemand;
  /** Families with a type that hosts one task of the class alone. */
  readonly families: readonly string[];
  /** Its job never runs on spot (`spot: never`): only on-demand capacity hosts it. */
  readonly onDemandOnly: boolean;
}

export interface CostBoundOptions {
  /**
   * The spot market the schedules may buy from (the simulator's `--spot on`): a type's spot capacity costs its
   * cheapest pool's price. Absent, every instance is bought on demand.
   */
  readonly spot?: SpotMarket | undefined;
}

/** A job starting (+1) or ending (−1) at `at` seconds. */
interface JobEvent {
  readonly at: number;
  readonly job: number;
  readonly sign: 1 | -1;
}

/** The cheapest fluid fleet for task counts per class (LP of the module comment), in $/hour (or $ for task-hours). */
class FluidFleetLp {
  private readonly families: readonly string[];
  private readonly typesOf: ReadonlyMap<string, readonly InstanceType[]>;
  /** Per type with spot pools cheaper than on demand, the cheapest pool's $/hour. */
  private readonly spotPrice: ReadonlyMap<string, number>;

  constructor(
    private readonly solver: GLPK,
    catalog: Catalog,
    private readonly classes: readonly DemandClass[],
    spot: SpotMarket | undefined,
  ) {
    const typesOf = new Map<string, InstanceType[]>();
    for (const t of catalog.types) typesOf.set(t.family, [...(typesOf.get(t.family) ?? []), t]);
    this.typesOf = typesOf;
    this.families = [...typesOf.keys()].sort();
    const spotPrice = new Map<string, number>();
    if (spot !== undefined)
      for (const t of catalog.types) {
        const cheapest = Math.min(...offeringsOf(spot, t.name).map((o) => o.pricePerHour));
        if (cheapest < t.costPerHour) spotPrice.set(t.name, cheapest);
      }
    this.spotPrice = spotPrice;
  }

  cost(counts: ReadonlyMap<number, number>): number {
    if (counts.size === 0) return 0;
    const objective: { name: string; coef: number }[] = [];
    const subjectTo: LP['subjectTo'] = [];
    // Per family and dimension: Σ demand·y − Σ capacity·(x + x') ≤ 0; and for tasks that never run on spot,
    // Σ demand·y − Σ capacity·x ≤ 0 (the `od` rows, only when some such task and some spot capacity exist).
    const rows = new Map<string, { name: string; coef: number }[]>();
    const row = (family: string, dim: number, onDemandOnly = false) => {
      const key = `${onDemandOnly ? 'od:' : ''}${family}:${RESOURCE_NAMES[dim]}`;
      let vars = rows.get(key);
      if (vars === undefined) {
        vars = [];
        rows.set(key, vars);
      }
      return vars;
    };
    const usedFamilies = new Set<string>();
    const spotOpen = this.spotPrice.size > 0;
    for (const [c, n] of counts) {
      const cls = this.classes[c] as DemandClass;
      const split: { name: string; coef: number }[] = [];
      for (const f of cls.families) {
        const y = `y_${c}_${f}`;
        split.push({ name: y, coef: 1 });
        usedFamilies.add(f);
        const d = demandOn(cls.demand, f) as Resources;
        for (let i = 0; i < 3; i++)
          if ((d[i] as number) > 0) {
            row(f, i).push({ name: y, coef: d[i] as number });
            if (spotOpen && cls.onDemandOnly) row(f, i, true).push({ name: y, coef: d[i] as number });
          }
      }
      subjectTo.push({ name: `n_${c}`, vars: split, bnds: { type: this.solver.GLP_FX, lb: n, ub: n } });
    }
    for (const f of this.families) {
      if (!usedFamilies.has(f)) continue;
      for (const k of this.typesOf.get(f) ?? []) {
        const x = `x_${k.name}`;
        objective.push({ name: x, coef: k.costPerHour });
        const spot = this.spotPrice.get(k.name);
        if (spot !== undefined) objective.push({ name: `xs_${k.name}`, coef: spot });
        for (let i = 0; i < 3; i++) {
          const cap = k.capacity[i] as number;
          if (cap <= 0) continue;
          row(f, i).push({ name: x, coef: -cap });
          if (spot !== undefined) row(f, i).push({ name: `xs_${k.name}`, coef: -cap });
          if (rows.has(`od:${f}:${RESOURCE_NAMES[i]}`)) row(f, i, true).push({ name: x, coef: -cap });
        }
      }
    }
    for (const [name, vars] of rows)
      subjectTo.push({ name, vars, bnds: { type: this.solver.GLP_UP, lb: 0, ub: 0 } });
    const result = this.solver.solve(
      {
        name: 'fluid-fleet',
        objective: { direction: this.solver.GLP_MIN, name: 'cost', vars: objective },
        subjectTo,
      },
      { msglev: this.solver.GLP_MSG_OFF, presol: true },
    );
    if (result.result.status !== this.solver.GLP_OPT)
      throw new Error(
        `the fluid-fleet LP was not solved to optimality (GLPK status ${result.result.status})`,
      );
    return result.result.z;
  }
}

/** Work and timed lower bounds of a trace's cost on a catalog (see CostBounds). */
export function costBounds(
  solver: GLPK,
  catalog: Catalog,
  jobs: readonly TraceJob[],
  options: CostBoundOptions = {},
): CostBounds {
  const classes: DemandClass[] = [];
  const classIndex = new Map<string, number>();
  const classOf = (demand: FamilyDemand, onDemandOnly: boolean): number => {
    const signature = demandSignature(demand);
    const key = onDemandOnly ? `${signature}|on-demand` : signature;
    let c = classIndex.get(key);
    if (c === undefined) {
      const families = [...new Set(catalog.types.filter((k) => canHost(k, demand)).map((k) => k.family))];
      if (families.length === 0) throw new Error(`no instance type of the catalog hosts demand ${signature}`);
      c = classes.length;
      classes.push({ signature, demand, families, onDemandOnly });
      classIndex.set(key, c);
    }
    return c;
  };
  const spot = options.spot;
  const jobClasses = jobs.map((j) =>
    j.tasks.map((t) => classOf(t.demand, spot !== undefined && j.spot === 'never')),
  );
  const lp = new FluidFleetLp(solver, catalog, classes, spot);

  const taskHours = new Map<number, number>();
  jobs.forEach((j, i) => {
    for (const c of jobClasses[i] as number[])
      taskHours.set(c, (taskHours.get(c) ?? 0) + j.durationSeconds / 3600);
  });
  const workBound = lp.cost(taskHours);

  // Timed bound: sweep arrivals (+1) and completions (−1) in time order; same-time events apply together.
  const events: JobEvent[] = jobs.flatMap((j, job) => [
    { at: j.arrivalSeconds, job, sign: 1 },
    { at: j.arrivalSeconds + j.durationSeconds, job, sign: -1 },
  ]);
  events.sort((a, b) => a.at - b.at || a.sign - b.sign);
  const running = new Map<number, number>();
  let timedBound = 0;
  let segments = 0;
  const timedSeries = { timeSeconds: [] as number[], cumulativeCost: [] as number[] };
  let e = 0;
  while (e < events.length) {
    const at = (events[e] as JobEvent).at;
    timedSeries.timeSeconds.push(at);
    timedSeries.cumulativeCost.push(timedBound);
    for (let ev = events[e]; ev !== undefined && ev.at === at; ev = events[++e])
      for (const c of jobClasses[ev.job] as number[]) {
        const n = (running.get(c) ?? 0) + ev.sign;
        if (n === 0) running.delete(c);
        else running.set(c, n);
      }
    const next = events[e]?.at;
    if (next === undefined || running.size === 0) continue;
    segments += 1;
    timedBound += (lp.cost(running) * (next - at)) / 3600;
  }

  const book = new PriceBook(catalog);
  let standaloneCost = 0;
  for (const j of jobs)
    for (const t of j.tasks) standaloneCost += (book.reservationPrice(t.demand) * j.durationSeconds) / 3600;
  return { workBound, timedBound, standaloneCost, segments, timedSeries };
}
