import { mkdtempSync, rmSync } from 'node:fs';
import { constants, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { Command } from 'commander';
import { z } from 'zod';
import {
  benchController,
  CONTROLLER_BENCH_DEFAULTS,
  CONTROLLER_BENCH_TARGETS,
  type ControllerBenchResult,
  type ControllerBenchTarget,
  type TargetName,
} from '../../bench/controller-bench.js';
import {
  killRunningBenchControllersNow,
  stopRunningBenchControllers,
} from '../../bench/bench-controller-process.js';
import { ValidationError } from '../../core/validation.js';
import { checkOutputDirectory } from '../output-target.js';
import { formatTable } from '../table.js';
import { benchProgress, onBenchStopSignals } from './bench-process.js';
import { flagName, flagProblems, numberText, positiveInteger } from './sim-flags.js';

const count = (max: number) =>
  numberText(positiveInteger.max(max, `must be ≤ ${max.toLocaleString('en-US')}`));
const optionsSchema = z.object({
  submissions: count(100_000),
  waiting: count(100_000),
  running: count(10_000),
  workers: count(10_000),
  finished: count(1_000_000),
  concurrency: count(256),
  rounds: count(100),
  heartbeatSeconds: numberText(z.number().positive('must be > 0').max(600, 'must be ≤ 600')),
  keep: z.boolean().optional(),
  cpuProf: z.string().min(1).optional(),
  json: z.boolean().optional(),
});

/**
 * `fleetwise bench controller`: a real controller (local provider, SQLite, HTTP API) under submissions, rounds,
 * finished jobs and heartbeats from workers simulated over the worker protocol (src/bench/controller-bench.ts).
 */
export function registerBenchController(bench: Command): Command {
  const d = CONTROLLER_BENCH_DEFAULTS;
  return bench
    .command('controller')
    .description(
      'load a real controller (local provider, SQLite, HTTP API) with workers simulated over the worker protocol: submissions, rounds, memory, heartbeats',
    )
    .option('--submissions <n>', 'jobs submitted while rounds run (measured)', String(d.submissions))
    .option('--waiting <n>', 'jobs queued while rounds are measured', String(d.waiting))
    .option('--running <n>', 'jobs running while rounds are measured', String(d.running))
    .option('--workers <n>', 'simulated workers heartbeating (one job each)', String(d.workers))
    .option('--finished <n>', 'jobs run to completion before the memory is read', String(d.finished))
    .option('--concurrency <n>', 'clients submitting at once', String(d.concurrency))
    .option('--rounds <n>', 'rounds measured with the queue full', String(d.rounds))
    .option(
      '--heartbeat-seconds <s>',
      'how long the heartbeats are measured',
      String(d.heartbeatWindowSeconds),
    )
    .option('--keep', "keep the controllers' state directories (their controller.log) and print where")
    .option('--cpu-prof <dir>', "write the controllers' CPU profiles (node --cpu-prof) into this directory")
    .option('--json', 'print one JSON object instead of a table')
    .action(async (raw: Record<string, unknown>) => {
      const parsed = optionsSchema.safeParse(raw);
      if (!parsed.success)
        throw new ValidationError('fleetwise bench controller options', flagProblems(parsed.error));
      const opts = parsed.data;
      // Checked before the controllers start: node writes no profile where it cannot, and the bench would end as if
      // it had.
      if (opts.cpuProf !== undefined) checkOutputDirectory(opts.cpuProf, '--cpu-prof');
      const workDir = mkdtempSync(join(tmpdir(), 'fleetwise-bench-controller-'));
      const progress = benchProgress('bench controller');
      // Set where the bench says it keeps the state directories (--keep, a failure whose error points at a log).
      let keepWorkDir = false;
      // However the process ends while it can still run code (an uncaught error, a `process.exit` elsewhere), no
      // controller outlives it and its state goes; the orderly ways out below have done both already.
      process.on('exit', () => {
        killRunningBenchControllersNow();
        try {
          if (!keepWorkDir) rmSync(workDir, { recursive: true, force: true, maxRetries: 3 });
        } catch {
          // nothing can be reported as the process exits
        }
      });
      // Stopped by a signal (Ctrl-C, `timeout`, a hang-up), it stops its controllers and removes their state as when it
      // finishes: left alone, Node would exit at once, leaving both (a controller outside the signalled process group
      // runs on). A second signal while they stop changes nothing: the first decides the exit, after the cleanup.
      let stopping: Promise<never> | undefined;
      const stopped = (signal: NodeJS.Signals): void => {
        if (stopping !== undefined) return;
        stopping = new Promise<never>(() => {}); // the benchmark's own failure, as its controllers go, is not reported
        void stopRunningBenchControllers().then(
          () => {
            try {
              if (opts.keep === true) {
                keepWorkDir = true;
                progress(`stopped by ${signal}; state directories kept in ${workDir}`);
              } else {
                rmSync(workDir, { recursive: true, force: true });
                progress(`stopped by ${signal}`);
              }
            } catch (e) {
              progress(`stopped by ${signal}; could not remove ${workDir}: ${(e as Error).message}`);
            }
            process.exit(128 + constants.signals[signal]);
          },
          () => process.exit(128 + constants.signals[signal]),
        );
      };
      const stopListening = onBenchStopSignals(stopped);
      let result: ControllerBenchResult;
      let failed = true;
      try {
        result = await benchController(
          {
            submissions: opts.submissions,
            waiting: opts.waiting,
            running: opts.running,
            workers: opts.workers,
            finished: opts.finished,
            concurrency: opts.concurrency,
            rounds: opts.rounds,
            heartbeatWindowSeconds: opts.heartbeatSeconds,
            workDir,
            cpuProfileDir: opts.cpuProf === undefined ? undefined : resolve(opts.cpuProf),
          },
          progress,
        );
        failed = false;
      } catch (e) {
        if (stopping !== undefined) await stopping; // never settles: the signal's handler exits
        throw e;
      } finally {
        if (stopping === undefined) {
          stopListening();
          // A failed benchmark keeps its controllers' logs (the error points at them); their processes are stopped.
          if (failed) {
            keepWorkDir = true;
            await stopRunningBenchControllers();
            progress(`failed; state directories (controller.log) kept in ${workDir}`);
          } else if (opts.keep === true) {
            keepWorkDir = true;
            progress(`state directories kept in ${workDir}`);
          } else rmSync(workDir, { recursive: true, force: true });
        }
      }
      if (opts.json === true) process.stdout.write(`${JSON.stringify(result)}\n`);
      else process.stdout.write(formatControllerBench(result));
    });
}

function targetText(name: TargetName): string {
  const t: ControllerBenchTarget = CONTROLLER_BENCH_TARGETS[name];
  return t.atLeast !== undefined ? `≥ ${t.atLeast}` : `≤ ${t.atMost ?? ''}`;
}

/** The flags a target is set at: `--workers 1000`. */
function targetSizesText(name: TargetName): string {
  const t: ControllerBenchTarget = CONTROLLER_BENCH_TARGETS[name];
  return Object.entries(t.at)
    .map(([size, least]) => `${flagName(size)} ${String(least)}`)
    .join(' ');
}

/**
 * The targets not judged, as a line under the table: what each is set at, so that a run at that size judges it.
 * Empty when every target was judged.
 */
function notJudgedText(r: ControllerBenchResult): string {
  const bySizes = new Map<string, TargetName[]>();
  for (const name of Object.keys(CONTROLLER_BENCH_TARGETS) as TargetName[]) {
    if (r.met[name] !== null) continue;
    const sizes = targetSizesText(name);
    bySizes.set(sizes, [...(bySizes.get(sizes) ?? []), name]);
  }
  if (bySizes.size === 0) return '';
  const which = [...bySizes].map(([sizes, names]) => `${names.join(', ')} at ${sizes}`).join('; ');
  return `n/a: run at a smaller size than the target's (${which})\n`;
}

/** The human-readable table of a controller benchmark: each figure, its target, whether it was met, and on what. */
export function formatControllerBench(r: ControllerBenchResult): string {
  const row = (name: TargetName, value: string, context: string): string[] => [
    name,
    value,
    targetText(name),
    r.met[name] === null ? 'n/a' : r.met[name] ? 'met' : 'MISSED',
    context,
  ];
  return (
    formatTable(
      ['FIGURE', 'VALUE', 'TARGET', '', 'MEASURED ON'],
      [
        row(
          'submitsPerSecond',
          r.submitsPerSecond.toFixed(0),
          `${r.submissions} submissions, ${r.roundsDuringSubmissions} rounds meanwhile`,
        ),
        row(
          'submitP99Ms',
          r.submitP99Ms.toFixed(1),
          `p50 ${r.submitP50Ms.toFixed(1)} ms; controller CPU ${r.submitCpuMs.toFixed(2)} ms per submission`,
        ),
        row(
          'roundSeconds',
          r.roundSeconds.toFixed(3),
          `slowest of ${r.roundsMeasured} rounds (mean ${r.roundMeanSeconds.toFixed(3)} s) with ${r.waitingJobs} waiting, ${r.runningJobs} running`,
        ),
        row(
          'heartbeatsPerSecond',
          r.heartbeatsPerSecond.toFixed(0),
          `${r.heartbeats} heartbeats from ${r.workers} workers`,
        ),
        row(
          'heartbeatP99Ms',
          r.heartbeatP99Ms.toFixed(1),
          `p50 ${r.heartbeatP50Ms.toFixed(1)} ms; controller CPU ${r.heartbeatCpuMs.toFixed(2)} ms per heartbeat`,
        ),
        row('memoryMiB', r.memoryMiB.toFixed(0), `controller RSS after ${r.finishedJobs} finished jobs`),
      ],
    ) +
    `machine: ${r.cpus} cores, load average ${r.loadAverages.submit.toFixed(1)} / ${r.loadAverages.rounds.toFixed(1)} / ` +
    `${r.loadAverages.heartbeats.toFixed(1)} after the submissions / rounds / heartbeats\n` +
    notJudgedText(r) +
    (r.fleetErrors > 0 ? `${r.fleetErrors} simulated-worker request(s) failed\n` : '')
  );
}
