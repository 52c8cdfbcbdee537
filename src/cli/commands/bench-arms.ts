import type { Command } from 'commander';
import { constants } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';
import { armBuilds, parseArms, parseSeedList, refuseArmFlags, shellWords } from '../../bench/arms-flags.js';
import { armsHtml } from '../../bench/arms-html.js';
import { planArms } from '../../bench/arms-plan.js';
import {
  absoluteReason,
  armCaps,
  armCatalogsText,
  armFlagsText,
  capsShown,
  confidenceText,
  differenceText,
  dollarsOrDash,
  failedRunText,
  isAbsolute,
  leftOutText,
  metricLabel,
  oneSidedNotes,
  peakShareRange,
  pValueText,
  sameCaps,
  seedDifferences,
  type ArmsReport,
} from '../../bench/arms-report.js';
import {
  armsRunCount,
  failedRun,
  runArms,
  type ArmsOutcome,
  type RunFailure,
} from '../../bench/arms-runs.js';
import { killBuildRunsNow, runBuilds, stopBuildRuns, type BuildRun } from '../../bench/build-runs.js';
import { ignoreStderrErrors, onBenchStopSignals } from './bench-process.js';
import type { ArmFigures } from '../../bench/paired-arms.js';
import { ValidationError } from '../../core/validation.js';
import { runRecord } from '../../sim/report/normalize.js';
import { defaultParallelism, settleInWorkers, type Settled } from '../../sim/run-pool.js';
import type { RunRequest } from '../../sim/run-request.js';
import type { OutputFileError } from '../atomic-file.js';
import { FailureWithLines } from '../client-errors.js';
import { batchProgress } from '../batch-progress.js';
import { writeOutputFiles } from '../output-files.js';
import { checkOutputDirectory } from '../output-target.js';
import { formatTable } from '../table.js';
import { flagProblems, numberText, positiveInteger } from './sim-flags.js';
import { parseSimulateArgs } from './simulate.js';
import { simulationPlan, type SimulationPlan } from './simulate-plan.js';
import { SIMULATE_OPTIONS_SOURCE } from './simulate-options.js';

/**
 * `fleetwise bench arms`: its flags (read in bench/arms-flags.ts), what it runs (bench/arms-plan.ts, with simulate's
 * own planning of each run), the runs (bench/arms-runs.ts) in worker threads and other builds' subprocesses with the
 * progress on stderr, and the report as tables, JSON and a page.
 */

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

/**
 * What a simulate command line asks for, its mistakes named by `source`: a value simulate's planning refuses (`--queue
 * sprt`) as much as a flag it cannot parse.
 */
export function checkedSimulatePlan(args: readonly string[], source: string): SimulationPlan {
  const parsed = parseSimulateArgs(args, source);
  try {
    return simulationPlan(parsed);
  } catch (e) {
    // A file's or a flag's own problems keep their name (the file, with its lines).
    if (e instanceof ValidationError && e.source === SIMULATE_OPTIONS_SOURCE)
      throw new ValidationError(source, e.problems);
    throw e;
  }
}

/** The single run a simulate command line asks for (one scheduler, one value of time), for `source`'s errors. */
export function planSimulateRun(args: readonly string[], source: string, label: string): RunRequest {
  const { requests } = checkedSimulatePlan(args, source);
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
  const left = leftOutText(report);
  // An error may run over several lines (another build's stderr): they stay under their run.
  if (left !== null) out.push(left.lead, ...left.failed.map((f) => `  ${f.replace(/\n/g, '\n    ')}`), '');
  const base = report.runs[report.baseline] ?? [];
  for (const arm of report.arms.slice(1)) {
    const runs = report.runs[arm.name] ?? [];
    const differences = report.comparisons[arm.name] ?? [];
    // Arms on different catalogs or at other prices ran under different caps (each its own reference's share): a
    // column each.
    const capArms = !capsShown(report, arm.name)
      ? []
      : sameCaps(report, arm.name)
        ? [null]
        : [report.baseline, arm.name];
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

async function benchArms(raw: RawArmsOptions): Promise<void> {
  const parsed = optionsSchema.safeParse(raw);
  if (!parsed.success) throw new ValidationError('fleetwise bench arms options', flagProblems(parsed.error));
  const o = parsed.data;
  const common = shellWords(o.common ?? '', '--common');
  const arms = parseArms(o.arm);
  // Before the runs: a directory that cannot be written would lose them at the end, and making one under /proc never
  // returns.
  if (o.out !== undefined) checkOutputDirectory(o.out, '--out');
  const builds = armBuilds(o.build ?? [], arms);
  const capShare = o.capShare ?? null;
  refuseArmFlags(common, arms, capShare);
  const input = { seeds: o.seeds, common, arms, builds, capShare, peaksFrom: o.peaksFrom };
  const plan = await planArms(input, planSimulateRun, checkedSimulatePlan);

  const total = armsRunCount(input, plan);
  const parallel = o.parallel ?? defaultParallelism(total);
  // Its progress cannot fail it (a reader of `2>&1 | head` gone), and however it exits no other build's run
  // outlives it.
  ignoreStderrErrors();
  process.on('exit', killBuildRunsNow);
  const progress = batchProgress(total, 'bench arms', 'runs');
  // A failed run's progress line says so; the report names its error.
  const settled = (label: string | undefined, ok: boolean): string =>
    `${label ?? ''}${ok ? '' : ' (failed)'}`;
  const run = async (
    batch: readonly RunRequest[],
    indices: readonly number[],
  ): Promise<Settled<ArmFigures>[]> => {
    const at = (index: number): number => indices[index] as number;
    const outcomes = await settleInWorkers(batch, parallel, {
      onProgress: (index, fraction) => progress.advance(at(index), fraction),
      onDone: (index) => progress.done(at(index), settled(batch[index]?.label, true)),
      onFailed: (index) => progress.done(at(index), settled(batch[index]?.label, false)),
    });
    return outcomes.map((o) => (o.ok ? { ok: true, value: runRecord(o.value) } : o));
  };
  const runOther = (batch: readonly BuildRun[], indices: readonly number[]): Promise<Settled<ArmFigures>[]> =>
    runBuilds(batch, parallel, (index, outcome) =>
      progress.done(indices[index] as number, settled(batch[index]?.label, outcome.ok)),
    );
  // A run not made still counts as done, or the time left would wait for it.
  const skip = (index: number, label: string): void => progress.done(index, `${label} (not run)`);
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
  const stopListening = onBenchStopSignals(stopped);
  let outcome: ArmsOutcome;
  try {
    outcome = await runArms(input, plan, planSimulateRun, { run, runOther, skip });
  } finally {
    stopListening();
    progress.stop();
  }
  const { report, failures } = outcome;
  if (report.seeds.length === 0) throw noSeedLeft(failures);
  // Files first: a reader of stdout gone (`| head`) ends the process at its next write (main.ts), files unwritten.
  // Both or neither; a failed write (a full disk) loses nothing else: the report still goes to stdout, then the
  // failure ends the command.
  let unwritten: OutputFileError | undefined;
  if (o.out !== undefined) {
    const files = [
      { path: join(o.out, ARMS_FILES.json), text: `${JSON.stringify(report)}\n`, flag: '--out' },
      { path: join(o.out, ARMS_FILES.html), text: armsHtml(report), flag: '--out' },
    ];
    unwritten = writeOutputFiles(files, [{ path: o.out, flag: '--out' }]);
    if (unwritten === undefined)
      process.stderr.write(`report written: ${files.map((f) => f.path).join(', ')}\n`);
  }
  process.stdout.write(o.json === true ? `${JSON.stringify(report)}\n` : armsText(report));
  if (unwritten !== undefined) throw unwritten;
  // A comparison on fewer seeds than asked is no success: the report is out, and the exit says some runs failed.
  if (failures.length > 0)
    throw new FailureWithLines(
      leftOutText(report)?.lead ?? `${failures.length} runs failed`,
      failures.map((f) => failedRunText(failedRun(f))),
      failures[0]?.error,
    );
}

/**
 * Every seed lost a run, so nothing can be compared: one failure as it is (a run refused as bad input exits 2),
 * several named one a line, as bad input when every one is (a cap no job fits under on every seed).
 */
function noSeedLeft(failures: readonly RunFailure[]): Error {
  const [only] = failures;
  if (only !== undefined && failures.length === 1) return only.error;
  const lines = failures.map((f) => failedRunText(failedRun(f)));
  const headline = `every seed lost a run: nothing to compare (${failures.length} runs failed)`;
  return failures.every((f) => f.error instanceof ValidationError)
    ? new ValidationError(headline, lines)
    : new FailureWithLines(headline, lines, only?.error);
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
