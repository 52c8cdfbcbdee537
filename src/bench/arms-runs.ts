import type { RunRequest } from '../sim/run-request.js';
import type { ArmsInput, ArmsPlan, PlanRun } from './arms-plan.js';
import type { Arm, ArmsReport } from './arms-report.js';
import type { BuildRun } from './build-runs.js';
import { pairedDifferences, type ArmFigures, type PairedDifference } from './paired-arms.js';

/**
 * The runs of `fleetwise bench arms` as planned (arms-plan.ts): the uncapped references first, so that each arm's cap
 * is known, then every (seed, arm), and the report of their paired differences.
 */

/** How the runs are carried out; `offset` is where the batch's first run stands among all the bench's runs. */
export interface ArmsExecutors {
  /** This build's runs (worker threads), figures in the batch's order. */
  run(batch: readonly RunRequest[], offset: number): Promise<ArmFigures[]>;
  /** Other builds' runs (subprocesses), figures in the batch's order. */
  runOther(batch: readonly BuildRun[], offset: number): Promise<ArmFigures[]>;
}

/** How many runs the bench makes in all: the references and every (seed, arm). */
export function armsRunCount(input: ArmsInput, plan: ArmsPlan): number {
  return plan.referenceRuns.length + input.seeds.length * input.arms.length;
}

export async function runArms(
  input: ArmsInput,
  plan: ArmsPlan,
  planRun: PlanRun,
  executors: ArmsExecutors,
): Promise<ArmsReport> {
  const { seeds, common, arms, builds, capShare } = input;
  const { referenceRuns, referenceCatalog } = plan;
  const uncapped = referenceRuns.length === 0 ? [] : await executors.run(referenceRuns, 0);
  const uncappedPeakByCatalog = Object.fromEntries(
    plan.referenceKeys.map((key, k) => [
      key,
      seeds.map(
        (_, i) => plan.earlierPeaks?.get(key)?.[i] ?? uncapped[k * seeds.length + i]?.peakCostPerHour ?? null,
      ),
    ]),
  );
  const capsOn = (key: string | undefined): (number | null)[] =>
    seeds.map((_, i) => {
      const peak = key === undefined ? null : (uncappedPeakByCatalog[key]?.[i] ?? null);
      return capShare === null || peak === null ? null : capShare * peak;
    });
  const uncappedPeakBySeed = seeds.map((_, i) =>
    referenceCatalog === null ? null : (uncappedPeakByCatalog[referenceCatalog]?.[i] ?? null),
  );
  const capBySeed = capsOn(referenceCatalog ?? undefined);
  const capBySeedByArm = Object.fromEntries(arms.map((a) => [a.name, capsOn(plan.referenceOf[a.name])]));
  // The other builds' runs in subprocesses, then this build's in its worker threads; slots[i][k] is seed i, arm k.
  const armRequests: RunRequest[] = [];
  const buildRuns: BuildRun[] = [];
  const slots: { readonly build: boolean; readonly index: number }[][] = [];
  seeds.forEach((seed, i) => {
    slots.push(
      arms.map((a) => {
        const cap = capBySeedByArm[a.name]?.[i] ?? null;
        // The bench's own flags first: a value-less flag at the end of the user's would take one for its value.
        const args = [
          '--seed',
          String(seed),
          ...(cap === null ? [] : ['--cap-dollars-per-hour', String(cap)]),
          ...common,
          ...a.args,
        ];
        const label = `seed ${seed} ${a.name}`;
        const build = builds.get(a.name);
        if (build !== undefined) {
          buildRuns.push({ cli: build.cli, args: ['--json', ...args], label });
          return { build: true, index: buildRuns.length - 1 };
        }
        armRequests.push(planRun(args, `--arm ${a.name}`, label));
        return { build: false, index: armRequests.length - 1 };
      }),
    );
  });
  // The other builds' runs first: they parse their arms' flags only as they start, and a mistake there (which this
  // build cannot check up front) then ends the bench in a second rather than after all of this build's runs.
  const other = await executors.runOther(buildRuns, referenceRuns.length);
  const here = await executors.run(armRequests, referenceRuns.length + buildRuns.length);
  const runs: Record<string, ArmFigures[]> = {};
  arms.forEach((a, k) => {
    runs[a.name] = seeds.map((_, i) => {
      const slot = slots[i]?.[k] as { build: boolean; index: number };
      return (slot.build ? other : here)[slot.index] as ArmFigures;
    });
  });
  const baseline = (arms[0] as Arm).name;
  const comparisons: Record<string, PairedDifference[]> = {};
  for (const a of arms.slice(1))
    comparisons[a.name] = pairedDifferences(runs[baseline] ?? [], runs[a.name] ?? []);
  return {
    seeds,
    common,
    arms,
    builds: Object.fromEntries([...builds].map(([name, b]) => [name, b.dir])),
    baseline,
    catalogs: plan.catalogs,
    capShare,
    peaksFrom: input.peaksFrom ?? null,
    referenceCatalog,
    uncappedPeakBySeed,
    capBySeed,
    uncappedPeakByCatalog,
    capBySeedByArm,
    referenceByArm: plan.referenceOf,
    runs,
    comparisons,
  };
}
