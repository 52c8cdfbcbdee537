import { smallMoney } from '../sim/report/format.js';
import type { Settled } from '../sim/run-pool.js';
import type { RunRequest } from '../sim/run-request.js';
import { referenceName } from './arm-catalogs.js';
import type { ArmBuild } from './arms-flags.js';
import type { ArmsInput, ArmsPlan, PlanRun } from './arms-plan.js';
import type { Arm, ArmsReport, FailedRun, LeftOutSeed } from './arms-report.js';
import type { BuildRun } from './build-runs.js';
import { pairedDifferences, type ArmFigures, type PairedDifference } from './paired-arms.js';

/**
 * The runs of `fleetwise bench arms` as planned (arms-plan.ts): the uncapped references first, so that each arm's cap
 * is known, then every (seed, arm), and the report of their paired differences. A run that fails loses its seed, not
 * the bench: the arms are compared on the seeds where every run ended, and the report names the seeds left out.
 */

/**
 * How the runs are carried out, each whatever the others do; `indices[j]` is where the batch's run j stands among all
 * the bench's runs (`armsRunCount`), for the progress.
 */
export interface ArmsExecutors {
  /** This build's runs (worker threads), outcomes in the batch's order. */
  run(batch: readonly RunRequest[], indices: readonly number[]): Promise<Settled<ArmFigures>[]>;
  /** Other builds' runs (subprocesses), outcomes in the batch's order. */
  runOther(batch: readonly BuildRun[], indices: readonly number[]): Promise<Settled<ArmFigures>[]>;
  /** Run `index`, named `label`, is not made: another run of its seed failed, so the seed is left out anyway. */
  skip(index: number, label: string): void;
}

/** A run that failed: its seed, its label, and the error it failed with (a ValidationError for refused input). */
export interface RunFailure {
  readonly seed: number;
  readonly run: string;
  readonly error: Error;
}

/** The report, on the seeds where every run ended, and every run that failed, in the order of the seeds. */
export interface ArmsOutcome {
  readonly report: ArmsReport;
  readonly failures: readonly RunFailure[];
}

/** How many runs the bench makes in all: the references and every (seed, arm). */
export function armsRunCount(input: ArmsInput, plan: ArmsPlan): number {
  return plan.referenceRuns.length + input.seeds.length * input.arms.length;
}

/** A failure as the report keeps it: the run's label, and its error without that label in front. */
export function failedRun(failure: RunFailure): FailedRun {
  const message = failure.error.message;
  const prefix = `${failure.run}: `;
  return { run: failure.run, error: message.startsWith(prefix) ? message.slice(prefix.length) : message };
}

/**
 * Where a --cap-share cap came from, as messages about it name it (a cap no job fits under): the share, the seed's
 * uncapped peak and the cap, rounded, rather than a --cap-dollars-per-hour nobody typed.
 */
export function capShareSource(
  capShare: number,
  seed: number,
  peak: number,
  cap: number,
  reference: string | null,
): string {
  const on = reference === null ? '' : ` (on ${referenceName(reference)})`;
  return `--cap-share ${capShare} × seed ${seed}'s uncapped peak $${smallMoney(peak)}/h${on} = $${smallMoney(cap)}/h`;
}

/** `request` with its $/h cap named by `source` in the messages about it. */
function capNamed(request: RunRequest, source: string): RunRequest {
  const queue = request.queue;
  if (queue?.caps.maxCostPerHour === undefined) return request;
  return {
    ...request,
    queue: { ...queue, caps: { ...queue.caps, sources: { ...queue.caps.sources, maxCostPerHour: source } } },
  };
}

export async function runArms(
  input: ArmsInput,
  plan: ArmsPlan,
  planRun: PlanRun,
  executors: ArmsExecutors,
): Promise<ArmsOutcome> {
  const { seeds, common, arms, builds, capShare } = input;
  const { referenceRuns, referenceCatalog } = plan;
  const failures: RunFailure[] = [];
  /** Indices into `seeds` of the seeds a run of which failed. */
  const lost = new Set<number>();
  const fail = (i: number, run: string, error: Error): void => {
    failures.push({ seed: seeds[i] as number, run, error });
    lost.add(i);
  };

  // The references run reference by reference, seed by seed: run k·seeds + i is seed i's.
  const referenceOutcomes =
    referenceRuns.length === 0
      ? []
      : await executors.run(
          referenceRuns,
          referenceRuns.map((_, j) => j),
        );
  referenceOutcomes.forEach((outcome, j) => {
    if (!outcome.ok) fail(j % seeds.length, referenceRuns[j]?.label ?? '', outcome.error);
  });
  const uncappedPeakByCatalog = Object.fromEntries(
    plan.referenceKeys.map((key, k) => [
      key,
      seeds.map((_, i) => {
        const outcome = referenceOutcomes[k * seeds.length + i];
        return (
          plan.earlierPeaks?.get(key)?.[i] ??
          (outcome?.ok === true ? outcome.value.peakCostPerHour : null) ??
          null
        );
      }),
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
  // Without --cap-share each arm runs under the cap its own flags set, the same on every seed.
  const fixedCaps = (name: string): (number | null)[] => seeds.map(() => plan.fixedCaps[name] ?? null);
  const capBySeedByArm = Object.fromEntries(
    arms.map((a) => [a.name, capShare === null ? fixedCaps(a.name) : capsOn(plan.referenceOf[a.name])]),
  );
  const oneFixedCap = new Set(arms.map((a) => plan.fixedCaps[a.name] ?? null));
  const capBySeed =
    capShare !== null
      ? capsOn(referenceCatalog ?? undefined)
      : seeds.map(() => (oneFixedCap.size === 1 ? ([...oneFixedCap][0] ?? null) : null));

  // Every (seed, arm) has its place in the progress, made or not: the other builds' runs, then this build's.
  const buildArms = arms.filter((a) => builds.has(a.name));
  const hereArms = arms.filter((a) => !builds.has(a.name));
  const buildIndex = (i: number, k: number): number => referenceRuns.length + i * buildArms.length + k;
  const hereIndex = (i: number, k: number): number =>
    referenceRuns.length + seeds.length * buildArms.length + i * hereArms.length + k;
  const label = (i: number, a: Arm): string => `seed ${seeds[i] as number} ${a.name}`;
  // The bench's own flags first: a value-less flag at the end of the user's would take one for its value.
  const argsOf = (i: number, a: Arm): string[] => {
    const cap = capShare === null ? null : (capBySeedByArm[a.name]?.[i] ?? null);
    return [
      '--seed',
      String(seeds[i] as number),
      ...(cap === null ? [] : ['--cap-dollars-per-hour', String(cap)]),
      ...common,
      ...a.args,
    ];
  };
  const figures = new Map<string, ArmFigures>();
  const slot = (i: number, a: Arm): string => `${i}\u0000${a.name}`;

  // The other builds' runs first: they parse their arms' flags only as they start, and a mistake there (which this
  // build cannot check up front) then loses every seed in a second, before any of this build's runs is made.
  const buildBatch: {
    readonly i: number;
    readonly arm: Arm;
    readonly run: BuildRun;
    readonly index: number;
  }[] = [];
  seeds.forEach((_, i) =>
    buildArms.forEach((a, k) => {
      if (lost.has(i)) executors.skip(buildIndex(i, k), label(i, a));
      else
        buildBatch.push({
          i,
          arm: a,
          run: {
            cli: (builds.get(a.name) as ArmBuild).cli,
            args: ['--json', ...argsOf(i, a)],
            label: label(i, a),
          },
          index: buildIndex(i, k),
        });
    }),
  );
  if (buildBatch.length > 0) {
    const outcomes = await executors.runOther(
      buildBatch.map((b) => b.run),
      buildBatch.map((b) => b.index),
    );
    buildBatch.forEach((b, j) => {
      const outcome = outcomes[j];
      if (outcome?.ok === true) figures.set(slot(b.i, b.arm), outcome.value);
      else fail(b.i, b.run.label, outcome?.error ?? new Error('no outcome'));
    });
  }

  // This build's runs, on the seeds no run has failed on yet.
  const hereBatch: {
    readonly i: number;
    readonly arm: Arm;
    readonly request: RunRequest;
    readonly index: number;
  }[] = [];
  seeds.forEach((seed, i) => {
    const planned: (typeof hereBatch)[number][] = [];
    if (!lost.has(i))
      for (const [k, a] of hereArms.entries()) {
        let request: RunRequest;
        try {
          request = planRun(argsOf(i, a), `--arm ${a.name}`, label(i, a));
        } catch (e) {
          fail(i, label(i, a), e instanceof Error ? e : new Error(String(e)));
          break;
        }
        const cap = capBySeedByArm[a.name]?.[i] ?? null;
        const peak = uncappedPeakByCatalog[plan.referenceOf[a.name] ?? '']?.[i] ?? null;
        const key = plan.referenceOf[a.name] ?? null;
        if (capShare !== null && cap !== null && peak !== null)
          request = capNamed(
            request,
            capShareSource(capShare, seed, peak, cap, key === referenceCatalog ? null : key),
          );
        planned.push({ i, arm: a, request, index: hereIndex(i, k) });
      }
    if (lost.has(i)) hereArms.forEach((a, k) => executors.skip(hereIndex(i, k), label(i, a)));
    else hereBatch.push(...planned);
  });
  if (hereBatch.length > 0) {
    const outcomes = await executors.run(
      hereBatch.map((h) => h.request),
      hereBatch.map((h) => h.index),
    );
    hereBatch.forEach((h, j) => {
      const outcome = outcomes[j];
      if (outcome?.ok === true) figures.set(slot(h.i, h.arm), outcome.value);
      else fail(h.i, label(h.i, h.arm), outcome?.error ?? new Error('no outcome'));
    });
  }

  // The seeds where every run ended are compared; every per-seed figure is kept for those alone.
  const kept = seeds.map((_, i) => i).filter((i) => !lost.has(i));
  const keep = <T>(values: readonly T[]): T[] => kept.map((i) => values[i] as T);
  const runs: Record<string, ArmFigures[]> = {};
  for (const a of arms) runs[a.name] = kept.map((i) => figures.get(slot(i, a)) as ArmFigures);
  const baseline = (arms[0] as Arm).name;
  const comparisons: Record<string, PairedDifference[]> = {};
  for (const a of arms.slice(1))
    comparisons[a.name] = pairedDifferences(runs[baseline] ?? [], runs[a.name] ?? []);
  const order = (f: RunFailure): number => seeds.indexOf(f.seed);
  const sorted = failures.map((f, n) => ({ f, n })).sort((x, y) => order(x.f) - order(y.f) || x.n - y.n);
  const leftOut: LeftOutSeed[] = seeds
    .filter((_, i) => lost.has(i))
    .map((seed) => ({
      seed,
      failed: sorted.filter(({ f }) => f.seed === seed).map(({ f }) => failedRun(f)),
    }));
  const report: ArmsReport = {
    seeds: keep(seeds),
    leftOut,
    common,
    arms,
    builds: Object.fromEntries([...builds].map(([name, b]) => [name, b.dir])),
    baseline,
    catalogs: plan.catalogs,
    capShare,
    peaksFrom: input.peaksFrom ?? null,
    referenceCatalog,
    uncappedPeakBySeed: keep(uncappedPeakBySeed),
    capBySeed: keep(capBySeed),
    uncappedPeakByCatalog: Object.fromEntries(
      Object.entries(uncappedPeakByCatalog).map(([key, peaks]) => [key, keep(peaks)]),
    ),
    capBySeedByArm: Object.fromEntries(
      Object.entries(capBySeedByArm).map(([name, caps]) => [name, keep(caps)]),
    ),
    referenceByArm: plan.referenceOf,
    runs,
    comparisons,
  };
  return { report, failures: sorted.map(({ f }) => f) };
}
