import { Command, CommanderError } from 'commander';
import { ValidationError } from '../../core/validation.js';
import { checkRequiredOptionsLast } from '../program.js';
import { addPriceOverridesOption, addTraceOptions } from './sim-flags.js';
import { learnedColocationFile } from './colocation-table-file.js';
import { reportFiles } from '../../sim/report/write.js';
import type { OutputFile } from '../atomic-file.js';
import { writeOutputFiles } from '../output-files.js';
import { costBounds } from '../../bench/cost-bound.js';
import { loadIlpSolver } from '../../scheduler/ilp.js';
import { summaryTextTable } from '../../sim/report/format.js';
import { runsJson } from '../../sim/report/json.js';
import { withNormalizedCosts } from '../../sim/report/normalize.js';
import { defaultParallelism, runInWorkers } from '../../sim/run-pool.js';
import type { RunRequest } from '../../sim/run-request.js';
import { SCHEDULER_NAMES } from '../../scheduler/registry.js';
import type { RunResult } from '../../world/run-result.js';
import { QUEUE_KINDS } from '../../sim/queue-options.js';
import { ADMIT_BY } from '../../queue/admission.js';
import {
  DEFAULT_PACKING_EFFICIENCY,
  DEFAULT_PAYBACK_MARGIN,
  DEFAULT_TARGET_SLOWDOWN,
  DEFAULT_VALUE_OF_TIME_PER_JOB_HOUR,
} from '../../scheduler/eva.js';
import { RUNTIMES, type RawSimulateOptions } from './simulate-options.js';
import { simulationPlan } from './simulate-plan.js';
import { checkSeedTaken } from './simulate-flag-rules.js';
import { progressDisplay } from './simulate-progress.js';
import { reportSettings } from './simulate-report-settings.js';

async function simulate(raw: RawSimulateOptions): Promise<void> {
  const plan = simulationPlan(raw);
  const { o, catalog, trace, spotOn, runs, requests } = plan;
  checkSeedTaken(o.seed, requests[0] as RunRequest, trace);
  const parallel = o.parallel ?? defaultParallelism(requests.length);
  const progress = progressDisplay(runs.map((r) => r.label ?? r.scheduler));
  let raws: RunResult[];
  try {
    raws = await runInWorkers(requests, parallel, progress);
  } finally {
    progress.stop();
  }
  const results = withNormalizedCosts(raws);

  // Files first: a reader of stdout gone (`| head`) ends the process at its next write (main.ts), files unwritten.
  // The table and the report are written together, all or none; a failed write (a full disk) loses nothing else: the
  // result still goes to stdout, then the failure ends the command.
  const files: OutputFile[] = [];
  let reportPaths: string[] = [];
  if (o.saveColocationTable !== undefined) files.push(learnedColocationFile(o.saveColocationTable, results));
  if (o.out !== undefined) {
    const settings = reportSettings(plan);
    // The trace's lower bounds, for the report's summary and cost chart (an LP per job event: ~2 s on Alibaba), at
    // spot prices where the run could buy spot.
    const spotBounds = spotOn && catalog.spot !== undefined;
    const bounds = costBounds(await loadIlpSolver(), catalog, trace.jobs, {
      spot: spotBounds ? catalog.spot : undefined,
    });
    const report = reportFiles(o.out, results, settings, { ...bounds, atSpotPrices: spotBounds });
    files.push(...report.map((f) => ({ ...f, flag: '--out' })));
    reportPaths = report.map((f) => f.path);
  }
  const unwritten = writeOutputFiles(files, o.out === undefined ? [] : [{ path: o.out, flag: '--out' }]);
  if (unwritten === undefined && reportPaths.length > 0)
    process.stderr.write(`report written: ${reportPaths.join(', ')}\n`);
  if (o.json === true) process.stdout.write(`${JSON.stringify(runsJson(results))}\n`);
  else process.stdout.write(`${trace.name}: ${trace.jobs.length} jobs\n\n${summaryTextTable(results)}`);
  if (unwritten !== undefined) throw unwritten;
}

/** `fleetwise simulate`: run schedulers on a trace in parallel worker threads and compare them. */
export function registerSimulate(program: Command): Command {
  return simulateOptions(
    program
      .command('simulate')
      .description('simulate schedulers on a trace (in parallel) and compare cost, JCT and migrations'),
  ).action(async (raw: RawSimulateOptions) => {
    await simulate(raw);
  });
}

/**
 * A `simulate` command line (without the command's name) as the command's raw options, e.g. one arm of `bench arms`;
 * a flag commander refuses is a ValidationError naming `source`.
 */
export function parseSimulateArgs(args: readonly string[], source: string): RawSimulateOptions {
  let raw: RawSimulateOptions | undefined;
  const command = simulateOptions(new Command('simulate'))
    .exitOverride()
    .configureOutput({ writeOut: () => undefined, writeErr: () => undefined })
    .action((options: RawSimulateOptions) => {
      raw = options;
    });
  checkRequiredOptionsLast(command);
  try {
    command.parse([...args], { from: 'user' });
  } catch (e) {
    if (e instanceof CommanderError) throw new ValidationError(source, [e.message.replace(/^error: /, '')]);
    throw e;
  }
  if (raw === undefined) throw new ValidationError(source, ['no simulate options were parsed']);
  return raw;
}

/** Every flag of `simulate`. */
function simulateOptions(command: Command): Command {
  return addPriceOverridesOption(addTraceOptions(command))
    .requiredOption('--scheduler <names>', `comma-separated: ${SCHEDULER_NAMES.join(', ')}`)
    .option('--out <dir>', 'write report.json, runs.csv and report.html into this directory')
    .option('--json', 'print exactly one JSON object {"runs":[…]} on stdout')
    .option('--round-seconds <s>', 'scheduling period in seconds (default 300)')
    .option(
      '--early-rounds',
      "also plan right after each job arrival and completion, as the controller does (Eva's reference: period only)",
    )
    .option('--eva-default-rate <r>', "Eva's prior co-location throughput per task, (0, 1] (default 0.95)")
    .option(
      '--colocation-table <file>',
      'Eva starts from this learned co-location table (JSON, as --save-colocation-table writes it) instead of an empty one: a controller that has been running',
    )
    .option(
      '--save-colocation-table <file>',
      "write the co-location table the run's Eva learned (JSON; one Eva run) for a later --colocation-table",
    )
    .option(
      '--eva-prices <kind>',
      "Eva's task prices: packed (default: dominant-share price / packing efficiency) or standalone (Eva §4.2)",
    )
    .option(
      '--eva-packing-efficiency <x>',
      `packed prices: expected share of an instance's bottleneck capacity in use, (0, 1] (default ${DEFAULT_PACKING_EFFICIENCY})`,
    )
    .option(
      '--eva-payback-margin <k>',
      `Eva moves jobs only when the saving over the horizon is ≥ k × the migration cost (Eva eq. 1: 1; default ${DEFAULT_PAYBACK_MARGIN})`,
    )
    .option(
      '--value-of-time <dollars>',
      `Eva: what an hour of a job's completion time is worth, $, or auto: learned so that running jobs average --target-slowdown (default ${DEFAULT_VALUE_OF_TIME_PER_JOB_HOUR}); a list a,b,c runs Eva once per value and draws cost against mean JCT`,
    )
    .option(
      '--target-slowdown <x>',
      `Eva, value of time auto: the mean slowdown of running jobs to hold, in (0, 1) (default ${DEFAULT_TARGET_SLOWDOWN})`,
    )
    .option('--pairwise-interference <x>', 'ground truth: every co-located pair runs at rate x (Eva §6.4)')
    .option('--parallel <n>', 'runs at once (default: min(#schedulers, available cores))')
    .option('--cap-dollars-per-hour <x>', 'queue layer: admit jobs so the fleet stays under $x/hour')
    .option('--cap-instances <n>', 'queue layer: admit jobs so the fleet stays under n instances')
    .option(
      '--queue <kind>',
      `queue ordering under the caps: ${QUEUE_KINDS.join('|')} (default fifo when a cap is given; wfq: two size classes split at the 85th-percentile job size, weights .85/.15)`,
    )
    .option(
      '--quota <group:limits>',
      'queue layer: AWS-style quota per family group, e.g. p:gpus=16 or standard:vcpus=256 (repeatable, one per ' +
        'group; replaces a --config quota for the same group)',
      (value: string, previous: string[] = []) => [...previous, value],
    )
    .option(
      '--queue-config <file>',
      'queue layer: a WFQ config (YAML/JSON, bare or as a `queue:` section, e.g. from fleetwise tune, whose other sections (caps, scheduler, round period, catalog, prices, behaviours turned off) apply where no flag or --config sets them); implies --queue wfq',
    )
    .option(
      '--runtime <runtime>',
      `${RUNTIMES.join('|')}: the simulator's event engine (default), or the real controller (its rounds, admission, reconciler and state store) on a virtual clock against a simulated cloud and workers`,
    )
    .option(
      '--config <file>',
      "simulate a controller config (fleetwise.yaml): its caps, queue classes, round period, scheduler tunables, catalog and price overrides; with --runtime controller, the controller's own settings",
    )
    .option(
      '--poll-seconds <s>',
      'controller runtime: seconds between reconcile passes when no simulated worker report wakes the loop (default: the round period)',
    )
    .option(
      '--latency-config <file>',
      'simulated network (YAML/JSON): zones, round trip per latency domain, noise, congestion episodes (see README)',
    )
    .option('--co-start <on|off>', "start a multi-task job's tasks so they are ready together (default off)")
    .option(
      '--place-between-rounds <on|off>',
      'place waiting jobs on paid capacity at arrivals and completions instead of at the next round (default off)',
    )
    .option('--bind <on|off>', 'placement between rounds may bind to instances still coming up (default off)')
    .option(
      '--make-before-break <on|off>',
      'a job moving to new instances keeps working until they are ready, then checkpoints (default off: it stops at once)',
    )
    .option(
      '--admit-by <how>',
      `queue layer: size jobs against a $ cap by ${ADMIT_BY.join('|')} (plan-cost: scaled by what the packed fleet really costs; default standalone)`,
    )
    .option(
      '--spot <off|on>',
      "spot capacity (default off): on opens the catalog's spot market (eva buys spot where its expected cost pays; karpenter-spot and skypilot-spot always) and reclaims spot instances at the catalog's interruption rates, with a 2-minute notice",
    )
    .option(
      '--checkpoint-minutes <m>',
      "every job checkpoints on its own this often (0: never); default the trace's, else 30 (what a reclaimed instance loses)",
    )
    .option(
      '--spot-bursts <n>',
      'with --spot on: bursts per spot pool per 30 days that reclaim all of its instances at once (default 0, ' +
        'at most 720)',
    )
    .option(
      '--spot-rebalance <share>',
      'with --spot on: share of reclaims that a rebalance recommendation precedes, by a lead of 2 h on average (default 0); fleetwise plans at once on one, the spot baselines ignore it',
    )
    .option(
      '--spot-false-rebalances <n>',
      'with --spot on: rebalance recommendations with no reclaim behind them, per spot instance per 30 days (default 0)',
    )
    .option(
      '--no-predict',
      'queue layer: skip completion-time predictions (predErrAvg/predErrP99 null; runs are several times faster)',
    );
}
