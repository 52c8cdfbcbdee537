import type { LP } from 'glpk.js/node';
import { compareText } from '../core/compare.js';
import type { InstanceType } from '../core/catalog.js';
import { demandOn, fits, type FamilyDemand, type Resources } from '../core/resources.js';
import { demandSignature } from './reservation-price.js';

/**
 * What the two exact formulations share (ilp.ts describes them), and the assignment model itself, Eva §4.1 as
 * written; the pattern model is in ilp-patterns.ts.
 */

export interface IlpTask {
  readonly id: string;
  readonly demand: FamilyDemand;
}

export type IlpFormulation = 'patterns' | 'assignment';

/** An instance of the solution before it is named. */
export interface RawInstance {
  readonly typeName: string;
  readonly taskIds: readonly string[];
}

/** A model ready for GLPK, and how to read the instances back from the values of its variables. */
export interface BuiltModel {
  readonly formulation: IlpFormulation;
  readonly lp: LP;
  decode(values: Readonly<Record<string, number>>): RawInstance[];
}

// GLPK's constants (glpk.h); the solver object carries them too, but models are built before one is at hand.
export const GLP_LO = 2;
export const GLP_UP = 3;
export const GLP_DB = 4;
export const GLP_FX = 5;
export const GLP_MIN = 1;

/** Slack for float comparisons of capacities and costs. */
export const EPS = 1e-9;

export function hostsAlone(type: InstanceType, demand: FamilyDemand): boolean {
  const d = demandOn(demand, type.family);
  return d !== undefined && fits(d, type.capacity);
}

/**
 * Eva §4.1 with representatives: z[t,i,k] for i ≤ t (task order: decreasing cheapest standalone cost, so big tasks
 * open instances), where task t fits type k alone and so does task i.
 */
export function buildAssignmentModel(
  types: readonly InstanceType[],
  tasksIn: readonly IlpTask[],
): BuiltModel {
  const cheapestAlone = (t: IlpTask): number =>
    Math.min(...types.filter((k) => hostsAlone(k, t.demand)).map((k) => k.costPerHour));
  const tasks = tasksIn
    .map((t) => ({ t, price: cheapestAlone(t), sig: demandSignature(t.demand) }))
    .sort((a, b) => b.price - a.price || compareText(a.sig, b.sig))
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
