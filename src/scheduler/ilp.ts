import loadGlpk, { type GLPK, type LP } from 'glpk.js/node';
import type { Catalog } from '../core/catalog.js';
import type { SchedInstance } from '../core/model.js';
import {
  buildAssignmentModel,
  GLP_DB,
  hostsAlone,
  type BuiltModel,
  type IlpFormulation,
  type IlpTask,
  type RawInstance,
} from './ilp-model.js';
import { buildPatternModel } from './ilp-patterns.js';
import { downsize, nameInstances, roundDollars, validateConfiguration } from './ilp-result.js';
import type { Configuration } from './types.js';

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
 *
 * This module solves; the models are built in ilp-model.ts (assignment) and ilp-patterns.ts (patterns), and the
 * solution is named and checked in ilp-result.ts.
 */

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

function assertUniqueIds(tasks: readonly IlpTask[]): void {
  const seen = new Set<string>();
  for (const t of tasks) {
    if (seen.has(t.id)) throw new Error(`duplicate task id ${t.id}`);
    seen.add(t.id);
  }
}
