import type { Catalog } from '../core/catalog.js';
import { Rng } from '../core/random.js';
import type { FamilyDemand } from '../core/resources.js';
import { packFromScratch } from '../scheduler/full-reconfiguration.js';
import type { IlpFormulation } from '../scheduler/ilp-model.js';
import { validateConfiguration } from '../scheduler/ilp-result.js';
import { solveMinCostConfiguration, type IlpStatus } from '../scheduler/ilp.js';
import { PriceBook } from '../scheduler/reservation-price.js';
import type { Configuration } from '../scheduler/types.js';

/**
 * Eva §4.2 micro-benchmark (Table 4): how close Full Reconfiguration comes to the optimal provisioning cost.
 * Each trial samples tasks uniformly from the profiled workloads (per-family demands as profiled) and prices
 * three configurations: the exact ILP (§4.1), Full Reconfiguration (`packFromScratch`, interference ignored as
 * in the paper's benchmark) and No-Packing (each task alone on its cheapest type, Σ reservation prices).
 * The paper used 200 tasks and Gurobi for 30 minutes; we use trials small enough for GLPK to prove optimality,
 * and the ratios are taken only over trials where it did.
 */

export interface BenchWorkload {
  /** Workload name, used as the co-location key of its tasks. */
  readonly name: string;
  readonly demand: FamilyDemand;
}

export type Heuristic = (
  book: PriceBook,
  tasks: readonly { id: string; demand: FamilyDemand; key?: string }[],
) => Configuration;

export interface OptimalityBenchOptions {
  readonly catalog: Catalog;
  readonly workloads: readonly BenchWorkload[];
  readonly tasksPerTrial: number;
  readonly trials: number;
  readonly seed: number;
  /** GLPK limit per trial. */
  readonly timeLimitSeconds: number;
  readonly formulation?: IlpFormulation | 'auto';
  /** Defaults to Eva's Full Reconfiguration. */
  readonly heuristic?: Heuristic;
  /** Called after each trial (progress output). */
  readonly onTrial?: (trial: OptimalityTrial) => void;
}

export interface OptimalityTrial {
  readonly trial: number;
  /** Seed of this trial's sample: `--seed` reproduces all trials, this one reproduces the sample alone. */
  readonly sampleSeed: number;
  readonly tasks: number;
  /** Sampled tasks per workload. */
  readonly workloads: Readonly<Record<string, number>>;
  readonly ilpStatus: IlpStatus;
  readonly ilpFormulation: IlpFormulation;
  readonly ilpCostPerHour: number | null;
  readonly ilpLowerBoundCostPerHour: number | null;
  readonly ilpInstances: number | null;
  readonly ilpSeconds: number;
  readonly heuristicCostPerHour: number;
  readonly heuristicInstances: number;
  readonly heuristicMilliseconds: number;
  readonly noPackingCostPerHour: number;
  /** heuristic / ILP optimum; null unless the ILP proved optimality. */
  readonly heuristicRatio: number | null;
  /** No-Packing / ILP optimum; null unless the ILP proved optimality. */
  readonly noPackingRatio: number | null;
}

export interface OptimalityReport {
  /** Mean of heuristic / optimal over the trials where the ILP proved optimality (null if none did). */
  readonly meanRatio: number | null;
  readonly maxRatio: number | null;
  readonly optimalTrials: number;
  /** Mean of No-Packing / optimal over the same trials. */
  readonly noPackingRatio: number | null;
  readonly tasksPerTrial: number;
  readonly seed: number;
  readonly timeLimitSeconds: number;
  readonly totalSeconds: number;
  readonly trials: readonly OptimalityTrial[];
}

/** Sample `count` tasks uniformly over the workloads (Eva §4.2: "randomly sampled from the workloads in Table 7"). */
export function sampleTasks(
  workloads: readonly BenchWorkload[],
  count: number,
  rng: Rng,
): { id: string; demand: FamilyDemand; key: string }[] {
  return Array.from({ length: count }, (_, i) => {
    const w = rng.pick(workloads);
    return { id: `t${String(i).padStart(3, '0')}`, demand: w.demand, key: w.name };
  });
}

const round = (x: number, digits = 6): number => Math.round(x * 10 ** digits) / 10 ** digits;

function mean(xs: readonly number[]): number | null {
  return xs.length === 0 ? null : xs.reduce((s, x) => s + x, 0) / xs.length;
}

export async function runOptimalityBench(options: OptimalityBenchOptions): Promise<OptimalityReport> {
  if (options.workloads.length === 0) throw new Error('the optimality bench needs at least one workload');
  const startMs = Date.now();
  const book = new PriceBook(options.catalog);
  const heuristic = options.heuristic ?? packFromScratch;
  const master = new Rng(options.seed);
  const trials: OptimalityTrial[] = [];

  for (let trial = 0; trial < options.trials; trial++) {
    const sampleSeed = master.nextUint32();
    const tasks = sampleTasks(options.workloads, options.tasksPerTrial, new Rng(sampleSeed));
    const workloads: Record<string, number> = {};
    for (const t of tasks) workloads[t.key] = (workloads[t.key] ?? 0) + 1;

    const ilp = await solveMinCostConfiguration({
      catalog: options.catalog,
      tasks,
      timeLimitSeconds: options.timeLimitSeconds,
      ...(options.formulation === undefined ? {} : { formulation: options.formulation }),
    });

    const heuristicStart = performance.now();
    const packed = heuristic(book, tasks);
    const heuristicMilliseconds = performance.now() - heuristicStart;
    // A ratio is only meaningful for a valid packing: an invalid one is a bug to report, not a number.
    const heuristicCostPerHour = validateConfiguration(packed, tasks, options.catalog.types);
    const noPackingCostPerHour = tasks.reduce((s, t) => s + book.reservationPrice(t.demand), 0);

    const optimum = ilp.status === 'optimal' ? ilp.costPerHour : undefined;
    if (optimum !== undefined && heuristicCostPerHour < optimum - 1e-6)
      throw new Error(
        `trial ${trial}: the heuristic ($${heuristicCostPerHour}/h) beats the proven ILP optimum ($${optimum}/h): ILP bug`,
      );
    const result: OptimalityTrial = {
      trial,
      sampleSeed,
      tasks: tasks.length,
      workloads,
      ilpStatus: ilp.status,
      ilpFormulation: ilp.formulation,
      ilpCostPerHour: ilp.costPerHour === undefined ? null : round(ilp.costPerHour),
      ilpLowerBoundCostPerHour:
        ilp.lowerBoundCostPerHour === undefined ? null : round(ilp.lowerBoundCostPerHour),
      ilpInstances: ilp.configuration?.instances.length ?? null,
      ilpSeconds: round(ilp.solveSeconds, 3),
      heuristicCostPerHour: round(heuristicCostPerHour),
      heuristicInstances: packed.instances.length,
      heuristicMilliseconds: round(heuristicMilliseconds, 3),
      noPackingCostPerHour: round(noPackingCostPerHour),
      heuristicRatio: optimum === undefined || optimum <= 0 ? null : round(heuristicCostPerHour / optimum),
      noPackingRatio: optimum === undefined || optimum <= 0 ? null : round(noPackingCostPerHour / optimum),
    };
    trials.push(result);
    options.onTrial?.(result);
  }

  const ratios = trials.flatMap((t) => (t.heuristicRatio === null ? [] : [t.heuristicRatio]));
  const noPacking = trials.flatMap((t) => (t.noPackingRatio === null ? [] : [t.noPackingRatio]));
  const meanRatio = mean(ratios);
  const noPackingRatio = mean(noPacking);
  return {
    meanRatio: meanRatio === null ? null : round(meanRatio),
    maxRatio: ratios.length === 0 ? null : round(Math.max(...ratios)),
    optimalTrials: ratios.length,
    noPackingRatio: noPackingRatio === null ? null : round(noPackingRatio),
    tasksPerTrial: options.tasksPerTrial,
    seed: options.seed,
    timeLimitSeconds: options.timeLimitSeconds,
    totalSeconds: round((Date.now() - startMs) / 1000, 3),
    trials,
  };
}
