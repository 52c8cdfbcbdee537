import { loadCatalogFile } from '../cloud/catalog-file.js';
import { applyPriceOverrides, type Catalog, type PriceOverrides } from '../core/catalog.js';
import type { ValueOfTimeSetting } from '../core/model.js';
import { ValidationError } from '../core/validation.js';
import type { ControllerSettings } from './controller-runtime/execute.js';
import type { QueueCaps } from '../queue/caps.js';
import type { WfqConfig } from '../queue/wfq.js';
import { queueConfigFor, type QueueKind } from './queue-options.js';
import { schedulerCaps } from '../round/plan-caps.js';
import { type SimulationProgress, type StartOptions } from '../world/simulation-types.js';
import type { AdmitBy } from '../queue/admission.js';
import { runSimulation } from './run-simulation.js';
import { constantPairwise, type GroundTruth } from '../world/ground-truth.js';
import { createScheduler, type SchedulerName } from '../scheduler/registry.js';
import type { Scheduler } from '../scheduler/types.js';
import type { SerializedColocationTable } from '../scheduler/colocation-table.js';
import { loadContentionMatrix, loadTrace, type TraceFormat } from './traces/load.js';
import { withLatencySensitivity } from './traces/latency-mix.js';
import { withControllerJobIds, type TraceJobIds } from './traces/controller-job-ids.js';
import { parseWith } from '../core/validation.js';
import {
  checkSpotZones,
  defaultNetworkConfig,
  networkConfigSchema,
  resolveNetworkConfig,
  type NetworkConfig,
  type NetworkConfigInput,
} from '../world/network-config.js';
import type { Trace } from '../world/trace.js';
import type { RunResult } from '../world/run-result.js';
import type { NoticeHandling, SpotSimulation } from '../world/spot-world.js';
import { checkEveryJobAdmissible } from '../world/never-fits.js';

/**
 * Everything one simulated run needs, as plain data: a worker thread receives it and loads the trace, the
 * catalog and the ground truth itself, so no state (learned tables, caches) leaks between runs.
 */
export interface RunRequest {
  readonly scheduler: SchedulerName;
  /**
   * `engine` (default): the simulator's event engine. `controller`: the real Controller driven on a virtual clock
   * against a simulated cloud and worker fleet (src/sim/controller-runtime/).
   */
  readonly runtime?: 'engine' | 'controller' | undefined;
  /** Controller runtime: seconds between its reconcile passes when no simulated worker wakes it (default: round). */
  readonly pollSeconds?: number | undefined;
  /**
   * Controller runtime with `--config`: the user's controller config as the controller's own settings
   * (settingsFromConfig). The engine gets the same config mapped onto the fields of this request instead.
   */
  readonly controllerSettings?: ControllerSettings | undefined;
  readonly trace: {
    readonly path?: string | undefined;
    readonly format: TraceFormat;
    readonly jobs?: number | undefined;
    readonly seed?: number | undefined;
    readonly multiTaskShare?: number | undefined;
    /** Multiplies the arrival rate (`loadTrace`'s arrivalRateScale). */
    readonly arrivalRateScale?: number | undefined;
    /** A directory of job specs without an arrivals index: seconds between arrivals (`loadTrace`'s option). */
    readonly arrivalGapSeconds?: number | undefined;
    /** Share of multi-task jobs given a NoMora curve (`--latency-sensitive`, traces/latency-mix.ts). */
    readonly latencySensitiveShare?: number | undefined;
    /** `controller`: the jobs named as the controller names them (`--job-ids`, traces/controller-job-ids.ts). */
    readonly jobIds?: TraceJobIds | undefined;
  };
  /**
   * The simulated network (`--latency-config`, world/network-config.ts), as written; undefined: the default network,
   * and network metrics only when some job declares a network. Its draws follow `trace.seed` either way.
   */
  readonly network?: NetworkConfigInput | undefined;
  /** Default: the bundled us-east-1 catalog. */
  readonly catalogPath?: string | undefined;
  /**
   * Savings Plans or reserved prices laid over the catalog's (`--price-overrides`, or a controller config's
   * `priceOverrides:`), in both runtimes; checked against the catalog in the main thread before any run starts.
   */
  readonly priceOverrides?: PriceOverrides | undefined;
  /**
   * `--spot on`: the catalog's spot market is open (Eva buys spot where it pays, the spot baselines always) and
   * instances are reclaimed at its rates; absent (`--spot off`): on demand only, the catalog's spot prices ignored.
   */
  readonly spot?:
    | {
        readonly burstsPerPoolPerMonth?: number | undefined;
        /** Share of reclaims a rebalance recommendation precedes (SpotSimulation.rebalanceShare). */
        readonly rebalanceShare?: number | undefined;
        /** Recommendations with no reclaim behind them, per instance-month (SpotSimulation.falseRebalancesPerMonth). */
        readonly falseRebalancesPerMonth?: number | undefined;
      }
    | undefined;
  /** Every job checkpoints on its own this often (`--checkpoint-minutes`); default: the trace's, else 30. */
  readonly checkpointMinutes?: number | undefined;
  readonly roundSeconds?: number | undefined;
  /** Also plan right after arrivals and completions (RunOptions.earlyRounds). */
  readonly earlyRounds?: boolean | undefined;
  readonly evaDefaultRate?: number | undefined;
  /** A co-location table Eva starts from (`--colocation-table`): what a controller that has been running learned. */
  readonly evaLearnedColocation?: SerializedColocationTable | undefined;
  /** The result carries the co-location table Eva learned (`--save-colocation-table`). */
  readonly returnLearnedColocation?: boolean | undefined;
  /** Eva's task prices and packing efficiency (EvaOptions.reservationPrice / packingEfficiency). */
  readonly evaPrices?: 'standalone' | 'packed' | undefined;
  readonly evaPackingEfficiency?: number | undefined;
  /** Eva's payback margin k (EvaOptions.paybackMargin). */
  readonly evaPaybackMargin?: number | undefined;
  /** Eva's value of an hour of a job's completion time, $ or 'auto' (EvaOptions.valueOfTimePerJobHour). */
  readonly evaValueOfTime?: ValueOfTimeSetting | undefined;
  /** With an 'auto' value of time, the mean slowdown to hold (EvaOptions.targetSlowdown). */
  readonly evaTargetSlowdown?: number | undefined;
  /** The run's name in reports when not the scheduler's own (a value-of-time sweep runs eva once per value). */
  readonly label?: string | undefined;
  /** Replace the measured contention matrix by a uniform pairwise rate (Eva §6.4 ablation). */
  readonly pairwiseInterference?: number | undefined;
  /** Queue layer under caps: admission each round, and the caps passed to Eva's plans. */
  readonly queue?:
    | {
        readonly kind: QueueKind;
        readonly caps: QueueCaps;
        /** WFQ classes/weights/orderings to use instead of `queueConfigFor(kind)` (`fleetwise tune`). */
        readonly config?: WfqConfig | undefined;
        /** Completion-time predictions (PCS §4) for every job at its first round: predErrAvg/predErrP99. */
        readonly predict?: boolean | undefined;
        /** How jobs are sized against a $/hour cap (AdmissionSettings.admitBy). */
        readonly admitBy?: AdmitBy | undefined;
      }
    | undefined;
  /** Co-start, placement between rounds, binding (RunOptions.starts). */
  readonly starts?: StartOptions | undefined;
  /** A moving job works on until its new instances are ready (RunOptions.makeBeforeBreak). */
  readonly makeBeforeBreak?: boolean | undefined;
}

/** Messages a run worker posts to the main thread. */
export type RunWorkerMessage =
  | { readonly type: 'progress'; readonly fraction: number }
  | { readonly type: 'result'; readonly result: RunResult }
  | {
      readonly type: 'error';
      readonly message: string;
      /** Set when the failure was a ValidationError, so the main thread can report it the same way. */
      readonly validation?: { readonly source: string; readonly problems: readonly string[] } | undefined;
    };

/**
 * The measured contention matrix, or for `--pairwise-interference X` Eva §6.4's ablation: "if pairwise
 * co-location throughput is set to 0.9, then when two jobs are co-located, they both have normalized
 * throughput of 0.9"; with more neighbours the pairwise rates multiply (as the matrix composes them).
 */
export function groundTruthFor(request: Pick<RunRequest, 'pairwiseInterference'>): GroundTruth {
  if (request.pairwiseInterference !== undefined) return constantPairwise(request.pairwiseInterference);
  const matrix = loadContentionMatrix();
  return (target, others) => matrix.rate(target, others);
}

export function loadRequestCatalog(
  request: Pick<RunRequest, 'catalogPath' | 'spot' | 'priceOverrides'>,
): Catalog {
  const loaded = request.catalogPath === undefined ? loadCatalogFile() : loadCatalogFile(request.catalogPath);
  const catalog =
    request.priceOverrides === undefined ? loaded : applyPriceOverrides(loaded, request.priceOverrides);
  if (request.spot !== undefined) return catalog;
  // Spot off: no plan, baseline or launch can find a spot price.
  const { spot: _spot, ...onDemandOnly } = catalog;
  return onDemandOnly;
}

/**
 * How the runtime a scheduler stands for meets the interruption notice: Karpenter's interruption controller drains the
 * node and evicts its pods at once (digest industry-anchors §1.4), SkyPilot finds a preemption only by polling (§3),
 * and fleetwise's worker and controller checkpoint, drain and plan.
 */
export function noticeHandlingOf(scheduler: SchedulerName): NoticeHandling {
  switch (scheduler) {
    case 'karpenter-spot':
      return 'drain-and-evict';
    case 'skypilot-spot':
      return 'none';
    default:
      return 'checkpoint-and-drain';
  }
}

export function loadRequestTrace(request: Pick<RunRequest, 'trace' | 'network'>, catalog: Catalog): Trace {
  const { path, format, jobs, seed, multiTaskShare, arrivalRateScale, arrivalGapSeconds } = request.trace;
  const trace = loadTrace(path, {
    format,
    jobs,
    seed,
    multiTaskShare,
    arrivalRateScale,
    arrivalGapSeconds,
    instanceCatalog: catalog,
  });
  const share = request.trace.latencySensitiveShare ?? 0;
  const mixed =
    share === 0
      ? trace
      : withLatencySensitivity(
          trace,
          share,
          seed ?? 0,
          requestNetworkConfig(request, catalog).generatedGibPerHour,
        );
  // Renamed last, so that nothing drawn from the trace depends on which names it goes by.
  return request.trace.jobIds === 'controller' ? withControllerJobIds(mixed) : mixed;
}

/** The request's simulated network, resolved against the catalog's region (zone names). */
export function requestNetworkConfig(request: Pick<RunRequest, 'network'>, catalog: Catalog): NetworkConfig {
  if (request.network === undefined) return defaultNetworkConfig(catalog.region);
  return resolveNetworkConfig(
    parseWith(networkConfigSchema, request.network, '--latency-config'),
    catalog.region,
  );
}

/**
 * With spot on (`request.spot`), refuse a network whose zones share no spot pool with the catalog (checkSpotZones):
 * the request's network, else the default one, which every run has whether or not the network matters.
 */
export function checkRequestSpotZones(request: Pick<RunRequest, 'network' | 'spot'>, catalog: Catalog): void {
  if (request.spot !== undefined)
    checkSpotZones(requestNetworkConfig(request, catalog), catalog.spot, request.network !== undefined);
}

/**
 * The run's network, its noise and congestion drawn from `--seed`: given whenever the network matters (a network was
 * configured, latency-sensitive jobs were asked for, or some job of the trace declares one), so a config that only
 * restates the defaults changes nothing. Otherwise undefined, and the run reports no network metrics: its network
 * then only draws a zone for each instance launched without one, which no job reads.
 */
function runNetwork(
  request: RunRequest,
  catalog: Catalog,
  trace: Trace,
): { readonly config: NetworkConfig; readonly seed: number } | undefined {
  return networkMatters(request, trace)
    ? { config: requestNetworkConfig(request, catalog), seed: request.trace.seed ?? 0 }
    : undefined;
}

/**
 * Whether a run simulates the network, drawing its noise from `--seed`: a latency config, latency-sensitive jobs
 * marked, or a job of the trace declaring its network.
 */
export function networkMatters(request: Pick<RunRequest, 'network' | 'trace'>, trace: Trace): boolean {
  return (
    request.network !== undefined ||
    (request.trace.latencySensitiveShare ?? 0) > 0 ||
    trace.jobs.some((j) => j.network !== undefined)
  );
}

/** The request's scheduler, with its Eva tunables and the plan-level caps it keeps its plans under. */
export function requestScheduler(
  request: RunRequest,
  catalog: Catalog,
  groundTruth: GroundTruth,
  caps: QueueCaps | undefined,
): Scheduler {
  // Eva's domain round trips are the simulated network's until pairs of a domain are measured, then what they measure
  // (LatencyView.domainRtts), as a controller's placeholders are.
  const network = request.network === undefined ? undefined : requestNetworkConfig(request, catalog);
  return createScheduler(request.scheduler, {
    ...(network === undefined ? {} : { latency: { domainRtts: network.domainRtts } }),
    catalog,
    interferenceProfile: groundTruth,
    evaDefaultRate: request.evaDefaultRate,
    evaLearnedColocation: request.evaLearnedColocation,
    evaPrices: request.evaPrices,
    evaPackingEfficiency: request.evaPackingEfficiency,
    evaPaybackMargin: request.evaPaybackMargin,
    evaValueOfTime: request.evaValueOfTime,
    evaTargetSlowdown: request.evaTargetSlowdown,
    caps: caps === undefined || Object.keys(caps).length === 0 ? undefined : schedulerCaps(caps),
    spot: request.spot !== undefined,
  });
}

/** The co-location table the run's Eva learned, when the request asks for it (`--save-colocation-table`). */
export function learnedColocationOf(
  request: Pick<RunRequest, 'returnLearnedColocation'>,
  scheduler: Scheduler,
): Pick<RunResult, 'learnedColocation'> {
  const learned = request.returnLearnedColocation === true ? scheduler.learnedColocation?.() : undefined;
  return learned === undefined ? {} : { learnedColocation: learned };
}

/** The spot market's interruptions and the jobs' checkpoint cadence a request asks for, as both runtimes take them. */
export function spotRunOptions(request: RunRequest): {
  readonly spot?: SpotSimulation;
  readonly checkpointIntervalSeconds?: number;
} {
  return {
    ...(request.spot === undefined
      ? {}
      : {
          spot: {
            seed: request.trace.seed ?? 0,
            noticeHandling: noticeHandlingOf(request.scheduler),
            burstsPerPoolPerMonth: request.spot.burstsPerPoolPerMonth,
            rebalanceShare: request.spot.rebalanceShare,
            falseRebalancesPerMonth: request.spot.falseRebalancesPerMonth,
          },
        }),
    ...(request.checkpointMinutes === undefined
      ? {}
      : { checkpointIntervalSeconds: request.checkpointMinutes * 60 }),
  };
}

/**
 * Load everything the request names and run it in this thread. Progress is the share of the trace's jobs
 * finished, reported after each scheduling round.
 */
export function executeRun(request: RunRequest, onProgress?: (fraction: number) => void): RunResult {
  const catalog = loadRequestCatalog(request);
  const trace = loadRequestTrace(request, catalog);
  const groundTruth = groundTruthFor(request);
  const scheduler = requestScheduler(request, catalog, groundTruth, request.queue?.caps);
  const sizesSeconds = trace.jobs.map((j) => j.durationSeconds * j.tasks.length);
  // Before any round: a job the caps can never admit would hold the run until its time limit.
  if (request.queue !== undefined)
    checkEveryJobAdmissible(
      trace,
      catalog,
      request.queue.caps,
      request.queue.admitBy ?? 'standalone',
      request.queue.config ?? queueConfigFor(request.queue.kind, sizesSeconds),
      request.spot !== undefined,
    );
  checkRequestSpotZones(request, catalog);
  const network = runNetwork(request, catalog, trace);
  const result = runSimulation({
    trace,
    scheduler,
    catalog,
    groundTruth,
    ...(network === undefined ? {} : { network }),
    ...spotRunOptions(request),
    ...(request.roundSeconds !== undefined ? { roundSeconds: request.roundSeconds } : {}),
    ...(request.earlyRounds === true ? { earlyRounds: true } : {}),
    ...(request.starts !== undefined ? { starts: request.starts } : {}),
    ...(request.makeBeforeBreak === true ? { makeBeforeBreak: true } : {}),
    ...(request.queue !== undefined
      ? {
          queue: {
            caps: request.queue.caps,
            config: request.queue.config ?? queueConfigFor(request.queue.kind, sizesSeconds),
            predict: request.queue.predict ?? false,
            admitBy: request.queue.admitBy,
            spot: request.spot !== undefined,
          },
        }
      : {}),
    ...(onProgress !== undefined
      ? {
          onProgress: (p: SimulationProgress) =>
            onProgress(p.totalJobs > 0 ? p.finishedJobs / p.totalJobs : 1),
        }
      : {}),
  });
  // The registry name is the run's identity in every report, whatever the class calls itself.
  return {
    ...result,
    ...learnedColocationOf(request, scheduler),
    summary: {
      ...result.summary,
      scheduler: request.label ?? request.scheduler,
      ...(request.evaValueOfTime !== undefined && request.scheduler.startsWith('eva')
        ? { valueOfTimePerJobHour: request.evaValueOfTime }
        : {}),
    },
  };
}

export function errorMessage(error: unknown): RunWorkerMessage {
  if (error instanceof ValidationError)
    return {
      type: 'error',
      message: error.message,
      validation: { source: error.source, problems: error.problems },
    };
  return { type: 'error', message: error instanceof Error ? error.message : String(error) };
}
