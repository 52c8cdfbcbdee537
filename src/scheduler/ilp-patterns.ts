import type { LP } from 'glpk.js/node';
import type { InstanceType } from '../core/catalog.js';
import { demandOn, fits, type FamilyDemand, type Resources } from '../core/resources.js';
import {
  EPS,
  GLP_DB,
  GLP_LO,
  GLP_MIN,
  type BuiltModel,
  type IlpTask,
  type RawInstance,
} from './ilp-model.js';
import { demandSignature } from './reservation-price.js';

/**
 * The pattern model: the Dantzig–Wolfe reformulation of Eva §4.1 with identical instances aggregated (ilp.ts
 * describes it). Tasks with equal demands form classes; the patterns are enumerated here, up to a search budget.
 */

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

/** The pattern model, or undefined when enumerating its patterns exceeds `budget` search nodes. */
export function buildPatternModel(
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
