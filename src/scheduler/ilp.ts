import loadGlpk, { type GLPK, type LP } from 'glpk.js/node';
import type { Catalog, InstanceType } from '../core/catalog.js';
import type { SchedInstance } from '../core/model.js';
import { demandOn, fits, type FamilyDemand, type Resources } from '../core/resources.js';
import { demandSignature, sumOn } from './reservation-price.js';
import type { Configuration, PlannedInstance } from './types.js';

/**
 * The exact minimum-cost cluster configuration (Eva §4.1): the reference the Full Reconfiguration heuristic is
 * measured against (Eva §4.2 micro-benchmark, Table 4). It is too slow for online use (the problem generalises
 * variable-sized bin packing, NP-hard), so only `fleetwise bench optimality` and tests call it.
 *
 * Two exact formulations of the same problem are built and solved with GLPK (glpk.js):
 *
 * - `assignment`: Eva §4.1 itself. One candidate instance per task (the upper bound on instances); an instance has
 *   exactly one type or the zero-cost, zero-capacity ghost type (= not provisioned); each task goes to exactly
 *   one instance; capacity per resource. Demands depend on the family, so the type choice and the assignment are
 *   disaggregated: z[t,i,k] = "task t on instance i, which is of type k", and the capacity row of (i, k, r) sums
 *   the demands of the tasks on that family. Instance symmetry is removed with representatives (Campêlo et al.):
 *   instance i exists only if task i is on it, and only tasks t ≥ i may join it, so z[i,i,k] is "instance i has
 *   type k" and the ghost type is "task i sits on an earlier instance". Identical tasks are interchangeable, so
 *   among them the ones that open an instance form a prefix of their order.
 * - `patterns`: the Dantzig–Wolfe reformulation of the same model with identical instances aggregated. Tasks with
 *   equal demands form classes; a pattern is an instance type with a count of tasks of each class that fits it;
 *   y_p counts the instances of pattern p and every class must be covered. Only patterns that are maximal on
 *   their type (no further task of a class still to place fits), whose type is the cheapest that hosts them, and
 *   that do not split into two cheaper-or-equal instances are needed: any optimal configuration can be rewritten
 *   with those at no extra cost. Its LP relaxation is nearly tight, so 20-task samples of the Eva workloads are
 *   proven optimal in 0.01–2 s (median ≈ 0.1 s on 2 cores), where the assignment model can take minutes. Both
 *   give the same optimum (checked by the tests, and against brute force on small instances).
 *
 * `auto` uses patterns unless their enumeration grows past a budget (many distinct demands), then assignment.
 */

export interface IlpTask {
  readonly id: string;
  readonly demand: FamilyDemand;
}

export type IlpFormulation = 'patterns' | 'assignment';

export interface IlpInput {
  readonly catalog: Catalog;
  readonly tasks: readonly IlpTask[];
  /** Wall-clock limit for the whole solve (model building included), passed to GLPK as `tmlim`. */
  readonly timeLimitSeconds: number;
  /**
   * Instances already provisioned. The objective is the instantaneous provisioning cost (Eva §4.1), which is the
   * same whether an instance is new or kept, so `existing` only names the result: a planned instance of an
   * existing instance's type takes its id (isNew false), preferring the one that already hosts most of its tasks.
   */
  readonly existing?: readonly Pick<SchedInstance, 'id' | 'typeName' | 'taskIds'>[];
  readonly formulation?: IlpFormulation | 'auto';
  /** Pattern enumeration budget (search nodes) before `auto` falls back to the assignment model. */
  readonly patternSearchBudget?: number;
}

export type IlpStatus = 'optimal' | 'feasible' | 'infeasible' | 'timeout-no-solution';

export interface IlpResult {
  readonly status: IlpStatus;
  readonly formulation: IlpFormulation;
  /** Cost of the configuration found ($/hour); undefined without one. */
  readonly costPerHour?: number | undefined;
  /**
   * A proven lower bound on the optimal cost ($/hour): the optimum itself when `optimal`, else the LP relaxation
   * of the model (glpk.js does not report its branch-and-bound bound).
   */
  readonly lowerBoundCostPerHour?: number | undefined;
  readonly configuration?: Configuration | undefined;
  /** Tasks no instance type can host (the reason for `infeasible`). */
  readonly unhostableTaskIds?: readonly string[] | undefined;
  readonly variables: number;
  readonly constraints: number;
  readonly solveSeconds: number;
}

const DEFAULT_PATTERN_SEARCH_BUDGET = 2_000_000;

/** To a billionth of a dollar, so sums of float prices print as they add up (58.497, not 58.49700000000001). */
const roundDollars = (x: number): number => Math.round(x * 1e9) / 1e9;
const EPS = 1e-9;

let glpkInstance: Promise<GLPK> | undefined;

/** glpk.js compiles its WebAssembly once per process. */
function glpk(): Promise<GLPK> {
  glpkInstance ??= loadGlpk();
  return glpkInstance;
}

export async function solveMinCostConfiguration(input: IlpInput): Promise<IlpResult> {
  return solveWithSolver(await glpk(), input); // the solver is compiled once per process, outside the time limit
}

/** Load the solver once (async), then solve synchronously with solveWithSolver (e.g. inside a scheduling round). */
export function loadIlpSolver(): Promise<GLPK> {
  return glpk();
}

export type IlpSolver = GLPK;

export function solveWithSolver(solver: GLPK, input: IlpInput): IlpResult {
  if (!(input.timeLimitSeconds > 0))
    throw new Error(`timeLimitSeconds must be positive, got ${input.timeLimitSeconds}`);
  assertUniqueIds(input.tasks);
  const startMs = Date.now();
  const elapsedSeconds = (): number => (Date.now() - startMs) / 1000;
  const types = input.catalog.types;

  const unhostable = input.tasks.filter((t) => !types.some((k) => hostsAlone(k, t.demand))).map((t) => t.id);
  const requested = input.formulation ?? 'auto';
  if (unhostable.length > 0 || input.tasks.length === 0) {
    return {
      status: unhostable.length > 0 ? 'infeasible' : 'optimal',
      formulation: requested === 'auto' ? 'patterns' : requested,
      ...(unhostable.length > 0
        ? { unhostableTaskIds: unhostable }
        : { costPerHour: 0, lowerBoundCostPerHour: 0, configuration: { instances: [] } }),
      variables: 0,
      constraints: 0,
      solveSeconds: elapsedSeconds(),
    };
  }

  let model: BuiltModel | undefined;
  if (requested !== 'assignment') {
    const budget = input.patternSearchBudget ?? DEFAULT_PATTERN_SEARCH_BUDGET;
    model = buildPatternModel(types, input.tasks, budget);
    if (model === undefined && requested === 'patterns')
      throw new Error(`pattern enumeration exceeded its budget of ${budget} search nodes`);
  }
  model ??= buildAssignmentModel(types, input.tasks);

  // The LP relaxation first, on a fifth of the time left: the lower bound reported when the MIP stops early
  // (glpk.js does not expose GLPK's branch-and-bound bound). Patterns solve it in milliseconds.
  const relaxation = lpBound(solver, model.lp, (input.timeLimitSeconds - elapsedSeconds()) / 5);
  const remaining = input.timeLimitSeconds - elapsedSeconds();
  const mip = solver.solve(model.lp, {
    msglev: solver.GLP_MSG_OFF,
    presol: true,
    tmlim: Math.max(remaining, 0.001),
  });
  const mipStatus = mip.result.status;
  const base = {
    formulation: model.formulation,
    variables: (model.lp.binaries?.length ?? 0) + (model.lp.generals?.length ?? 0),
    constraints: model.lp.subjectTo.length,
  };

  if (mipStatus === solver.GLP_NOFEAS)
    return { ...base, status: 'infeasible', solveSeconds: elapsedSeconds() };
  if (mipStatus !== solver.GLP_OPT && mipStatus !== solver.GLP_FEAS) {
    // glpk.js hides glp_intopt's return code; a stop well before the limit is a solver failure, not a timeout.
    if (elapsedSeconds() < 0.9 * input.timeLimitSeconds)
      throw new Error(`GLPK stopped after ${elapsedSeconds()} s without a solution (status ${mipStatus})`);
    return {
      ...base,
      status: 'timeout-no-solution',
      lowerBoundCostPerHour: relaxation,
      solveSeconds: elapsedSeconds(),
    };
  }

  const byId = new Map(types.map((k) => [k.name, k]));
  const taskById = new Map(input.tasks.map((t) => [t.id, t]));
  const inputOrder = new Map(input.tasks.map((t, i) => [t.id, i]));
  let planned: RawInstance[] = model.decode(mip.result.vars).map((inst) => ({
    typeName: inst.typeName,
    taskIds: [...inst.taskIds].sort((a, b) => (inputOrder.get(a) as number) - (inputOrder.get(b) as number)),
  }));
  // Over-covered pattern copies may host fewer tasks than the pattern; a cheaper type may then suffice.
  planned = planned.map((inst) => downsize(inst, types, byId, taskById));
  const instances = nameInstances(planned, input.existing ?? []);
  const configuration: Configuration = { instances };
  const costPerHour = roundDollars(validateConfiguration(configuration, input.tasks, types));
  const optimal = mipStatus === solver.GLP_OPT;
  const bound = optimal
    ? costPerHour
    : relaxation === undefined
      ? undefined
      : Math.min(costPerHour, relaxation);
  return {
    ...base,
    status: optimal ? 'optimal' : 'feasible',
    costPerHour,
    lowerBoundCostPerHour: bound,
    configuration,
    solveSeconds: elapsedSeconds(),
  };
}

// ───────────────────────────── model building ─────────────────────────────

/** An instance of the solution before it is named. */
interface RawInstance {
  readonly typeName: string;
  readonly taskIds: readonly string[];
}

interface BuiltModel {
  readonly formulation: IlpFormulation;
  readonly lp: LP;
  decode(values: Readonly<Record<string, number>>): RawInstance[];
}

const GLP_LO = 2;
const GLP_UP = 3;
const GLP_DB = 4;
const GLP_FX = 5;
const GLP_MIN = 1;

function hostsAlone(type: InstanceType, demand: FamilyDemand): boolean {
  const d = demandOn(demand, type.family);
  return d !== undefined && fits(d, type.capacity);
}

interface TaskClass {
  readonly demand: FamilyDemand;
  readonly taskIds: readonly string[];
}

function classesOf(tasks: readonly IlpTask[]): TaskClass[] {
  const bySignature = new Map<string, { demand: FamilyDemand; taskIds: string[] }>();
  for (const t of tasks) {
    const sig = demandSignature(t.demand);
    const cls = bySignature.get(sig);
    if (cls === undefined) bySignature.set(sig, { demand: t.demand, taskIds: [t.id] });
    else cls.taskIds.push(t.id);
  }
  return [...bySignature.values()];
}

interface Pattern {
  readonly type: InstanceType;
  /** Tasks of each class (by class index) on one instance of this pattern. */
  readonly counts: readonly number[];
}

/** Cheapest type hosting a multiset of classes (a count per class), memoised: patterns share many sub-multisets. */
class CheapestHosting {
  private readonly memo = new Map<string, number>();
  /** demands[k][c]: demand of class c on type k's family, undefined if it cannot run there. */
  private readonly demands: readonly (readonly (Resources | undefined)[])[];

  constructor(
    private readonly types: readonly InstanceType[],
    classes: readonly TaskClass[],
  ) {
    this.demands = types.map((k) => classes.map((c) => demandOn(c.demand, k.family)));
  }

  /** $/hour of the cheapest type hosting `counts`, Infinity if none does. */
  costPerHour(counts: readonly number[]): number {
    const key = counts.join(',');
    let cost = this.memo.get(key);
    if (cost === undefined) {
      cost = Infinity;
      this.types.forEach((k, ki) => {
        if (k.costPerHour >= (cost as number)) return;
        let [gpus, vcpus, memoryGiB] = [0, 0, 0];
        for (let c = 0; c < counts.length; c++) {
          const n = counts[c] as number;
          if (n === 0) continue;
          const d = this.demands[ki]?.[c];
          if (d === undefined) return;
          gpus += n * d[0];
          vcpus += n * d[1];
          memoryGiB += n * d[2];
        }
        if (fits([gpus, vcpus, memoryGiB], k.capacity)) cost = k.costPerHour;
      });
      this.memo.set(key, cost);
    }
    return cost;
  }
}

/**
 * Maximal, undominated patterns per type, by depth-first search over the classes with decreasing counts.
 * A maximal pattern is dropped when a strictly cheaper type hosts it, or when it splits into two parts whose
 * cheapest hosts cost no more together (e.g. a p3.16xlarge holding what two p3.8xlarge hold, at the same $/GPU):
 * replacing it cannot raise the cost and uses strictly cheaper types, so repeating ends, and dropping these
 * removes most of the equal-cost alternatives that make branch-and-bound slow.
 * Returns undefined when the search visits more than `budget` nodes.
 */
function enumeratePatterns(
  types: readonly InstanceType[],
  classes: readonly TaskClass[],
  budget: number,
): Pattern[] | undefined {
  const patterns: Pattern[] = [];
  const hosting = new CheapestHosting(types, classes);
  let nodes = 0;

  /** Some split of `counts` into two non-empty parts is hosted for at most `costPerHour`; false also past budget. */
  const splits = (counts: readonly number[], costPerHour: number): boolean => {
    const part = new Array<number>(counts.length).fill(0);
    const rest = [...counts];
    const total = counts.reduce((s, n) => s + n, 0);
    const visit = (c: number, taken: number): boolean => {
      if (++nodes > budget) return false;
      if (c === counts.length)
        return (
          taken > 0 &&
          taken < total &&
          hosting.costPerHour(part) + hosting.costPerHour(rest) <= costPerHour + EPS
        );
      for (let n = 0; n <= (counts[c] as number); n++) {
        part[c] = n;
        rest[c] = (counts[c] as number) - n;
        if (visit(c + 1, taken + n)) return true;
      }
      part[c] = 0;
      rest[c] = counts[c] as number;
      return false;
    };
    return visit(0, 0);
  };

  for (const type of types) {
    const usable: { cls: number; d: Resources; n: number }[] = [];
    classes.forEach((c, cls) => {
      const d = demandOn(c.demand, type.family);
      if (d !== undefined && fits(d, type.capacity)) usable.push({ cls, d, n: c.taskIds.length });
    });
    if (usable.length === 0) continue;
    const counts = new Array<number>(classes.length).fill(0);

    const isMaximal = (rem: Resources): boolean =>
      usable.every((u) => (counts[u.cls] as number) >= u.n || !fits(u.d, rem));
    const isDominated = (): boolean =>
      hosting.costPerHour(counts) < type.costPerHour - EPS || splits(counts, type.costPerHour);

    const search = (pos: number, rem: Resources): boolean => {
      if (++nodes > budget) return false;
      const u = usable[pos];
      if (u === undefined) {
        if (counts.some((n) => n > 0) && isMaximal(rem) && !isDominated())
          patterns.push({ type, counts: [...counts] });
        return nodes <= budget;
      }
      let most = u.n;
      for (let r = 0; r < 3; r++) {
        const dr = u.d[r] as number;
        if (dr > 0) most = Math.min(most, Math.floor(((rem[r] as number) + EPS) / dr));
      }
      for (let n = most; n >= 0; n--) {
        counts[u.cls] = n;
        const next: Resources = [rem[0] - n * u.d[0], rem[1] - n * u.d[1], rem[2] - n * u.d[2]];
        if (!search(pos + 1, next)) return false;
      }
      counts[u.cls] = 0;
      return true;
    };
    if (!search(0, type.capacity)) return undefined;
  }
  return patterns;
}

function buildPatternModel(
  types: readonly InstanceType[],
  tasks: readonly IlpTask[],
  budget: number,
): BuiltModel | undefined {
  const classes = classesOf(tasks);
  const patterns = enumeratePatterns(types, classes, budget);
  if (patterns === undefined) return undefined;
  const name = (p: number): string => `y${p}`;
  const lp: LP = {
    name: 'eva-patterns',
    objective: {
      direction: GLP_MIN,
      name: 'costPerHour',
      vars: patterns.map((p, i) => ({ name: name(i), coef: p.type.costPerHour })),
    },
    // Σ_p n_pc·y_p ≥ N_c: every task of every class is placed (surplus slots are left empty when decoding).
    subjectTo: classes.map((c, cls) => ({
      name: `cover${cls}`,
      vars: patterns.flatMap((p, i) =>
        (p.counts[cls] as number) > 0 ? [{ name: name(i), coef: p.counts[cls] as number }] : [],
      ),
      bnds: { type: GLP_LO, lb: c.taskIds.length, ub: 0 },
    })),
    // More copies of p than ⌈N_c/n_pc⌉ for all its classes would leave a whole copy empty: never optimal.
    bounds: patterns.map((p, i) => {
      let ub = 0;
      classes.forEach((c, cls) => {
        const n = p.counts[cls] as number;
        if (n > 0) ub = Math.max(ub, Math.ceil(c.taskIds.length / n));
      });
      return { name: name(i), type: GLP_DB, lb: 0, ub };
    }),
    generals: patterns.map((_, i) => name(i)),
  };
  return {
    formulation: 'patterns',
    lp,
    decode(values) {
      const queues = classes.map((c) => [...c.taskIds]);
      const out: RawInstance[] = [];
      // Expensive patterns first, so any surplus lands on the copies that downsizing can shrink.
      const order = patterns
        .map((_, i) => i)
        .sort(
          (a, b) =>
            (patterns[b] as Pattern).type.costPerHour - (patterns[a] as Pattern).type.costPerHour || a - b,
        );
      for (const i of order) {
        const p = patterns[i] as Pattern;
        const copies = Math.round(values[name(i)] ?? 0);
        for (let copy = 0; copy < copies; copy++) {
          const taskIds: string[] = [];
          p.counts.forEach((n, cls) => {
            const q = queues[cls] as string[];
            taskIds.push(...q.splice(0, n));
          });
          if (taskIds.length > 0) out.push({ typeName: p.type.name, taskIds });
        }
      }
      return out;
    },
  };
}

/**
 * Eva §4.1 with representatives: z[t,i,k] for i ≤ t (task order: decreasing cheapest standalone cost, so big tasks
 * open instances), where task t fits type k alone and so does task i.
 */
function buildAssignmentModel(types: readonly InstanceType[], tasksIn: readonly IlpTask[]): BuiltModel {
  const cheapestAlone = (t: IlpTask): number =>
    Math.min(...types.filter((k) => hostsAlone(k, t.demand)).map((k) => k.costPerHour));
  const tasks = tasksIn
    .map((t) => ({ t, price: cheapestAlone(t), sig: demandSignature(t.demand) }))
    .sort((a, b) => b.price - a.price || a.sig.localeCompare(b.sig))
    .map((x) => x.t);
  const n = tasks.length;
  const canHost: boolean[][] = tasks.map((t) => types.map((k) => hostsAlone(k, t.demand)));
  const z = (t: number, i: number, k: number): string => `z${t}_${i}_${k}`;
  const objective: { name: string; coef: number }[] = [];
  const rows: LP['subjectTo'] = [];
  const binaries: string[] = [];
  const exists = (t: number, i: number, k: number): boolean =>
    canHost[t]?.[k] === true && canHost[i]?.[k] === true;

  for (let t = 0; t < n; t++)
    for (let i = 0; i <= t; i++)
      types.forEach((_, k) => {
        if (exists(t, i, k)) binaries.push(z(t, i, k));
      });
  // Objective: instance i costs the type it takes; z[i,i,k] is "instance i exists with type k".
  for (let i = 0; i < n; i++)
    types.forEach((type, k) => {
      if (exists(i, i, k)) objective.push({ name: z(i, i, k), coef: type.costPerHour });
    });
  // Each task on exactly one instance (instance i ≤ t), of one type. For t = i this also says instance i has at
  // most one type; none means the ghost type.
  for (let t = 0; t < n; t++) {
    const vars: { name: string; coef: number }[] = [];
    for (let i = 0; i <= t; i++)
      types.forEach((_, k) => exists(t, i, k) && vars.push({ name: z(t, i, k), coef: 1 }));
    rows.push({ name: `assign${t}`, vars, bnds: { type: GLP_FX, lb: 1, ub: 1 } });
  }
  for (let i = 0; i < n; i++)
    types.forEach((type, k) => {
      if (!exists(i, i, k)) return;
      const di = demandOn((tasks[i] as IlpTask).demand, type.family) as Resources;
      // Capacity per resource on (instance i, type k): Σ_{t>i} d_tkr·z[t,i,k] ≤ (C_kr − d_ikr)·z[i,i,k].
      for (let r = 0; r < 3; r++) {
        const vars: { name: string; coef: number }[] = [];
        for (let t = i + 1; t < n; t++) {
          if (!exists(t, i, k)) continue;
          const dt = (demandOn((tasks[t] as IlpTask).demand, type.family) as Resources)[r] as number;
          if (dt > 0) vars.push({ name: z(t, i, k), coef: dt });
        }
        if (vars.length === 0) continue;
        vars.push({ name: z(i, i, k), coef: -((type.capacity[r] as number) - (di[r] as number)) });
        rows.push({ name: `cap${i}_${k}_${r}`, vars, bnds: { type: GLP_UP, lb: 0, ub: 0 } });
      }
      // z[t,i,k] ≤ z[i,i,k]: implied by capacity, but much tighter in the LP relaxation.
      for (let t = i + 1; t < n; t++) {
        if (!exists(t, i, k)) continue;
        rows.push({
          name: `link${t}_${i}_${k}`,
          vars: [
            { name: z(t, i, k), coef: 1 },
            { name: z(i, i, k), coef: -1 },
          ],
          bnds: { type: GLP_UP, lb: 0, ub: 0 },
        });
      }
    });
  // Identical tasks t, t+1 are interchangeable: if t+1 opens an instance, so does t (swap them otherwise).
  for (let t = 0; t + 1 < n; t++) {
    if (demandSignature((tasks[t] as IlpTask).demand) !== demandSignature((tasks[t + 1] as IlpTask).demand))
      continue;
    const vars: { name: string; coef: number }[] = [];
    types.forEach((_, k) => {
      if (exists(t + 1, t + 1, k)) vars.push({ name: z(t + 1, t + 1, k), coef: 1 });
      if (exists(t, t, k)) vars.push({ name: z(t, t, k), coef: -1 });
    });
    rows.push({ name: `ident${t}`, vars, bnds: { type: GLP_UP, lb: 0, ub: 0 } });
  }

  return {
    formulation: 'assignment',
    lp: {
      name: 'eva-assignment',
      objective: { direction: GLP_MIN, name: 'costPerHour', vars: objective },
      subjectTo: rows,
      binaries,
    },
    decode(values) {
      const out: RawInstance[] = [];
      for (let i = 0; i < n; i++)
        types.forEach((type, k) => {
          if (!exists(i, i, k) || (values[z(i, i, k)] ?? 0) < 0.5) return;
          const taskIds: string[] = [];
          for (let t = i; t < n; t++)
            if (exists(t, i, k) && (values[z(t, i, k)] ?? 0) > 0.5) taskIds.push((tasks[t] as IlpTask).id);
          out.push({ typeName: type.name, taskIds });
        });
      return out;
    },
  };
}

/** LP relaxation value of a model (a valid lower bound on its optimum), or undefined if not solved in time. */
function lpBound(solver: GLPK, lp: LP, timeLimitSeconds: number): number | undefined {
  const relaxed: LP = { ...lp, binaries: [], generals: [] };
  // A binary relaxed to continuous needs its [0, 1] bound spelled out.
  if (lp.binaries !== undefined && lp.binaries.length > 0)
    relaxed.bounds = [
      ...(lp.bounds ?? []),
      ...lp.binaries.map((name) => ({ name, type: GLP_DB, lb: 0, ub: 1 })),
    ];
  const res = solver.solve(relaxed, {
    msglev: solver.GLP_MSG_OFF,
    presol: true,
    tmlim: Math.max(timeLimitSeconds, 0.001),
  });
  return res.result.status === solver.GLP_OPT ? roundDollars(res.result.z) : undefined;
}

// ───────────────────────────── results ─────────────────────────────

function downsize(
  inst: RawInstance,
  types: readonly InstanceType[],
  byName: ReadonlyMap<string, InstanceType>,
  taskById: ReadonlyMap<string, IlpTask>,
): RawInstance {
  const current = byName.get(inst.typeName) as InstanceType;
  const demands = inst.taskIds.map((id) => (taskById.get(id) as IlpTask).demand);
  let best = current;
  for (const k of types) {
    if (k.costPerHour >= best.costPerHour - EPS) continue;
    const total = sumOn(demands, k.family);
    if (total !== undefined && fits(total, k.capacity)) best = k;
  }
  return best === current ? inst : { typeName: best.name, taskIds: inst.taskIds };
}

/** Keep ids of existing instances of the same type (most shared tasks first); the rest are `new-1`, `new-2`, …. */
function nameInstances(
  raw: readonly RawInstance[],
  existing: readonly Pick<SchedInstance, 'id' | 'typeName' | 'taskIds'>[],
): PlannedInstance[] {
  const pairs: { r: number; e: number; shared: number }[] = [];
  raw.forEach((inst, r) => {
    const mine = new Set(inst.taskIds);
    existing.forEach((ex, e) => {
      if (ex.typeName === inst.typeName)
        pairs.push({ r, e, shared: ex.taskIds.filter((id) => mine.has(id)).length });
    });
  });
  pairs.sort((a, b) => b.shared - a.shared || a.r - b.r || a.e - b.e);
  const idOf = new Map<number, string>();
  const usedExisting = new Set<number>();
  for (const p of pairs) {
    if (idOf.has(p.r) || usedExisting.has(p.e)) continue;
    idOf.set(p.r, (existing[p.e] as Pick<SchedInstance, 'id'>).id);
    usedExisting.add(p.e);
  }
  let next = 0;
  return raw.map((inst, r) => {
    const kept = idOf.get(r);
    return {
      id: kept ?? `new-${++next}`,
      typeName: inst.typeName,
      isNew: kept === undefined,
      taskIds: [...inst.taskIds],
    };
  });
}

/**
 * Check a configuration against the tasks: every task exactly once, on a family it can run on, within every
 * resource capacity. Returns its cost in $/hour; throws naming the first violation (a solver or decoding bug).
 */
export function validateConfiguration(
  configuration: Configuration,
  tasks: readonly IlpTask[],
  types: readonly InstanceType[],
): number {
  const typeByName = new Map(types.map((k) => [k.name, k]));
  const taskById = new Map(tasks.map((t) => [t.id, t]));
  const placed = new Set<string>();
  let costPerHour = 0;
  for (const inst of configuration.instances) {
    const type = typeByName.get(inst.typeName);
    if (type === undefined) throw new Error(`instance ${inst.id}: unknown type ${inst.typeName}`);
    if (inst.taskIds.length === 0) throw new Error(`instance ${inst.id}: hosts no task`);
    const demands: FamilyDemand[] = [];
    for (const id of inst.taskIds) {
      const task = taskById.get(id);
      if (task === undefined) throw new Error(`instance ${inst.id}: unknown task ${id}`);
      if (placed.has(id)) throw new Error(`task ${id} is placed twice`);
      placed.add(id);
      demands.push(task.demand);
    }
    const total = sumOn(demands, type.family);
    if (total === undefined)
      throw new Error(`instance ${inst.id}: a task cannot run on family ${type.family}`);
    if (!fits(total, type.capacity))
      throw new Error(
        `instance ${inst.id} (${type.name}): demand ${total.join('/')} exceeds ${type.capacity.join('/')}`,
      );
    costPerHour += type.costPerHour;
  }
  const missing = tasks.filter((t) => !placed.has(t.id));
  if (missing.length > 0) throw new Error(`tasks not placed: ${missing.map((t) => t.id).join(', ')}`);
  return costPerHour;
}

function assertUniqueIds(tasks: readonly IlpTask[]): void {
  const seen = new Set<string>();
  for (const t of tasks) {
    if (seen.has(t.id)) throw new Error(`duplicate task id ${t.id}`);
    seen.add(t.id);
  }
}
