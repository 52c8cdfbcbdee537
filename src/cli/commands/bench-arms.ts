import type { Command } from 'commander';
import { constants } from 'node:os';
import { mkdir, writeFile } from 'node:fs/promises';
import { basename, join, resolve } from 'node:path';
import { parse as parseShellWords } from 'shell-quote';
import { z } from 'zod';
import { catalogName, earlierPeaksByCatalog, runCatalog } from '../../bench/arm-catalogs.js';
import { armsHtml } from '../../bench/arms-html.js';
import {
  absoluteReason,
  armCaps,
  armCatalogsText,
  armFlagsText,
  confidenceText,
  differenceText,
  dollarsOrDash,
  isAbsolute,
  metricLabel,
  oneSidedNotes,
  peakShareRange,
  pValueText,
  sameCaps,
  seedDifferences,
  type Arm,
  type ArmsReport,
} from '../../bench/arms-report.js';
import { buildCli, runBuilds, stopBuildRuns, type BuildRun } from '../../bench/build-runs.js';
import { earlierPeaksOf, readEarlierReport } from '../../bench/earlier-peaks.js';
import { pairedDifferences, type ArmFigures, type PairedDifference } from '../../bench/paired-arms.js';
import { ValidationError } from '../../core/validation.js';
import { runRecord } from '../../sim/report/normalize.js';
import { defaultParallelism, runInWorkers } from '../../sim/run-pool.js';
import type { RunRequest } from '../../sim/run-request.js';
import { batchProgress } from '../batch-progress.js';
import { checkOutputDirectory } from '../output-target.js';
import { formatTable } from '../table.js';
import { flagProblems, numberText, positiveInteger } from './sim-flags.js';
import { parseSimulateArgs } from './simulate.js';
import { simulationPlan } from './simulate-plan.js';

/** Raw commander values; validated by `optionsSchema`. */
interface RawArmsOptions {
  readonly seeds: string;
  readonly arm: string[];
  readonly build?: string[];
  readonly common?: string;
  readonly capShare?: string;
  readonly peaksFrom?: string;
  readonly parallel?: string;
  readonly json?: boolean;
  readonly out?: string;
}

const MAX_SEEDS = 200;

/** `4-19`, `4,7,9` or a mix (`1-3,8`): distinct non-negative integers, in the order given. */
export function parseSeedList(text: string): number[] {
  const seeds: number[] = [];
  for (const part of text.split(',')) {
    const m = /^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$/.exec(part);
    if (m === null)
      throw new ValidationError('--seeds', [`"${part.trim()}" is not a seed or a range like 4-19`]);
    const from = Number(m[1]);
    const to = m[2] === undefined ? from : Number(m[2]);
    if (to < from) throw new ValidationError('--seeds', [`range ${from}-${to} runs backwards`]);
    if (seeds.length + (to - from + 1) > MAX_SEEDS)
      throw new ValidationError('--seeds', [`at most ${MAX_SEEDS} seeds`]);
    for (let s = from; s <= to; s++) {
      if (seeds.includes(s)) throw new ValidationError('--seeds', [`seed ${s} is named twice`]);
      seeds.push(s);
    }
  }
  return seeds;
}

const ARM_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]*$/;

/** `name=simulate flags`: the arm's name and its flags split as a shell would (quotes kept together, no operators). */
export function parseArm(text: string): { readonly name: string; readonly args: string[] } {
  const eq = text.indexOf('=');
  const name = eq < 0 ? '' : text.slice(0, eq).trim();
  if (!ARM_NAME.test(name))
    throw new ValidationError('--arm', [
      `"${text}": expected name=flags, e.g. srpt=--queue srpt (a name of letters, digits, _ . -)`,
    ]);
  return { name, args: shellWords(text.slice(eq + 1), `--arm ${name}`) };
}

/** Flags split as a shell would; `$X` stays as written (nothing is expanded) and operators are refused. */
export function shellWords(text: string, source: string): string[] {
  return parseShellWords(text, (key) => `$${key}`).map((word) => {
    if (typeof word === 'string') return word;
    throw new ValidationError(source, [
      `"${text}": only flags and values, no shell operators, globs or comments`,
    ]);
  });
}

/** `--build name=dir`: which arms run another build, as arm name → that build's directory and CLI. */
function armBuilds(
  texts: readonly string[],
  arms: ReadonlySet<string>,
): Map<string, { readonly dir: string; readonly cli: string }> {
  const builds = new Map<string, { readonly dir: string; readonly cli: string }>();
  for (const text of texts) {
    const eq = text.indexOf('=');
    const name = eq < 0 ? '' : text.slice(0, eq).trim();
    const dir = eq < 0 ? '' : text.slice(eq + 1).trim();
    if (!arms.has(name) || dir === '')
      throw new ValidationError('--build', [
        `"${text}": expected arm=dir with an arm given by --arm (${[...arms].join(', ')})`,
      ]);
    if (builds.has(name)) throw new ValidationError('--build', [`arm ${name} is given two builds`]);
    builds.set(name, { dir: resolve(dir), cli: buildCli(dir, `--build ${name}`) });
  }
  return builds;
}

/** Flags the bench sets itself on every run, and so refuses in --common and --arm. */
const BENCH_SET_FLAGS = ['--seed', '--json', '--out', '--parallel'] as const;

function refuseFlags(args: readonly string[], flags: readonly string[], source: string, why: string): void {
  for (const arg of args)
    for (const flag of flags)
      if (arg === flag || arg.startsWith(`${flag}=`)) throw new ValidationError(source, [`${flag}: ${why}`]);
}

const optionsSchema = z.object({
  seeds: z.string().transform((text, ctx) => {
    try {
      return parseSeedList(text);
    } catch (e) {
      ctx.addIssue({
        code: 'custom',
        message: e instanceof ValidationError ? e.problems.join('; ') : String(e),
      });
      return z.NEVER;
    }
  }),
  arm: z.array(z.string()).min(2, 'give at least two arms (the first is the baseline)'),
  build: z.array(z.string()).optional(),
  common: z.string().optional(),
  capShare: numberText(z.number().gt(0, 'must be > 0').max(10, 'must be ≤ 10')).optional(),
  peaksFrom: z.string().min(1).optional(),
  parallel: numberText(positiveInteger).optional(),
  json: z.boolean().optional(),
  out: z.string().min(1).optional(),
});

/** Trace formats generated from the seed; the others (eva, fleetwise, specs) are read from a file as they are. */
const SEEDED_TRACE_FORMATS: ReadonlySet<string> = new Set(['alibaba', 'synthetic', 'success']);

/** Whether the run's `--seed` changes it: the generated trace, the spot market, or the simulated network (run-request.ts). */
export function seedVariesRun(request: RunRequest): boolean {
  return (
    SEEDED_TRACE_FORMATS.has(request.trace.format) ||
    request.spot !== undefined ||
    request.network !== undefined ||
    (request.trace.latencySensitiveShare ?? 0) > 0
  );
}

/** The single run a simulate command line asks for (one scheduler, one value of time), for `source`'s errors. */
function oneRun(args: readonly string[], source: string, label: string): RunRequest {
  const { requests } = simulationPlan(parseSimulateArgs(args, source));
  if (requests.length !== 1)
    throw new ValidationError(source, [
      `asks for ${requests.length} runs; an arm is one scheduler at one value of time`,
    ]);
  // The label names the run in a failure (`seed 5 srpt: … did not finish`).
  return { ...(requests[0] as RunRequest), label };
}

/** The summary line of an arm's peak against the caps, among the metrics' lines. */
const PEAK_LABEL = 'peak ÷ cap';

/**
 * A table per compared arm (per seed: the cap, both arms' cost and the differences of every metric; `--json` has every
 * figure) and a summary line per metric.
 */
export function armsText(report: ArmsReport): string {
  const out: string[] = [];
  const base = report.runs[report.baseline] ?? [];
  for (const arm of report.arms.slice(1)) {
    const runs = report.runs[arm.name] ?? [];
    const differences = report.comparisons[arm.name] ?? [];
    // Arms on different catalogs ran under different caps (each its own catalog's share): a column each.
    const capArms =
      report.capShare === null ? [] : sameCaps(report, arm.name) ? [null] : [report.baseline, arm.name];
    const headers = [
      'seed',
      ...capArms.map((name) => (name === null ? 'cap $/h' : `cap $/h ${name}`)),
      `cost ${report.baseline}`,
      `cost ${arm.name}`,
      ...differences.map((d) => `Δ ${metricLabel(d)}`),
    ];
    const rows = report.seeds.map((seed, i) => [
      String(seed),
      ...capArms.map((name) => dollarsOrDash(armCaps(report, name ?? arm.name)[i])),
      dollarsOrDash(base[i]?.totalCost),
      dollarsOrDash(runs[i]?.totalCost),
      ...differences.map((d) => differenceText(d, seedDifferences(d)[i])),
    ]);
    const catalogs = armCatalogsText(report, arm);
    out.push(
      `${arm.name} against ${report.baseline}: ${armFlagsText(report, arm)}`,
      ...(catalogs === null ? [] : [catalogs]),
      formatTable(headers, rows),
    );
    const peak = peakShareRange(report, arm.name);
    // The figures start in one column: the label column is as wide as its longest label.
    const labelWidth = Math.max(
      ...differences.map((d) => metricLabel(d).length),
      peak === null ? 0 : PEAK_LABEL.length,
    );
    for (const d of differences) {
      const se = d.standardError === null ? '' : ` (SE ${d.standardError.toFixed(2)})`;
      const ci = d.confidence95 === null ? '' : `; 95% CI ${confidenceText(d)}`;
      const p =
        d.tTestP === null && d.signTestP === null
          ? ''
          : `, p ${pValueText(d.tTestP)} (t-test) / ${pValueText(d.signTestP)} (sign test)`;
      out.push(
        `  ${metricLabel(d).padEnd(labelWidth)} mean ${differenceText(d, d.meanPercent)}${se}, ` +
          `${differenceText(d, d.minPercent)} to ${differenceText(d, d.maxPercent)}, lower on ${d.lowerOn} of ${d.seeds}${ci}${p}` +
          (isAbsolute(d) ? ` (${absoluteReason(report, d)}: differences in the metric's units)` : ''),
      );
    }
    for (const note of oneSidedNotes(report, arm)) out.push(`  ${note}`);
    if (peak !== null)
      out.push(
        `  ${PEAK_LABEL.padEnd(labelWidth)} ${(100 * peak.min).toFixed(2)}% to ${(100 * peak.max).toFixed(2)}%`,
      );
    out.push('');
  }
  return `${out.join('\n')}\n`;
}

/**
 * Seed `seed`'s uncapped reference run: the --common flags alone, on `catalog` when it is another than theirs. A cap
 * there (a --config's) would cap it, and so every cap taken from it: refused.
 */
function referenceRun(common: readonly string[], seed: number, catalog: string | undefined): RunRequest {
  const reference = oneRun(
    [...common, ...(catalog === undefined ? [] : ['--catalog', catalog]), '--seed', String(seed)],
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

async function benchArms(raw: RawArmsOptions): Promise<void> {
  const parsed = optionsSchema.safeParse(raw);
  if (!parsed.success) throw new ValidationError('fleetwise bench arms options', flagProblems(parsed.error));
  const o = parsed.data;
  const common = shellWords(o.common ?? '', '--common');
  const arms = o.arm.map(parseArm);
  const names = new Set<string>();
  for (const a of arms) {
    if (names.has(a.name)) throw new ValidationError('--arm', [`two arms are named ${a.name}`]);
    names.add(a.name);
  }
  // Before the runs: a directory that cannot be written would lose them at the end, and making one under /proc never
  // returns.
  if (o.out !== undefined) checkOutputDirectory(o.out, '--out');
  const builds = armBuilds(o.build ?? [], names);
  const why = 'the bench sets it on every run';
  refuseFlags(common, BENCH_SET_FLAGS, '--common', why);
  for (const a of arms) refuseFlags(a.args, BENCH_SET_FLAGS, `--arm ${a.name}`, why);
  const capShare = o.capShare ?? null;
  const saveWhy = 'each run would write it over the one before: save a table with simulate';
  refuseFlags(common, ['--save-colocation-table'], '--common', saveWhy);
  for (const a of arms) refuseFlags(a.args, ['--save-colocation-table'], `--arm ${a.name}`, saveWhy);
  if (capShare !== null) {
    const capWhy = 'with --cap-share the cap is the share of each seed’s uncapped peak';
    refuseFlags(common, ['--cap-dollars-per-hour'], '--common', capWhy);
    for (const a of arms) refuseFlags(a.args, ['--cap-dollars-per-hour'], `--arm ${a.name}`, capWhy);
  }
  if (capShare !== null) {
    const capWhy =
      'with --cap-share the uncapped reference run would be capped by it, and so every seed’s cap';
    refuseFlags(common, ['--cap-instances', '--quota'], '--common', capWhy);
  }
  const seedArgs = (seed: number) => ['--seed', String(seed)];
  // Every arm's flags checked on the first seed before anything runs (another build's, by that build as it runs),
  // and the catalog each arm runs read from its request.
  const first = o.seeds[0] as number;
  const catalogOf = new Map<string, string>();
  const checked = arms
    .filter((arm) => !builds.has(arm.name))
    .map((a) => {
      const request = oneRun(
        [
          ...common,
          ...a.args,
          ...seedArgs(first),
          ...(capShare === null ? [] : ['--cap-dollars-per-hour', '1']),
        ],
        `--arm ${a.name}`,
        a.name,
      );
      catalogOf.set(a.name, runCatalog(request));
      return request;
    });
  // Another build's arm may take flags this build does not know: then it may well be seeded, and its catalog is
  // unknown (with --cap-share it is capped as the --common flags' catalog is).
  const otherSeeded = arms
    .filter((arm) => builds.has(arm.name))
    .map((a) => {
      try {
        const request = oneRun([...common, ...a.args, ...seedArgs(first)], `--arm ${a.name}`, a.name);
        catalogOf.set(a.name, runCatalog(request));
        return seedVariesRun(request);
      } catch {
        return true;
      }
    })
    .some((seeded) => seeded);
  const catalogs = Object.fromEntries(arms.map((a) => [a.name, catalogOf.get(a.name) ?? null]));
  // Seeds that all run the same thing make identical differences: a spread of 0, and nothing learnt from the seeds.
  if (o.seeds.length > 1 && !otherSeeded && !checked.some(seedVariesRun))
    throw new ValidationError('--common', [
      `every seed of --seeds ${o.seeds.join(',')} would be the same run: the seed changes neither the trace ` +
        `(${checked[0]?.trace.format ?? 'this'} traces are fixed; alibaba, synthetic and success are generated from it) ` +
        'nor anything else of these runs (--spot on, --latency-config, --latency-sensitive are seeded): ' +
        'use a generated trace or give a single seed',
    ]);

  if (o.peaksFrom !== undefined && capShare === null)
    throw new ValidationError('--peaks-from', ['needs --cap-share: the peaks are there to set caps']);
  // --cap-share: the uncapped reference is the --common flags alone, on their own catalog and on each other catalog an
  // arm runs, and each arm is capped at the share of its own catalog's peak. The share is how hard the cap holds the
  // workload back; a peak measured on another catalog's prices would hold an arm on dearer instances back harder (at
  // twice the prices, 0.6 of the baseline's peak is 0.3 of its own), and the comparison would mix the catalog with a
  // tighter cap. One dollar cap for every arm is --cap-dollars-per-hour in --common, without --cap-share.
  const needed = new Map<string, string[]>();
  const referenceCatalog = capShare === null ? null : runCatalog(referenceRun(common, first, undefined));
  if (referenceCatalog !== null) {
    needed.set(referenceCatalog, []);
    for (const a of arms) {
      const catalog = catalogs[a.name] ?? referenceCatalog;
      needed.set(catalog, [...(needed.get(catalog) ?? []), a.name]);
    }
  }
  const peaksFrom = o.peaksFrom;
  // The earlier report read once: its reference peaks, then its peaks per catalog.
  const earlierReport =
    peaksFrom === undefined || referenceCatalog === null ? undefined : await readEarlierReport(peaksFrom);
  const earlier =
    peaksFrom === undefined || referenceCatalog === null || earlierReport === undefined
      ? undefined
      : await earlierPeaksByCatalog(
          peaksFrom,
          earlierReport,
          o.seeds,
          earlierPeaksOf(peaksFrom, earlierReport, o.seeds, common),
          common,
          needed,
          referenceCatalog,
        );

  // Uncapped reference runs first, catalog by catalog, so that each arm's cap is known.
  const requests: RunRequest[] = [];
  if (earlier === undefined)
    for (const catalog of needed.keys())
      for (const seed of o.seeds)
        requests.push(referenceRun(common, seed, catalog === referenceCatalog ? undefined : catalog));
  const total = requests.length + o.seeds.length * arms.length;
  const parallel = o.parallel ?? defaultParallelism(total);
  const progress = batchProgress(total, 'bench arms', 'runs');
  const run = async (batch: readonly RunRequest[], offset: number): Promise<ArmFigures[]> => {
    const results = await runInWorkers(batch, parallel, {
      onProgress: (index, fraction) => progress.advance(offset + index, fraction),
      onDone: (index) => progress.done(offset + index, batch[index]?.label ?? ''),
    });
    return results.map((r) => runRecord(r));
  };
  const runOther = (batch: readonly BuildRun[], offset: number): Promise<ArmFigures[]> =>
    runBuilds(batch, parallel, (index) => progress.done(offset + index, batch[index]?.label ?? ''));
  // Stopped by a signal: the other builds' runs are subprocesses, which a signal sent to this process alone (not to
  // its group, as a terminal's Ctrl-C is) would leave running; this build's runs are threads and end with it.
  // A second signal while the runs stop changes nothing: the first decides the exit.
  let stopSignal: NodeJS.Signals | undefined;
  const stopped = (signal: NodeJS.Signals): void => {
    if (stopSignal !== undefined) return;
    stopSignal = signal;
    progress.stop();
    process.stderr.write(`bench arms: stopped by ${signal}\n`);
    const exit = () => process.exit(128 + constants.signals[signal]);
    void stopBuildRuns().then(exit, exit);
  };
  process.on('SIGINT', stopped);
  process.on('SIGTERM', stopped);
  let report: ArmsReport;
  try {
    const uncapped = requests.length === 0 ? [] : await run(requests, 0);
    const uncappedPeakByCatalog = Object.fromEntries(
      [...needed.keys()].map((catalog, k) => [
        catalog,
        o.seeds.map(
          (_, i) => earlier?.get(catalog)?.[i] ?? uncapped[k * o.seeds.length + i]?.peakCostPerHour ?? null,
        ),
      ]),
    );
    const capsOn = (catalog: string | null): (number | null)[] =>
      o.seeds.map((_, i) => {
        const peak = catalog === null ? null : (uncappedPeakByCatalog[catalog]?.[i] ?? null);
        return capShare === null || peak === null ? null : capShare * peak;
      });
    const uncappedPeakBySeed = o.seeds.map((_, i) =>
      referenceCatalog === null ? null : (uncappedPeakByCatalog[referenceCatalog]?.[i] ?? null),
    );
    const capBySeed = capsOn(referenceCatalog);
    const capBySeedByArm = Object.fromEntries(
      arms.map((a) => [a.name, capsOn(catalogs[a.name] ?? referenceCatalog)]),
    );
    // The other builds' runs in subprocesses, then this build's in its worker threads; slots[i][k] is seed i, arm k.
    const armRequests: RunRequest[] = [];
    const buildRuns: BuildRun[] = [];
    const slots: { readonly build: boolean; readonly index: number }[][] = [];
    o.seeds.forEach((seed, i) => {
      slots.push(
        arms.map((a) => {
          const cap = capBySeedByArm[a.name]?.[i] ?? null;
          const args = [
            ...common,
            ...a.args,
            ...seedArgs(seed),
            ...(cap === null ? [] : ['--cap-dollars-per-hour', String(cap)]),
          ];
          const label = `seed ${seed} ${a.name}`;
          const build = builds.get(a.name);
          if (build !== undefined) {
            buildRuns.push({ cli: build.cli, args: [...args, '--json'], label });
            return { build: true, index: buildRuns.length - 1 };
          }
          armRequests.push(oneRun(args, `--arm ${a.name}`, label));
          return { build: false, index: armRequests.length - 1 };
        }),
      );
    });
    // The other builds' runs first: they parse their arms' flags only as they start, and a mistake there (which this
    // build cannot check up front) then ends the bench in a second rather than after all of this build's runs.
    const other = await runOther(buildRuns, requests.length);
    const here = await run(armRequests, requests.length + buildRuns.length);
    const runs: Record<string, ArmFigures[]> = {};
    arms.forEach((a, k) => {
      runs[a.name] = o.seeds.map((_, i) => {
        const slot = slots[i]?.[k] as { build: boolean; index: number };
        return (slot.build ? other : here)[slot.index] as ArmFigures;
      });
    });
    const baseline = (arms[0] as Arm).name;
    const comparisons: Record<string, PairedDifference[]> = {};
    for (const a of arms.slice(1))
      comparisons[a.name] = pairedDifferences(runs[baseline] ?? [], runs[a.name] ?? []);
    report = {
      seeds: o.seeds,
      common,
      arms,
      builds: Object.fromEntries([...builds].map(([name, b]) => [name, b.dir])),
      baseline,
      catalogs,
      capShare,
      peaksFrom: o.peaksFrom ?? null,
      referenceCatalog,
      uncappedPeakBySeed,
      capBySeed,
      uncappedPeakByCatalog,
      capBySeedByArm,
      runs,
      comparisons,
    };
  } finally {
    process.off('SIGINT', stopped);
    process.off('SIGTERM', stopped);
    progress.stop();
  }
  process.stdout.write(o.json === true ? `${JSON.stringify(report)}\n` : armsText(report));
  if (o.out !== undefined) {
    await mkdir(o.out, { recursive: true });
    const json = join(o.out, ARMS_FILES.json);
    const html = join(o.out, ARMS_FILES.html);
    await writeFile(json, `${JSON.stringify(report)}\n`, 'utf8');
    await writeFile(html, armsHtml(report), 'utf8');
    process.stderr.write(`report written: ${json}, ${html}\n`);
  }
}

export const ARMS_FILES = { json: 'arms.json', html: 'arms.html' } as const;

/**
 * `fleetwise bench arms`: run simulate arms on several seeds of a trace and compare each with the first, seed by
 * seed, with the mean difference, its standard error and how many seeds came out lower (COMPARED_METRICS).
 */
export function registerBenchArms(bench: Command): Command {
  return bench
    .command('arms')
    .description(
      'compare simulate arms on several seeds: per-seed differences from the first arm, their mean, standard error and signs',
    )
    .requiredOption(
      '--seeds <list>',
      "each run's --seed: the generated trace's, and the simulated network's and spot market's (e.g. 4-19 or 4,7,9)",
    )
    .requiredOption(
      '--arm <name=flags>',
      'an arm: a name and its simulate flags, e.g. "srpt=--queue srpt --co-start on" (repeatable, at least two; the first is the baseline)',
      (value: string, previous: string[] = []) => [...previous, value],
    )
    .option(
      '--build <arm=dir>',
      'run that arm with the fleetwise built in dir (its dist/cli/main.js, in a subprocess), e.g. a checkout of the commit before a change (repeatable)',
      (value: string, previous: string[] = []) => [...previous, value],
    )
    .option(
      '--common <flags>',
      'simulate flags every arm shares, e.g. "--format alibaba --jobs 1500 --scheduler eva"',
    )
    .option(
      '--cap-share <x>',
      "each seed's --cap-dollars-per-hour is x times the peak $/h of a run of the --common flags alone on that seed (uncapped), on the arm's catalog",
    )
    .option(
      '--peaks-from <arms.json>',
      "with --cap-share: each seed's uncapped peak from an earlier report of the same --common flags, instead of running them again (on each catalog the arms run, which it must have measured)",
    )
    .option('--parallel <n>', 'runs at once (default: available cores)')
    .option('--json', 'print one JSON object instead of tables')
    .option(
      '--out <dir>',
      'also write arms.json and arms.html (charts of the per-seed differences) into this directory',
    )
    .action(async (raw: RawArmsOptions) => {
      await benchArms(raw);
    });
}
