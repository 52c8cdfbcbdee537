import cliProgress from 'cli-progress';
import { Command, CommanderError } from 'commander';
import { z } from 'zod';
import { ValidationError } from '../../core/validation.js';
import { applyPriceOverrides } from '../../core/catalog.js';
import {
  addPriceOverridesOption,
  flagProblems,
  inferFormat,
  addTraceOptions,
  loadTraceFlags,
  numberText,
  traceOptionFields,
  readQueueConfigFile,
  readLatencyConfigFile,
  positiveInteger,
  priceOverridesOptionField,
  readPriceOverridesFile,
  refuseSpotPricesWithoutSpot,
  type PriceOverridesFromFile,
  roundSecondsFlag,
  simulatedPeriodSeconds,
  traceSettings,
  valueOfTimeItem,
} from './sim-flags.js';
import { colocationTableRequest, saveLearnedColocation } from './colocation-table-file.js';
import { checkOutputDirectory } from '../output-target.js';
import { stopOnSignal } from '../terminal-restore.js';
import { checkDependentFlags } from './simulate-flag-rules.js';
import { writeReport } from '../../sim/report/write.js';
import { costBounds } from '../../bench/cost-bound.js';
import { loadIlpSolver } from '../../scheduler/ilp.js';
import { summaryTextTable } from '../../sim/report/format.js';
import type { ReportSettings } from '../../sim/report/json.js';
import { runsJson } from '../../sim/report/json.js';
import { withNormalizedCosts } from '../../sim/report/normalize.js';
import { defaultParallelism, runInWorkers, type RunPoolListener } from '../../sim/run-pool.js';
import type { RunRequest } from '../../sim/run-request.js';
import { parseSchedulerList, SCHEDULER_NAMES } from '../../scheduler/registry.js';
import type { RunResult } from '../../world/run-result.js';
import { QUEUE_KINDS } from '../../sim/queue-options.js';
import type { FamilyGroupQuota } from '../../core/quota-groups.js';
import { ADMIT_BY } from '../../queue/admission.js';
import {
  DEFAULT_PACKING_EFFICIENCY,
  DEFAULT_PAYBACK_MARGIN,
  DEFAULT_TARGET_SLOWDOWN,
  DEFAULT_VALUE_OF_TIME_PER_JOB_HOUR,
} from '../../scheduler/eva.js';
import type { ValueOfTimeSetting } from '../../core/model.js';
import { DEFAULT_COLOCATION_RATE } from '../../scheduler/colocation-table.js';
import { DEFAULT_ROUND_SECONDS } from '../../world/simulation.js';
import { loadControllerConfig } from '../../controller/config-loading.js';
import { knownQuotaGroups } from '../../controller/config.js';
import { admitByOf, capsOf, settingsFromConfig } from '../../controller/settings.js';

/** Raw commander values (strings); validated by `optionsSchema`. */
export interface RawSimulateOptions {
  readonly trace?: string;
  readonly format?: string;
  readonly jobs?: string;
  readonly seed?: string;
  readonly multiTask?: string;
  readonly scheduler: string;
  readonly catalog?: string;
  readonly priceOverrides?: string;
  readonly out?: string;
  readonly json?: boolean;
  readonly roundSeconds?: string;
  readonly earlyRounds?: boolean;
  readonly evaDefaultRate?: string;
  readonly colocationTable?: string;
  readonly saveColocationTable?: string;
  readonly evaPrices?: string;
  readonly evaPackingEfficiency?: string;
  readonly evaPaybackMargin?: string;
  readonly valueOfTime?: string;
  readonly targetSlowdown?: string;
  readonly pairwiseInterference?: string;
  readonly parallel?: string;
  readonly capDollarsPerHour?: string;
  readonly capInstances?: string;
  readonly queue?: string;
  readonly predict?: boolean;
  readonly quota?: string[];
  readonly queueConfig?: string;
  readonly runtime?: string;
  readonly config?: string;
  readonly pollSeconds?: string;
  readonly latencyConfig?: string;
  readonly coStart?: string;
  readonly placeBetweenRounds?: string;
  readonly makeBeforeBreak?: string;
  readonly bind?: string;
  readonly admitBy?: string;
  readonly spot?: string;
  readonly checkpointMinutes?: string;
  readonly spotBursts?: string;
  readonly spotRebalance?: string;
  readonly spotFalseRebalances?: string;
}

const onOff = z.enum(['on', 'off']);

const rate = z.number().gt(0, 'must be > 0').max(1, 'must be ≤ 1');

/** `--runtime`: the simulator's event engine, or the real controller on a virtual clock (src/sim/controller-runtime/). */
export const RUNTIMES = ['engine', 'controller'] as const;

const optionsSchema = z.object({
  ...traceOptionFields,
  ...priceOverridesOptionField,
  out: z.string().min(1).optional(),
  json: z.boolean().optional(),
  roundSeconds: roundSecondsFlag.optional(),
  earlyRounds: z.boolean().optional(),
  evaDefaultRate: numberText(rate).optional(),
  colocationTable: z.string().min(1).optional(),
  saveColocationTable: z.string().min(1).optional(),
  evaPrices: z.enum(['standalone', 'packed']).optional(),
  evaPackingEfficiency: numberText(rate).optional(),
  evaPaybackMargin: numberText(z.number().min(1, 'must be ≥ 1').max(1000, 'must be ≤ 1000')).optional(),
  valueOfTime: z
    .string()
    .transform((text) => text.split(','))
    .pipe(
      z
        .array(valueOfTimeItem)
        .min(1)
        .max(16, 'at most 16 values in one sweep')
        .refine((values) => new Set(values).size === values.length, 'values must differ'),
    )
    .optional(),
  targetSlowdown: numberText(z.number().gt(0, 'must be > 0').lt(1, 'must be < 1')).optional(),
  pairwiseInterference: numberText(rate).optional(),
  parallel: numberText(positiveInteger).optional(),
  capDollarsPerHour: numberText(z.number().positive('must be > 0')).optional(),
  capInstances: numberText(positiveInteger).optional(),
  queue: z.enum(QUEUE_KINDS).optional(),
  predict: z.boolean().optional(),
  quota: z.array(z.string()).optional(),
  queueConfig: z.string().min(1).optional(),
  runtime: z.enum(RUNTIMES).optional(),
  config: z.string().min(1).optional(),
  pollSeconds: numberText(simulatedPeriodSeconds).optional(),
  latencyConfig: z.string().min(1).optional(),
  coStart: onOff.optional(),
  placeBetweenRounds: onOff.optional(),
  makeBeforeBreak: onOff.optional(),
  bind: onOff.optional(),
  admitBy: z.enum(ADMIT_BY).optional(),
  spot: z.enum(['off', 'on'], { message: 'must be off or on' }).optional(),
  checkpointMinutes: numberText(z.number().min(0, 'must be ≥ 0 (0: jobs never checkpoint)')).optional(),
  spotBursts: numberText(z.number().min(0, 'must be ≥ 0')).optional(),
  spotRebalance: numberText(z.number().min(0, 'must be in [0, 1]').max(1, 'must be in [0, 1]')).optional(),
  spotFalseRebalances: numberText(z.number().min(0, 'must be ≥ 0')).optional(),
});

/**
 * `--quota group:vcpus=N,gpus=M` (repeatable): an AWS-style on-demand quota per family group (src/queue/caps.ts
 * awsQuotaGroup: `p` for P3, `standard` for C7i/R7i).
 */
export function parseQuotaFlag(text: string): FamilyGroupQuota {
  const problem = (why: string) =>
    new ValidationError('--quota', [`"${text}": ${why}; expected group:vcpus=N[,gpus=M], e.g. p:gpus=16`]);
  const m = /^\s*([a-z0-9-]+)\s*:\s*(.+)$/i.exec(text);
  if (m === null) throw problem('missing the group name or its limits');
  const limits: { maxVcpus?: number; maxGpus?: number } = {};
  for (const part of (m[2] as string).split(',')) {
    const kv = /^\s*(vcpus|gpus)\s*=\s*(\d+(\.\d+)?)\s*$/i.exec(part);
    if (kv === null) throw problem(`"${part.trim()}" is not vcpus=N or gpus=N`);
    const value = Number(kv[2]);
    if ((kv[1] as string).toLowerCase() === 'vcpus') limits.maxVcpus = value;
    else limits.maxGpus = value;
  }
  const group = (m[1] as string).toLowerCase();
  // A group no instance counts against would be a cap that never binds, silently.
  if (!knownQuotaGroups().includes(group))
    throw problem(`no instance counts against group ${group} (groups: ${knownQuotaGroups().join(', ')})`);
  return { group, ...limits };
}

function parseOptions(raw: RawSimulateOptions) {
  const { scheduler, ...rest } = raw;
  const schedulers = parseSchedulerList(scheduler);
  const parsed = optionsSchema.safeParse(rest);
  if (!parsed.success) throw new ValidationError('fleetwise simulate options', flagProblems(parsed.error));
  const o = parsed.data;
  const format = o.format ?? inferFormat(o.trace);
  return { ...o, format, schedulers };
}

interface Progress extends RunPoolListener {
  stop(): void;
}

/** A bar per run on a terminal (stderr); otherwise one line per finished run on stderr. stdout stays clean. */
function progressDisplay(names: readonly string[]): Progress {
  if (process.stderr.isTTY !== true) {
    return {
      onDone: (index, result) =>
        process.stderr.write(
          `${names[index] ?? index}: done in ${result.summary.wallSeconds.toFixed(1)} s\n`,
        ),
      stop: () => undefined,
    };
  }
  const width = Math.max(...names.map((n) => n.length));
  const multibar = new cliProgress.MultiBar(
    {
      stream: process.stderr,
      format: '{name} [{bar}] {percentage}% | {duration_formatted}',
      hideCursor: true,
      clearOnComplete: false,
      fps: 5,
    },
    cliProgress.Presets.shades_classic,
  );
  const bars = new Map<number, cliProgress.SingleBar>();
  const releaseSignals = stopOnSignal(() => multibar.stop());
  return {
    onStart: (index) =>
      bars.set(index, multibar.create(100, 0, { name: (names[index] ?? '').padEnd(width) })),
    onProgress: (index, fraction) => bars.get(index)?.update(Math.round(fraction * 100)),
    onDone: (index) => {
      // Stopping a finished bar freezes its elapsed time at the run's own duration.
      bars.get(index)?.update(100);
      bars.get(index)?.stop();
    },
    stop: () => {
      releaseSignals();
      multibar.stop();
    },
  };
}

/**
 * Spot prices (`spotPricePerType`) with spot off would price nothing: refused, whether from `--price-overrides` or a
 * controller config's `priceOverrides:` (when no flag overrides them). Checked before the catalog loads, since with spot
 * off it has no spot pools and the overrides' check against it would blame the catalog instead.
 */
function refuseSpotPricesWithSpotOff(
  flagPrices: PriceOverridesFromFile | undefined,
  configPath: string | undefined,
): void {
  const why = 'needs --spot on (without it the runs buy on demand only)';
  if (flagPrices !== undefined) {
    refuseSpotPricesWithoutSpot(flagPrices, why);
    return;
  }
  if (configPath === undefined) return;
  // The region is irrelevant here (the full load below checks the file against the catalog).
  const config = loadControllerConfig({ flags: { config: configPath }, defaultRegion: 'us-east-1' });
  if (config.priceOverrides?.spotPricePerType !== undefined)
    throw new ValidationError(configPath, [`priceOverrides.spotPricePerType: prices spot instances: ${why}`]);
}

/**
 * What a `simulate` command line asks for: its validated options, the trace and catalog, the controller config, the
 * queue layer, and one run request per (scheduler, value of time). `bench arms` plans its arms through this too.
 */
export function simulationPlan(raw: RawSimulateOptions) {
  const o = parseOptions(raw);
  const flagPrices = o.priceOverrides === undefined ? undefined : readPriceOverridesFile(o.priceOverrides);
  if (o.spot !== 'on') refuseSpotPricesWithSpotOff(flagPrices, o.config);
  const loaded = loadTraceFlags(o, o.spot === 'on', flagPrices);
  const { traceSpec, trace } = loaded;

  // A user's controller config: its caps, queue classes, round period and Eva tunables, under any flags given.
  const config =
    o.config === undefined
      ? undefined
      : loadControllerConfig({
          flags: { config: o.config },
          defaultRegion: loaded.catalog.region,
          // Its price overrides are checked against the catalog only when they are the ones the runs take.
          ...(flagPrices === undefined ? { catalog: loaded.catalog } : {}),
        });
  // Prices as the flag says, else as a controller config's `priceOverrides:` says (both runtimes alike).
  const prices =
    flagPrices ??
    (config?.priceOverrides === undefined
      ? undefined
      : { overrides: config.priceOverrides, source: `${o.config ?? 'config'}: priceOverrides` });
  const catalog =
    flagPrices === undefined && prices !== undefined
      ? applyPriceOverrides(loaded.catalog, prices.overrides, prices.source)
      : loaded.catalog;
  const quotas = [...(config?.caps.quotas ?? []), ...(o.quota ?? []).map(parseQuotaFlag)];
  const queueConfig = o.queueConfig === undefined ? config?.queue : readQueueConfigFile(o.queueConfig);
  const capDollarsPerHour = o.capDollarsPerHour ?? config?.caps.maxCostPerHour;
  const capInstances = o.capInstances ?? config?.caps.maxInstances;
  const roundSeconds = o.roundSeconds ?? config?.roundSeconds;
  if (queueConfig !== undefined && o.queue !== undefined && o.queue !== 'wfq')
    throw new ValidationError('--queue-config', [
      `a WFQ config needs --queue wfq (or no --queue), not --queue ${o.queue}`,
    ]);
  // A controller config sizes jobs as the controller would (by the plan's cost unless it says otherwise).
  const admitBy = o.admitBy ?? (config === undefined ? undefined : admitByOf(config));
  // Any cap or --queue turns the queue layer on (fifo unless said otherwise), with predictions unless --no-predict.
  const queue: RunRequest['queue'] =
    o.queue === undefined &&
    queueConfig === undefined &&
    capDollarsPerHour === undefined &&
    capInstances === undefined &&
    quotas.length === 0
      ? undefined
      : {
          kind: o.queue ?? (queueConfig === undefined ? 'fifo' : 'wfq'),
          ...(queueConfig === undefined ? {} : { config: queueConfig }),
          caps: {
            ...(config === undefined ? {} : capsOf(config.caps)),
            ...(capDollarsPerHour !== undefined ? { maxCostPerHour: capDollarsPerHour } : {}),
            ...(capInstances !== undefined ? { maxInstances: capInstances } : {}),
            ...(quotas.length > 0 ? { quotas } : {}),
          },
          predict: o.predict ?? true,
          ...(admitBy !== undefined ? { admitBy } : {}),
        };
  // Murmuration's parts (digest §7.5 arms): each as its flag says, else as a controller config (--config) says (both
  // runtimes alike: the controller runtime runs the config's settings), else off; naming any reports the starts.
  const flagOr = (flag: 'on' | 'off' | undefined, configured: boolean | undefined): boolean | undefined =>
    flag === undefined ? configured : flag === 'on';
  const coStartOn = flagOr(o.coStart, config?.coStart);
  const placeOn = flagOr(o.placeBetweenRounds, config?.placeBetweenRounds);
  const bindOn = flagOr(o.bind, config?.bindBetweenRounds);
  const starts =
    coStartOn === undefined && placeOn === undefined && bindOn === undefined
      ? undefined
      : { coStart: coStartOn === true, placeBetweenRounds: placeOn === true, bind: bindOn === true };
  const runtime = o.runtime ?? 'engine';
  const network = o.latencyConfig === undefined ? undefined : readLatencyConfigFile(o.latencyConfig);
  if (runtime === 'controller' && (network !== undefined || (o.latencySensitive ?? 0) > 0))
    throw new ValidationError('--runtime', [
      'the simulated network (--latency-sensitive, --latency-config) runs in the engine runtime only: with --runtime controller, round trips reach the controller from its workers',
    ]);
  const valuesOfTime = o.valueOfTime ?? [
    config?.scheduler.valueOfTimePerJobHour ?? DEFAULT_VALUE_OF_TIME_PER_JOB_HOUR,
  ];
  checkDependentFlags({
    ...o,
    runtime,
    valuesOfTime,
    spotPriceOverrides: flagPrices?.overrides.spotPricePerType !== undefined,
  });
  const spotOn = o.spot === 'on';
  // A value-of-time sweep (several values) runs each Eva scheduler once per value, named by it; baselines run once.
  const sweep = (o.valueOfTime?.length ?? 0) > 1;
  const runs = o.schedulers.flatMap((scheduler) =>
    scheduler.startsWith('eva')
      ? (o.valueOfTime ?? [undefined]).map((value) => ({
          scheduler,
          value,
          label: sweep ? valueOfTimeLabel(scheduler, value as ValueOfTimeSetting) : undefined,
        }))
      : [{ scheduler, value: undefined, label: undefined }],
  );
  const colocation = colocationTableRequest(o, runs.filter((r) => r.scheduler.startsWith('eva')).length);
  if (o.out !== undefined) checkOutputDirectory(o.out, '--out');
  const requests: RunRequest[] = runs.map(({ scheduler, value, label }) => ({
    scheduler,
    label,
    evaValueOfTime: value ?? config?.scheduler.valueOfTimePerJobHour,
    evaTargetSlowdown: o.targetSlowdown ?? config?.scheduler.targetSlowdown,
    runtime,
    trace: traceSpec,
    catalogPath: o.catalog,
    ...(prices === undefined ? {} : { priceOverrides: prices.overrides }),
    roundSeconds,
    earlyRounds: o.earlyRounds,
    evaDefaultRate: o.evaDefaultRate ?? config?.scheduler.defaultRate,
    ...colocation,
    evaPrices: o.evaPrices ?? config?.scheduler.prices,
    evaPackingEfficiency: o.evaPackingEfficiency ?? config?.scheduler.packingEfficiency,
    evaPaybackMargin: o.evaPaybackMargin ?? config?.scheduler.paybackMargin,
    pairwiseInterference: o.pairwiseInterference,
    queue,
    ...(starts === undefined ? {} : { starts }),
    // The flag over a controller config's choice (the config's default is on, the simulator's off).
    makeBeforeBreak: o.makeBeforeBreak === undefined ? config?.makeBeforeBreak : o.makeBeforeBreak === 'on',
    pollSeconds: o.pollSeconds,
    network,
    ...(spotOn
      ? {
          spot: {
            burstsPerPoolPerMonth: o.spotBursts,
            rebalanceShare: o.spotRebalance,
            falseRebalancesPerMonth: o.spotFalseRebalances,
          },
        }
      : {}),
    checkpointMinutes: o.checkpointMinutes,
    // The controller runs the config as its own settings, with the caps and queue the flags laid over it.
    controllerSettings:
      config === undefined || runtime !== 'controller'
        ? undefined
        : {
            ...settingsFromConfig(config),
            caps: queue?.caps ?? capsOf(config.caps),
            queue: queueConfig,
            ...(admitBy !== undefined ? { admitBy } : {}),
            ...(roundSeconds !== undefined ? { roundSeconds } : {}),
          },
  }));
  return {
    o,
    catalog,
    trace,
    config,
    quotas,
    queue,
    capDollarsPerHour,
    capInstances,
    roundSeconds,
    admitBy,
    spotOn,
    valuesOfTime,
    runs,
    requests,
    starts,
    priceOverridesSource: prices?.source,
  };
}

async function simulate(raw: RawSimulateOptions): Promise<void> {
  const plan = simulationPlan(raw);
  const { o, catalog, trace, config, quotas, queue, capDollarsPerHour, capInstances, roundSeconds, admitBy } =
    plan;
  const { spotOn, valuesOfTime, runs, requests, starts, priceOverridesSource } = plan;
  const parallel = o.parallel ?? defaultParallelism(requests.length);
  const progress = progressDisplay(runs.map((r) => r.label ?? r.scheduler));
  let raws: RunResult[];
  try {
    raws = await runInWorkers(requests, parallel, progress);
  } finally {
    progress.stop();
  }
  const results = withNormalizedCosts(raws);

  if (o.saveColocationTable !== undefined) saveLearnedColocation(o.saveColocationTable, results);
  if (o.json === true) process.stdout.write(`${JSON.stringify(runsJson(results))}\n`);
  else process.stdout.write(`${trace.name}: ${trace.jobs.length} jobs\n\n${summaryTextTable(results)}`);

  if (o.out !== undefined) {
    const settings: ReportSettings = {
      ...traceSettings(o, trace, catalog, priceOverridesSource),
      // Defaults as their values: a reader of the report should not need the code to know what ran.
      roundSeconds: roundSeconds ?? DEFAULT_ROUND_SECONDS,
      earlyRounds: o.earlyRounds ?? false,
      evaDefaultRate: o.evaDefaultRate ?? config?.scheduler.defaultRate ?? DEFAULT_COLOCATION_RATE,
      colocationTable: o.colocationTable ?? 'none (Eva learns co-location from nothing)',
      // As the runs took them: the flag, else the config's scheduler section, else the default.
      evaPrices: o.evaPrices ?? config?.scheduler.prices ?? 'packed',
      evaPackingEfficiency:
        o.evaPackingEfficiency ?? config?.scheduler.packingEfficiency ?? DEFAULT_PACKING_EFFICIENCY,
      evaPaybackMargin: o.evaPaybackMargin ?? config?.scheduler.paybackMargin ?? DEFAULT_PAYBACK_MARGIN,
      valueOfTimePerJobHour: valuesOfTime.join(', '),
      targetSlowdown: o.targetSlowdown ?? config?.scheduler.targetSlowdown ?? DEFAULT_TARGET_SLOWDOWN,
      groundTruth:
        o.pairwiseInterference !== undefined
          ? `pairwise co-location throughput ${o.pairwiseInterference}`
          : 'measured contention matrix (Eva)',
      schedulers: o.schedulers.join(', '),
      queue: queue?.kind ?? 'none (jobs start when placed)',
      queueConfig: o.queueConfig ?? (queue === undefined ? 'none' : 'built-in default'),
      capDollarsPerHour: capDollarsPerHour ?? 'none (uncapped)',
      capInstances: capInstances ?? 'none (uncapped)',
      quotas:
        quotas.length === 0
          ? 'none'
          : quotas
              .map((q) =>
                [
                  `${q.group}:`,
                  [
                    q.maxVcpus === undefined ? '' : `vcpus=${q.maxVcpus}`,
                    q.maxGpus === undefined ? '' : `gpus=${q.maxGpus}`,
                  ]
                    .filter((x) => x !== '')
                    .join(','),
                ].join(''),
              )
              .join(' '),
      runtime: o.runtime ?? 'engine',
      controllerConfig: o.config ?? 'none',
      // The controller runtime never predicts (its ETAs run in a worker thread against real time).
      predictions:
        queue === undefined
          ? 'off (no queue)'
          : (o.runtime ?? 'engine') === 'controller'
            ? 'off (controller runtime)'
            : (queue.predict ?? false),
      coStart: o.coStart ?? (starts?.coStart === true ? 'on (config)' : 'off'),
      placeBetweenRounds:
        o.placeBetweenRounds ?? (starts?.placeBetweenRounds === true ? 'on (config)' : 'off'),
      bind: o.bind ?? (starts?.bind === true ? 'on (config)' : 'off'),
      makeBeforeBreak: o.makeBeforeBreak ?? (config?.makeBeforeBreak === true ? 'on (config)' : 'off'),
      admitBy: admitBy ?? 'standalone',
      latencyConfig: o.latencyConfig ?? 'default network (3 zones, digest §10.2 round trips, no episodes)',
      spot: spotOn
        ? `on (${catalog.spot?.source === undefined ? 'no spot prices in the catalog' : `catalog spot snapshot ${catalog.spot.snapshotDate}`}; bursts per pool per month ${o.spotBursts ?? 0}; rebalance recommendations before ${Math.round((o.spotRebalance ?? 0) * 100)}% of reclaims, false ones ${o.spotFalseRebalances ?? 0} per instance-month)`
        : 'off (on demand only)',
      checkpointMinutes: o.checkpointMinutes ?? "the trace's, else 30",
    };
    // The trace's lower bounds, for the report's summary and cost chart (an LP per job event: ~2 s on Alibaba), at
    // spot prices where the run could buy spot.
    const spotBounds = spotOn && catalog.spot !== undefined;
    const bounds = costBounds(await loadIlpSolver(), catalog, trace.jobs, {
      spot: spotBounds ? catalog.spot : undefined,
    });
    const paths = await writeReport(o.out, results, settings, { ...bounds, atSpotPrices: spotBounds });
    process.stderr.write(`report written: ${paths.join(', ')}\n`);
  }
}

/** A sweep run's name: the scheduler and its value of time, e.g. `eva@vot=2`. */
export function valueOfTimeLabel(scheduler: string, value: ValueOfTimeSetting): string {
  return `${scheduler}@vot=${value}`;
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
      'queue layer: AWS-style quota per family group, e.g. p:gpus=16 or standard:vcpus=256 (repeatable)',
      (value: string, previous: string[] = []) => [...previous, value],
    )
    .option(
      '--queue-config <file>',
      'queue layer: a WFQ config (YAML/JSON, bare or as a `queue:` section, e.g. from fleetwise tune); implies --queue wfq',
    )
    .option(
      '--runtime <runtime>',
      `${RUNTIMES.join('|')}: the simulator's event engine (default), or the real controller (its rounds, admission, reconciler and state store) on a virtual clock against a simulated cloud and workers`,
    )
    .option(
      '--config <file>',
      "simulate a controller config (fleetwise.yaml): its caps, queue classes, round period and scheduler tunables; with --runtime controller, the controller's own settings",
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
      'with --spot on: bursts per spot pool per 30 days that reclaim all of its instances at once (default 0)',
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
