import { basename } from 'node:path';
import type { PriceOverrides } from '../core/catalog.js';
import { ValidationError } from '../core/validation.js';
import { loadRequestCatalog, loadRequestTrace, networkMatters, type RunRequest } from '../sim/run-request.js';
import type { Trace } from '../world/trace.js';
import { catalogName, earlierPeaksByCatalog, referenceKey, runCatalog } from './arm-catalogs.js';
import type { ArmBuild } from './arms-flags.js';
import type { Arm } from './arms-report.js';
import { earlierPeaksOf, readEarlierReport } from './earlier-peaks.js';

/**
 * What `fleetwise bench arms` will run, decided before any run starts: every arm's flags checked on the first seed,
 * the catalog and prices each arm runs, and with `--cap-share` the uncapped reference runs its caps are shares of (or
 * their peaks from an earlier report).
 */

/**
 * The one run that simulate flags ask for (one scheduler at one value of time): `source` names the flags in errors,
 * `label` names the run. The CLI's is simulate's own planning (bench-arms.ts).
 */
export type PlanRun = (args: readonly string[], source: string, label: string) => RunRequest;
/** Simulate's check of a command line (its flags parsed, its runs planned): a ValidationError naming `source`. */
export type ParseFlags = (args: readonly string[], source: string) => unknown;

/** The bench's flags, read and checked (arms-flags.ts). */
export interface ArmsInput {
  readonly seeds: readonly number[];
  readonly common: readonly string[];
  readonly arms: readonly Arm[];
  /** The arms run with another build (`--build`). */
  readonly builds: ReadonlyMap<string, ArmBuild>;
  readonly capShare: number | null;
  readonly peaksFrom: string | undefined;
}

export interface ArmsPlan {
  /** The catalog file each arm's runs take (absolute); null for another build's arm this build cannot read. */
  readonly catalogs: Readonly<Record<string, string | null>>;
  /** With --cap-share: the catalog the --common flags alone run (absolute); else null. */
  readonly referenceCatalog: string | null;
  /** With --cap-share: per arm, the reference its caps are shares of (`referenceKey`); else empty. */
  readonly referenceOf: Readonly<Record<string, string>>;
  /** With --cap-share: every reference, `referenceCatalog` first. */
  readonly referenceKeys: readonly string[];
  /** The uncapped reference runs, reference by reference and seed by seed; none with --peaks-from. */
  readonly referenceRuns: readonly RunRequest[];
  /** With --peaks-from: each reference's peaks, per seed. */
  readonly earlierPeaks: ReadonlyMap<string, readonly number[]> | undefined;
  /**
   * Without --cap-share: per arm, the $/h cap its runs take from its flags (a --cap-dollars-per-hour in --common, a
   * --config's caps.maxCostPerHour); null when they set none, or for another build's arm this build cannot read.
   * Empty with --cap-share, which sets every arm's caps itself.
   */
  readonly fixedCaps: Readonly<Record<string, number | null>>;
}

/** Trace formats generated from the seed; the others (eva, fleetwise, specs) are read from a file as they are. */
const SEEDED_TRACE_FORMATS: ReadonlySet<string> = new Set(['alibaba', 'synthetic', 'success']);

/**
 * Whether the run's `--seed` changes it: the generated trace, the spot market, or the simulated network
 * (run-request.ts). `trace`: the request's, when already loaded.
 */
export function seedVariesRun(request: RunRequest, trace?: Trace): boolean {
  if (SEEDED_TRACE_FORMATS.has(request.trace.format) || request.spot !== undefined) return true;
  // A file trace is read as it is, but a network its jobs declare is drawn from the seed (a small file to read).
  return networkMatters(request, trace ?? loadRequestTrace(request, loadRequestCatalog(request)));
}

/**
 * The bench's own flags go first on every run's command line: after the user's, a value-less flag at the end of theirs
 * (`--arm 'b=--queue'`) would take the bench's flag for its value, and simulate would blame a stray argument.
 */
const seedArgs = (seed: number): string[] => ['--seed', String(seed)];

/** What commander says of a required option missing (program.ts `checkRequiredOptionsLast`). */
const MISSING_REQUIRED = /^required option '[^']+' not specified$/;

/** A $/hour cap to check flags that need one under: the arm's own, or the bench's (--cap-share), is the real one. */
const SOME_DOLLAR_CAP = ['--cap-dollars-per-hour', '1'];

/**
 * --common's own mistakes (a flag simulate does not know, a value missing at its end) refused as --common's: in an
 * arm's run the arm's first flag would be taken for that missing value, and the arm blamed. A required flag it leaves
 * to the arms (--scheduler) is no mistake, nor a flag that needs a $/hour cap (--admit-by): checked under one, since
 * each arm may give its own and --cap-share gives every arm one (a run left without any is refused as the arm plans).
 */
function checkCommonFlags(common: readonly string[], seed: number, parseFlags: ParseFlags): void {
  try {
    parseFlags([...seedArgs(seed), ...SOME_DOLLAR_CAP, ...common], '--common');
  } catch (e) {
    if (e instanceof ValidationError && e.problems.every((p) => MISSING_REQUIRED.test(p))) return;
    throw e;
  }
}

/**
 * The simulate flags that act only under a $/hour cap: uncapped they change nothing, and simulate refuses them. Each
 * takes a value.
 */
const DOLLAR_CAP_FLAGS: readonly string[] = ['--admit-by'];

/** `args` without the flags that act only under a $/hour cap, in either form (`--admit-by x`, `--admit-by=x`). */
function withoutDollarCapFlags(args: readonly string[]): string[] {
  const kept: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    if (DOLLAR_CAP_FLAGS.includes(arg))
      i++; // and its value
    else if (!DOLLAR_CAP_FLAGS.some((flag) => arg.startsWith(`${flag}=`))) kept.push(arg);
  }
  return kept;
}

/**
 * Seed `seed`'s uncapped reference run: the --common flags alone, on `catalog` when it is another than theirs,
 * without those that act only under the $/hour cap the arms run with (--admit-by): uncapped they would change nothing
 * and be refused. A cap there (a --config's) would cap it, and so every cap taken from it: refused.
 */
function referenceRun(
  planRun: PlanRun,
  common: readonly string[],
  seed: number,
  catalog: string | undefined,
): RunRequest {
  // The arm's catalog after the --common flags: it is the one the reference runs, whatever theirs.
  const reference = planRun(
    [
      ...seedArgs(seed),
      ...withoutDollarCapFlags(common),
      ...(catalog === undefined ? [] : ['--catalog', catalog]),
    ],
    catalog === undefined ? '--common' : `--common on ${catalogName(catalog)}`,
    `seed ${seed} uncapped${catalog === undefined ? '' : ` on ${basename(catalog)}`}`,
  );
  if (reference.queue?.caps.maxCostPerHour !== undefined)
    throw new ValidationError('--common', [
      `--cap-share sets each seed's cap from an uncapped run, but --common caps it at $${reference.queue.caps.maxCostPerHour}/h ` +
        '(a --config with caps.maxCostPerHour): leave the cap out of the config',
    ]);
  const { maxInstances, quotas } = reference.queue?.caps ?? {};
  if (maxInstances !== undefined || (quotas?.length ?? 0) > 0)
    throw new ValidationError('--common', [
      `--cap-share sets each seed's cap from an uncapped run, but --common caps it ` +
        (maxInstances !== undefined ? `at ${maxInstances} instances` : 'with quotas') +
        ' (a --config with caps.maxInstances or caps.quotas): leave those caps out of the config',
    ]);
  return reference;
}

/** The simulate flags naming a file whose caps.maxCostPerHour caps the run. */
const CAP_FILE_FLAGS = ['--config', '--queue-config'] as const;

/**
 * With --cap-share the bench sets each run's $/h cap (`--cap-dollars-per-hour`, which simulate lays over a file's):
 * an arm whose own --config or --queue-config sets one would run under the bench's instead, unseen, and is refused.
 */
function refuseOwnDollarCap(arm: Arm, uncapped: RunRequest | undefined): void {
  const caps = uncapped?.queue?.caps;
  if (caps?.maxCostPerHour === undefined) return;
  throw new ValidationError(`--arm ${arm.name}`, [
    `${caps.sources?.maxCostPerHour ?? `caps.maxCostPerHour (${caps.maxCostPerHour})`}: with --cap-share the bench ` +
      "caps each run at the share of its seed's uncapped peak, which would replace this cap: leave the cap out of " +
      'the file, or leave out --cap-share to run each arm under its own cap',
  ]);
}

/** A reference: the catalog it runs, the prices laid over it, and the arms capped at shares of its peaks. */
interface Reference {
  readonly catalog: string;
  /** Set when they are an arm's own, not the --common flags': the reference then runs at them. */
  readonly ownPrices?: { readonly overrides: PriceOverrides | undefined };
  readonly arms: string[];
}

/** `request` at `prices` instead of its own, named by the arm whose prices they are. */
function atPrices(request: RunRequest, prices: PriceOverrides | undefined, arm: string): RunRequest {
  const { priceOverrides: _own, ...unpriced } = request;
  return {
    ...unpriced,
    ...(prices === undefined ? {} : { priceOverrides: prices }),
    label: `${request.label ?? ''} at ${arm}’s prices`,
  };
}

/** Check every arm and decide what runs (module comment); refuses what cannot be run or compared, before any run. */
export async function planArms(
  input: ArmsInput,
  planRun: PlanRun,
  parseFlags: ParseFlags,
): Promise<ArmsPlan> {
  const { seeds, common, arms, builds, capShare, peaksFrom } = input;
  // Every arm's flags checked on the first seed before anything runs (another build's, by that build as it runs),
  // and the catalog and prices each arm runs read from its request.
  const first = seeds[0] as number;
  // This build reads --common when it runs an arm or the uncapped references.
  if (capShare !== null || arms.some((arm) => !builds.has(arm.name)))
    checkCommonFlags(common, first, parseFlags);
  const armRuns = new Map<string, RunRequest>();
  const checked = arms
    .filter((arm) => !builds.has(arm.name))
    .map((a) => {
      const request = planRun(
        [
          ...seedArgs(first),
          ...(capShare === null ? [] : ['--cap-dollars-per-hour', '1']),
          ...common,
          ...a.args,
        ],
        `--arm ${a.name}`,
        a.name,
      );
      armRuns.set(a.name, request);
      return request;
    });
  // Another build's arm may take flags this build does not know: then it may well be seeded, and its catalog and
  // prices are unknown (with --cap-share it is capped as the --common flags alone run).
  const otherSeeded = arms
    .filter((arm) => builds.has(arm.name))
    .map((a) => {
      try {
        const request = planRun([...seedArgs(first), ...common, ...a.args], `--arm ${a.name}`, a.name);
        armRuns.set(a.name, request);
        return seedVariesRun(request);
      } catch {
        return true;
      }
    })
    .some((seeded) => seeded);
  // An arm as it would run without the bench's cap (checked above with it, as it runs): its own flags' cap. Only a
  // file of its own can set one (its --cap-dollars-per-hour is refused): an arm naming none is not planned again.
  const uncappedArmRun = (a: Arm): RunRequest | undefined => {
    if (!a.args.some((arg) => CAP_FILE_FLAGS.some((flag) => arg === flag || arg.startsWith(`${flag}=`))))
      return undefined;
    try {
      return planRun([...seedArgs(first), ...common, ...a.args], `--arm ${a.name}`, a.name);
    } catch {
      // Flags that need a cap to be taken set none of their own.
      return undefined;
    }
  };
  const catalogs = Object.fromEntries(
    arms.map((a) => {
      const request = armRuns.get(a.name);
      return [a.name, request === undefined ? null : runCatalog(request)];
    }),
  );
  // Seeds that all run the same thing make identical differences: a spread of 0, and nothing learnt from the seeds.
  if (seeds.length > 1 && !otherSeeded && !checked.some((request) => seedVariesRun(request)))
    throw new ValidationError('--common', [
      `every seed of --seeds ${seeds.join(',')} would be the same run: the seed changes neither the trace ` +
        `(${checked[0]?.trace.format ?? 'this'} traces are fixed; alibaba, synthetic and success are generated from it) ` +
        'nor anything else of these runs (--spot on, --latency-config, --latency-sensitive and jobs declaring a network are seeded): ' +
        'use a generated trace or give a single seed',
    ]);
  if (peaksFrom !== undefined && capShare === null)
    throw new ValidationError('--peaks-from', ['needs --cap-share: the peaks are there to set caps']);
  if (capShare === null)
    return {
      catalogs,
      referenceCatalog: null,
      referenceOf: {},
      referenceKeys: [],
      referenceRuns: [],
      earlierPeaks: undefined,
      fixedCaps: Object.fromEntries(
        arms.map((a) => [a.name, armRuns.get(a.name)?.queue?.caps.maxCostPerHour ?? null]),
      ),
    };

  // --cap-share: the uncapped reference is the --common flags alone, on their own catalog and on each other catalog an
  // arm runs, at each other price an arm's runs take, and each arm is capped at the share of its own reference's peak.
  // The share is how hard the cap holds the workload back; a peak measured at other prices would hold an arm on dearer
  // instances back harder (at twice the prices, 0.6 of the baseline's peak is 0.3 of its own), and the comparison would
  // mix the prices with a tighter cap. One dollar cap for every arm is --cap-dollars-per-hour in --common, without
  // --cap-share. Each (catalog, seed) is planned once, whatever prices its runs then take.
  const planned = new Map<string, RunRequest>();
  const plannedReference = (catalog: string | undefined, seed: number): RunRequest => {
    const key = `${catalog ?? ''}\u0000${seed}`;
    const known = planned.get(key);
    if (known !== undefined) return known;
    const request = referenceRun(planRun, common, seed, catalog);
    planned.set(key, request);
    return request;
  };
  const firstReference = plannedReference(undefined, first);
  // The --common flags cap nothing (the reference says so), but an arm's own file may.
  for (const a of arms) refuseOwnDollarCap(a, builds.has(a.name) ? armRuns.get(a.name) : uncappedArmRun(a));
  const commonPrices = firstReference.priceOverrides;
  const referenceCatalog = runCatalog(firstReference);
  const references = new Map<string, Reference>([
    [referenceCatalog, { catalog: referenceCatalog, arms: [] }],
  ]);
  const referenceOf: Record<string, string> = {};
  for (const a of arms) {
    const catalog = catalogs[a.name] ?? referenceCatalog;
    const request = armRuns.get(a.name);
    const prices = request === undefined ? commonPrices : request.priceOverrides;
    const key = referenceKey(catalog, prices, commonPrices);
    referenceOf[a.name] = key;
    const reference = references.get(key);
    if (reference !== undefined) reference.arms.push(a.name);
    else
      references.set(key, {
        catalog,
        ...(key === catalog ? {} : { ownPrices: { overrides: prices } }),
        arms: [a.name],
      });
  }
  // The earlier report read once: its reference peaks, then its peaks per reference.
  const earlierReport = peaksFrom === undefined ? undefined : await readEarlierReport(peaksFrom);
  const earlierPeaks =
    peaksFrom === undefined
      ? undefined
      : await earlierPeaksByCatalog(
          peaksFrom,
          earlierReport,
          seeds,
          earlierPeaksOf(peaksFrom, earlierReport, seeds, common),
          common,
          new Map([...references].map(([key, r]) => [key, r.arms])),
          referenceCatalog,
        );
  const referenceRuns: RunRequest[] = [];
  if (earlierPeaks === undefined)
    for (const { catalog, ownPrices, arms: capped } of references.values())
      for (const seed of seeds) {
        const request = plannedReference(catalog === referenceCatalog ? undefined : catalog, seed);
        referenceRuns.push(
          ownPrices === undefined ? request : atPrices(request, ownPrices.overrides, capped[0] ?? ''),
        );
      }
  return {
    catalogs,
    referenceCatalog,
    referenceOf,
    referenceKeys: [...references.keys()],
    referenceRuns,
    earlierPeaks,
    fixedCaps: {},
  };
}
