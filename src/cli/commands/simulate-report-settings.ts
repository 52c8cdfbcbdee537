import {
  DEFAULT_PACKING_EFFICIENCY,
  DEFAULT_PAYBACK_MARGIN,
  DEFAULT_TARGET_SLOWDOWN,
  DEFAULT_VALUE_OF_TIME_PER_JOB_HOUR,
} from '../../scheduler/eva.js';
import { DEFAULT_COLOCATION_RATE } from '../../scheduler/colocation-table.js';
import type { ReportSettings } from '../../sim/report/json.js';
import { DEFAULT_ROUND_SECONDS } from '../../world/simulation.js';
import { offersSpot, traceSettings } from './sim-flags.js';
import { isEvaScheduler } from './simulate-flag-rules.js';
import type { SimulationPlan } from './simulate-plan.js';

/** The settings a `simulate` report states: what ran, each as the runs took it (flag, else config, else default). */
export function reportSettings(plan: SimulationPlan): ReportSettings {
  const { o, catalog, trace, quotas, queue, capDollarsPerHour, capInstances, roundSeconds, admitBy } = plan;
  const { spotOn, behaviours, priceOverridesSource } = plan;
  return {
    ...traceSettings(o, trace, catalog, priceOverridesSource),
    // Defaults as their values: a reader of the report should not need the code to know what ran.
    roundSeconds: roundSeconds ?? DEFAULT_ROUND_SECONDS,
    earlyRounds: o.earlyRounds ?? false,
    ...evaSettings(plan),
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
    coStart: behaviourSetting(o.coStart, behaviours.coStart),
    placeBetweenRounds: behaviourSetting(o.placeBetweenRounds, behaviours.placeBetweenRounds),
    bind: behaviourSetting(o.bind, behaviours.bind),
    makeBeforeBreak: behaviourSetting(o.makeBeforeBreak, behaviours.makeBeforeBreak),
    admitBy: admitBy ?? 'standalone',
    latencyConfig: o.latencyConfig ?? 'default network (3 zones, digest §10.2 round trips, no episodes)',
    spot: spotOn
      ? `on (${catalog.spot === undefined || !offersSpot(catalog) ? 'no spot prices in the catalog' : `catalog spot snapshot ${catalog.spot.snapshotDate}`}; bursts per pool per month ${o.spotBursts ?? 0}; rebalance recommendations before ${Math.round((o.spotRebalance ?? 0) * 100)}% of reclaims, false ones ${o.spotFalseRebalances ?? 0} per instance-month)`
      : 'off (on demand only)',
    checkpointMinutes: o.checkpointMinutes ?? "the trace's, else 30",
  };
}

/**
 * A controller behaviour as the runs took it: the flag's word, else on or off and the file that chose it (a controller
 * config's, `--config`, by default or as written; a tuned queue config's, `--queue-config`), else off.
 */
function behaviourSetting(
  flag: 'on' | 'off' | undefined,
  chosen: { readonly value: boolean | undefined; readonly from?: string | undefined },
): string {
  if (flag !== undefined) return flag;
  const word = chosen.value === true ? 'on' : 'off';
  return chosen.from === undefined ? word : `${word} (${chosen.from})`;
}

/**
 * Eva's settings as its runs took them (the flag, else the config's `scheduler:` section, else a tuned queue config's
 * for the policy it was tuned for, else the default); none when no run is Eva, where they would read as settings some
 * run took.
 */
function evaSettings(plan: SimulationPlan): ReportSettings {
  const { o, config } = plan;
  const evaRuns = o.schedulers.filter(isEvaScheduler);
  if (evaRuns.length === 0) return {};
  // A tuned queue config's tunable applies to the runs of its policy only (none when that is a baseline): the other
  // Eva runs are said apart.
  const tunedScheduler =
    plan.tunedScheduler !== undefined && isEvaScheduler(plan.tunedScheduler.name)
      ? plan.tunedScheduler
      : undefined;
  const others = evaRuns.filter((s) => s !== tunedScheduler?.name);
  const setting = <V extends string | number>(
    given: V | undefined,
    tuned: V | undefined,
    fallback: V,
  ): V | string => {
    if (given !== undefined) return given;
    if (tuned === undefined || tunedScheduler === undefined) return fallback;
    return others.length === 0
      ? tuned
      : `${tuned} for ${tunedScheduler.name} (${o.queueConfig ?? 'queue config'}), ${fallback} for ${others.join(', ')}`;
  };
  const configured = config?.scheduler;
  return {
    evaDefaultRate: setting(
      o.evaDefaultRate ?? configured?.defaultRate,
      tunedScheduler?.defaultRate,
      DEFAULT_COLOCATION_RATE,
    ),
    colocationTable: o.colocationTable ?? 'none (Eva learns co-location from nothing)',
    evaPrices: setting(o.evaPrices ?? configured?.prices, tunedScheduler?.prices, 'packed'),
    evaPackingEfficiency: setting(
      o.evaPackingEfficiency ?? configured?.packingEfficiency,
      tunedScheduler?.packingEfficiency,
      DEFAULT_PACKING_EFFICIENCY,
    ),
    evaPaybackMargin: setting(
      o.evaPaybackMargin ?? configured?.paybackMargin,
      tunedScheduler?.paybackMargin,
      DEFAULT_PAYBACK_MARGIN,
    ),
    valueOfTimePerJobHour: setting(
      o.valueOfTime?.join(', ') ?? configured?.valueOfTimePerJobHour,
      tunedScheduler?.valueOfTimePerJobHour,
      DEFAULT_VALUE_OF_TIME_PER_JOB_HOUR,
    ),
    targetSlowdown: setting(
      o.targetSlowdown ?? configured?.targetSlowdown,
      tunedScheduler?.targetSlowdown,
      DEFAULT_TARGET_SLOWDOWN,
    ),
  };
}
