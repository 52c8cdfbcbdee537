import { resolve } from 'node:path';
import { applyPriceOverrides, type Catalog } from '../../core/catalog.js';
import type { ValueOfTimeSetting } from '../../core/model.js';
import { ValidationError } from '../../core/validation.js';
import type { FamilyGroupQuota } from '../../core/quota-groups.js';
import type { ControllerConfig } from '../../controller/config.js';
import { loadControllerConfig } from '../../controller/config-loading.js';
import { admitByOf, capsOf, settingsFromConfig } from '../../controller/settings.js';
import { DEFAULT_VALUE_OF_TIME_PER_JOB_HOUR } from '../../scheduler/eva.js';
import type { CapSources, QueueCaps } from '../../queue/caps.js';
import { checkRequestSpotZones, type RunRequest } from '../../sim/run-request.js';
import { checkOutputDirectory } from '../output-target.js';
import { colocationTableRequest } from './colocation-table-file.js';
import {
  loadTraceFlags,
  offersSpot,
  readLatencyConfigFile,
  readPriceOverridesFile,
  readQueueConfigFile,
  refuseSpotPricesWithoutSpot,
  type PriceOverridesFromFile,
  type QueueConfigFile,
  type SchedulerSection,
} from './sim-flags.js';
import { checkDependentFlags, isEvaScheduler } from './simulate-flag-rules.js';
import {
  parseQuotaFlags,
  parseSimulateOptions,
  SIMULATE_OPTIONS_SOURCE,
  type RawSimulateOptions,
} from './simulate-options.js';

/**
 * Spot prices (`spotPricePerType`) or a spot discount (`spotDiscountPercent`) with spot off would price nothing:
 * refused, from `--price-overrides`, else a controller config's `priceOverrides:` (`--config`), else a tuned queue
 * config's (`--queue-config`): whichever the runs take. Checked before the catalog loads, since with spot off it has no
 * spot pools and the overrides' check against it would blame the catalog instead.
 */
function refuseSpotPricesWithSpotOff(
  flagPrices: PriceOverridesFromFile | undefined,
  configured: { readonly path: string; readonly config: ControllerConfig } | undefined,
  tunedPrices: PriceOverridesFromFile | undefined,
): void {
  const why = 'needs --spot on (without it the runs buy on demand only)';
  if (flagPrices !== undefined) {
    refuseSpotPricesWithoutSpot(flagPrices, why);
    return;
  }
  const overrides = configured?.config.priceOverrides;
  if (configured !== undefined && overrides !== undefined) {
    if (overrides.spotPricePerType !== undefined)
      throw new ValidationError(configured.path, [
        `priceOverrides.spotPricePerType: prices spot instances: ${why}`,
      ]);
    if (overrides.spotDiscountPercent !== undefined)
      throw new ValidationError(configured.path, [
        `priceOverrides.spotDiscountPercent: discounts spot instances: ${why}`,
      ]);
    return;
  }
  if (tunedPrices !== undefined) refuseSpotPricesWithoutSpot(tunedPrices, why, tunedPrices.source);
}

/**
 * The catalog file the runs take: `--catalog`, else a controller config's `catalog:` (resolved from the config file's
 * directory, as the controller resolves it), else a tuned queue config's, else the bundled one (undefined). A config
 * and a queue config naming different catalogs are refused, naming both: the queue was tuned on its catalog's prices
 * and the config's caps and price overrides are written for its own, so either choice would run something neither file
 * describes; `--catalog` settles it.
 */
function catalogChoice(
  flag: string | undefined,
  configured: NamedCatalog | undefined,
  tuned: NamedCatalog | undefined,
): string | undefined {
  if (flag !== undefined) return flag;
  if (
    configured?.catalog !== undefined &&
    tuned?.catalog !== undefined &&
    resolve(configured.catalog) !== resolve(tuned.catalog)
  )
    throw new ValidationError(`${configured.path}: catalog`, [
      `${configured.catalog}, but ${tuned.path} was tuned on ${tuned.catalog}: give --catalog FILE to choose ` +
        'one, or make the two files name the same catalog',
    ]);
  return configured?.catalog ?? tuned?.catalog;
}

/** The catalog a file names (absolute), if any, and the file. */
interface NamedCatalog {
  readonly path: string;
  readonly catalog: string | undefined;
}

/**
 * A tuned queue config's `scheduler:` section: the policy its queue was tuned for, which one of the runs must be (a
 * run of another policy would not be the run tune measured; `--scheduler` is required, so it cannot stand in for the
 * flag). Its tunables then apply to that policy's runs, as a controller config's `scheduler:` section's would.
 */
function tunedSchedulerOf(
  file: QueueConfigFile | undefined,
  schedulers: readonly string[],
  path: string | undefined,
): SchedulerSection | undefined {
  const section = file?.scheduler;
  if (section === undefined) return undefined;
  if (!schedulers.includes(section.name))
    throw new ValidationError(`${path ?? '--queue-config'}: scheduler`, [
      `name ${section.name}: the queue was tuned for ${section.name}, and --scheduler runs ` +
        `${schedulers.join(', ')}: add ${section.name} to --scheduler, or tune the queue for the policy run`,
    ]);
  return section;
}

/**
 * What a `simulate` command line asks for: its validated options, the trace and catalog, the controller config, the
 * queue layer, and one run request per (scheduler, value of time). `bench arms` plans its arms through this too.
 */
export function simulationPlan(raw: RawSimulateOptions) {
  const flags = parseSimulateOptions(raw);
  // Read before the catalog loads: a tuned queue config may name the catalog and the prices it ran with.
  const queueFile = flags.queueConfig === undefined ? undefined : readQueueConfigFile(flags.queueConfig);
  const tunedScheduler = tunedSchedulerOf(queueFile, flags.schedulers, flags.queueConfig);
  // A controller config read before the catalog loads too, for the catalog it names (the controller does the same:
  // the full load below takes its region from the catalog). The region here is irrelevant to what is read of it.
  const preliminary =
    flags.config === undefined
      ? undefined
      : {
          path: flags.config,
          config: loadControllerConfig({
            flags: { config: flags.config },
            defaultRegion: 'us-east-1',
            forSimulation: true,
          }),
        };
  const o = {
    ...flags,
    catalog: catalogChoice(
      flags.catalog,
      preliminary === undefined ? undefined : { path: preliminary.path, catalog: preliminary.config.catalog },
      flags.queueConfig === undefined ? undefined : { path: flags.queueConfig, catalog: queueFile?.catalog },
    ),
  };
  const flagPrices = o.priceOverrides === undefined ? undefined : readPriceOverridesFile(o.priceOverrides);
  if (o.spot !== 'on') refuseSpotPricesWithSpotOff(flagPrices, preliminary, queueFile?.priceOverrides);
  const loaded = loadTraceFlags(o, o.spot === 'on', flagPrices);
  const { traceSpec, trace } = loaded;
  // A catalog without spot pools sells nothing on spot: the runs would print on-demand figures under spot names.
  if (o.spot === 'on' && !offersSpot(loaded.catalog))
    throw new ValidationError(SIMULATE_OPTIONS_SOURCE, [
      '--spot: on needs a catalog with spot pools (a spot section with offerings; the bundled one has one)',
    ]);

  // A user's controller config: its caps, queue classes, round period and Eva tunables, under any flags given.
  const config =
    o.config === undefined
      ? undefined
      : loadControllerConfig({
          flags: { config: o.config },
          defaultRegion: loaded.catalog.region,
          catalog: loaded.catalog,
          // Its price overrides are checked against the catalog only when they are the ones the runs take.
          priceOverridesTaken: flagPrices === undefined,
          forSimulation: true,
        });
  // Prices as the flag says, else as a controller config's `priceOverrides:` says, else as a tuned queue config's
  // (both runtimes alike).
  const prices =
    flagPrices ??
    (config?.priceOverrides === undefined
      ? queueFile?.priceOverrides
      : { overrides: config.priceOverrides, source: `${o.config ?? 'config'}: priceOverrides` });
  const catalog =
    flagPrices === undefined && prices !== undefined
      ? applyPriceOverrides(loaded.catalog, prices.overrides, prices.source)
      : loaded.catalog;
  const quotas = runQuotas(o.quota ?? [], config?.caps, o.config, loaded.catalog);
  const queueConfig = queueFile === undefined ? config?.queue : queueFile.queue;
  // Each setting a tuned queue config carries: the flag, else a controller config's when its file gives it, else the
  // queue config's, else the controller config's default. A default the config loader filled in is no choice of the
  // user's, and must not undo the settings the queue was tuned under.
  const tuned = settingChoice(o.config, config, flags.queueConfig);
  const dollars = tuned.pick(
    'caps.maxCostPerHour',
    o.capDollarsPerHour,
    config?.caps.maxCostPerHour,
    queueFile?.caps?.maxCostPerHour,
  );
  const instances = tuned.pick(
    'caps.maxInstances',
    o.capInstances,
    config?.caps.maxInstances,
    queueFile?.caps?.maxInstances,
  );
  const capDollarsPerHour = dollars.value;
  const capInstances = instances.value;
  const roundSeconds = tuned.pick(
    'roundSeconds',
    o.roundSeconds,
    config?.roundSeconds,
    queueFile?.roundSeconds,
  ).value;
  if (queueConfig !== undefined && o.queue !== undefined && o.queue !== 'wfq')
    throw new ValidationError('--queue-config', [
      `a WFQ config needs --queue wfq (or no --queue), not --queue ${o.queue}`,
    ]);
  // A controller config sizes jobs as the controller would (by the plan's cost unless it says otherwise).
  const sizing = tuned.pick(
    'caps.admitBy',
    o.admitBy,
    config === undefined ? undefined : admitByOf(config),
    queueFile?.caps?.admitBy,
  );
  const admitBy = sizing.value;
  // The caps both runtimes run under: a controller config's, with the flags (or a tuned queue config) laid over them,
  // each $/hour and instance cap named by the file that set it, for the messages about it (a flag names itself).
  const capSources: CapSources = {
    ...(dollars.from === undefined ? {} : { maxCostPerHour: `${dollars.from} (${capDollarsPerHour})` }),
    ...(instances.from === undefined ? {} : { maxInstances: `${instances.from} (${capInstances})` }),
    ...(sizing.from === undefined || capDollarsPerHour === undefined ? {} : { admitBy: sizing.from }),
  };
  const caps: QueueCaps = {
    ...(config === undefined ? {} : capsOf(config.caps)),
    ...(capDollarsPerHour !== undefined ? { maxCostPerHour: capDollarsPerHour } : {}),
    ...(capInstances !== undefined ? { maxInstances: capInstances } : {}),
    ...(quotas.length > 0 ? { quotas } : {}),
    ...(Object.keys(capSources).length > 0 ? { sources: capSources } : {}),
  };
  // Any cap or --queue turns the queue layer on (fifo unless said otherwise), with predictions unless --no-predict. A
  // migrations cap alone too: the queue layer is the engine's only way to its scheduler's and its round's caps, which
  // the controller runtime always keeps.
  const queue: RunRequest['queue'] =
    o.queue === undefined && queueConfig === undefined && !capsAnything(caps)
      ? undefined
      : {
          kind: o.queue ?? (queueConfig === undefined ? 'fifo' : 'wfq'),
          ...(queueConfig === undefined ? {} : { config: queueConfig }),
          caps,
          predict: o.predict ?? true,
          ...(admitBy !== undefined ? { admitBy } : {}),
        };
  // Murmuration's parts (digest §7.5 arms) and make-before-break: each as its flag says, else as a controller config
  // (--config) or a tuned queue config says, as the other tuned settings are chosen (both runtimes alike: the
  // controller runtime runs the config's settings), else off; naming any of the parts reports the starts.
  const onFlag = (flag: 'on' | 'off' | undefined): boolean | undefined =>
    flag === undefined ? undefined : flag === 'on';
  const behaviours = {
    coStart: tuned.pick('coStart', onFlag(o.coStart), config?.coStart, queueFile?.coStart),
    placeBetweenRounds: tuned.pick(
      'placeBetweenRounds',
      onFlag(o.placeBetweenRounds),
      config?.placeBetweenRounds,
      queueFile?.placeBetweenRounds,
    ),
    bind: tuned.pick(
      'bindBetweenRounds',
      onFlag(o.bind),
      config?.bindBetweenRounds,
      queueFile?.bindBetweenRounds,
    ),
    makeBeforeBreak: tuned.pick(
      'makeBeforeBreak',
      onFlag(o.makeBeforeBreak),
      config?.makeBeforeBreak,
      queueFile?.makeBeforeBreak,
    ),
  };
  const coStartOn = behaviours.coStart.value;
  const placeOn = behaviours.placeBetweenRounds.value;
  const bindOn = behaviours.bind.value;
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
  // Eva's tunables for a run of `scheduler`: a controller config's `scheduler:` section's, else a tuned queue
  // config's when its queue was tuned for that policy (each under its flag).
  const tunedFor = (scheduler: string): SchedulerSection | undefined =>
    tunedScheduler?.name === scheduler ? tunedScheduler : undefined;
  const evaTunable = <K extends EvaTunable>(scheduler: string, key: K): SchedulerSection[K] | undefined =>
    config?.scheduler[key] ?? tunedFor(scheduler)?.[key];
  // The values of time the Eva runs take: the flag's, else each Eva run's configured one, else the default.
  const valuesOfTime = o.valueOfTime ?? [
    ...new Set(
      o.schedulers
        .filter(isEvaScheduler)
        .map((s) => evaTunable(s, 'valueOfTimePerJobHour') ?? DEFAULT_VALUE_OF_TIME_PER_JOB_HOUR),
    ),
  ];
  checkDependentFlags({
    ...o,
    runtime,
    valuesOfTime,
    spotPriceOverrides: flagPrices?.overrides.spotPricePerType !== undefined,
    dollarCapped: capDollarsPerHour !== undefined,
  });
  const spotOn = o.spot === 'on';
  // Refused here, before any run starts, rather than in each run's worker.
  if (runtime === 'engine')
    checkRequestSpotZones({ network, ...(spotOn ? { spot: {} } : {}) }, loaded.catalog);
  // A value-of-time sweep (several values) runs each Eva scheduler once per value, named by it; baselines run once.
  const sweep = (o.valueOfTime?.length ?? 0) > 1;
  const runs = o.schedulers.flatMap((scheduler) =>
    isEvaScheduler(scheduler)
      ? (o.valueOfTime ?? [undefined]).map((value) => ({
          scheduler,
          value,
          label: sweep ? valueOfTimeLabel(scheduler, value as ValueOfTimeSetting) : undefined,
        }))
      : [{ scheduler, value: undefined, label: undefined }],
  );
  const colocation = colocationTableRequest(o, runs.filter((r) => isEvaScheduler(r.scheduler)).length);
  if (o.out !== undefined) checkOutputDirectory(o.out, '--out');
  const requests: RunRequest[] = runs.map(({ scheduler, value, label }) => ({
    scheduler,
    label,
    evaValueOfTime: value ?? evaTunable(scheduler, 'valueOfTimePerJobHour'),
    evaTargetSlowdown: o.targetSlowdown ?? evaTunable(scheduler, 'targetSlowdown'),
    runtime,
    trace: traceSpec,
    catalogPath: o.catalog,
    ...(prices === undefined ? {} : { priceOverrides: prices.overrides }),
    roundSeconds,
    earlyRounds: o.earlyRounds,
    evaDefaultRate: o.evaDefaultRate ?? evaTunable(scheduler, 'defaultRate'),
    ...colocation,
    evaPrices: o.evaPrices ?? evaTunable(scheduler, 'prices'),
    evaPackingEfficiency: o.evaPackingEfficiency ?? evaTunable(scheduler, 'packingEfficiency'),
    evaPaybackMargin: o.evaPaybackMargin ?? evaTunable(scheduler, 'paybackMargin'),
    pairwiseInterference: o.pairwiseInterference,
    queue,
    ...(starts === undefined ? {} : { starts }),
    // A controller config's default is on, the simulator's off.
    makeBeforeBreak: behaviours.makeBeforeBreak.value,
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
            caps,
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
    behaviours,
    priceOverridesSource: prices?.source,
    tunedScheduler,
  };
}

/** A setting as the runs take it, and the file that set it when no flag did (`tuned.yaml: caps.admitBy`). */
interface Chosen<T> {
  readonly value: T | undefined;
  readonly from?: string | undefined;
}

/**
 * How the settings a tuned queue config (`--queue-config`) may carry are taken: the flag, else a controller config's
 * (`--config`) when its file gives it, else the queue config's, else the controller config's default.
 */
function settingChoice(
  configPath: string | undefined,
  config: ControllerConfig | undefined,
  queueConfigPath: string | undefined,
) {
  return {
    /** `path`: the setting's dotted path in both files. */
    pick<T>(path: string, flag: T | undefined, configured: T | undefined, tuned: T | undefined): Chosen<T> {
      const configFile = configPath ?? '--config';
      if (flag !== undefined) return { value: flag };
      if (configured !== undefined && config?.givenBy?.has(path) === true)
        return { value: configured, from: `${configFile}: ${path}` };
      if (tuned !== undefined)
        return { value: tuned, from: `${queueConfigPath ?? '--queue-config'}: ${path}` };
      if (configured !== undefined) return { value: configured, from: `${configFile}, by default` };
      return { value: undefined };
    },
  };
}

/** The Eva tunables of a `scheduler:` section (all but the policy's name). */
type EvaTunable = Exclude<keyof SchedulerSection, 'name'>;

/**
 * The quotas the runs take: a controller config's, each named by its file's entry, with a `--quota` for a group in
 * place of the config's for that group (as the other cap flags replace the config's caps).
 */
function runQuotas(
  flags: readonly string[],
  configCaps: ControllerConfig['caps'] | undefined,
  configPath: string | undefined,
  catalog: Catalog,
): FamilyGroupQuota[] {
  const fromFlags = parseQuotaFlags(flags, configCaps?.familyGroups, catalog);
  const fromConfig = configCaps === undefined ? [] : (capsOf(configCaps, configPath).quotas ?? []);
  return [...fromConfig.filter((q) => !fromFlags.some((f) => f.group === q.group)), ...fromFlags];
}

/** Whether the caps hold a run to anything: $/hour, instances, migrations per round, or a quota. */
function capsAnything(caps: QueueCaps): boolean {
  return (
    caps.maxCostPerHour !== undefined ||
    caps.maxInstances !== undefined ||
    caps.maxMigrationsPerRound !== undefined ||
    (caps.quotas ?? []).length > 0
  );
}

/** What a `simulate` command line asks for (`simulationPlan`). */
export type SimulationPlan = ReturnType<typeof simulationPlan>;

/** A sweep run's name: the scheduler and its value of time, e.g. `eva@vot=2`. */
export function valueOfTimeLabel(scheduler: string, value: ValueOfTimeSetting): string {
  return `${scheduler}@vot=${value}`;
}
