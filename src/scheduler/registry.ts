import type { Catalog } from '../core/catalog.js';
import type { Caps, ValueOfTimeSetting } from '../core/model.js';
import { ValidationError } from '../core/validation.js';
import { KarpenterScheduler } from './baselines/karpenter.js';
import { NoPackingScheduler } from './baselines/no-packing.js';
import { OwlScheduler, type InterferenceOracle } from './baselines/owl.js';
import { StratusScheduler } from './baselines/stratus.js';
import { SynergyScheduler } from './baselines/synergy.js';
import { SpotBaseline } from './baselines/spot-baseline.js';
import { evaTunables, EvaScheduler } from './eva.js';
import type { Scheduler } from './types.js';
import type { LatencyOptions } from './latency-view.js';
import type { SerializedColocationTable } from './colocation-table.js';

/**
 * Every registered scheduling policy: Eva, its ablations (§6.3–§6.4) and the baselines. The simulator runs any of
 * them (`fleetwise simulate --scheduler`), and so does the controller (its config's `scheduler.name`).
 */
export const SCHEDULER_NAMES = [
  'eva',
  'eva-full-only',
  'eva-partial-only',
  'eva-rp',
  'eva-single',
  'eva-latency-blind',
  'eva-latency-no-migration',
  'no-packing',
  'stratus',
  'synergy',
  'owl',
  'karpenter',
  'karpenter-balanced',
  'karpenter-when-empty',
  'karpenter-spot',
  'skypilot-spot',
] as const;

export type SchedulerName = (typeof SCHEDULER_NAMES)[number];

/**
 * Normalized throughput of a task of `workload` while co-located with tasks of `others` (1 = unaffected). The
 * simulator's interference ground truth has this shape; the controller has no such profile.
 */
export type InterferenceProfile = (workload: string, others: readonly string[]) => number;

/** No interference at all: what a policy that needs an offline profile gets where none was measured. */
export const NO_INTERFERENCE: InterferenceProfile = () => 1;

export interface SchedulerOptions {
  readonly catalog: Catalog;
  /**
   * Owl profiles co-locations offline (digest §2 "Owl": the static pkl): the simulator gives it the ground truth,
   * the controller NO_INTERFERENCE. The other policies ignore it.
   */
  readonly interferenceProfile: InterferenceProfile;
  /** Eva's prior per co-located task before anything is learned (§4.3: 0.95). */
  readonly evaDefaultRate?: number | undefined;
  /** A co-location table Eva starts from instead of an empty one (EvaOptions.learnedColocation). */
  readonly evaLearnedColocation?: SerializedColocationTable | undefined;
  /** Eva's task prices (EvaOptions.reservationPrice; default packed) and packing efficiency (default 0.7). */
  readonly evaPrices?: 'standalone' | 'packed' | undefined;
  readonly evaPackingEfficiency?: number | undefined;
  /** A move must save this many times its migration cost over the horizon (EvaOptions.paybackMargin; default 8). */
  readonly evaPaybackMargin?: number | undefined;
  /** $ per hour of a job's completion time, for jobs that do not say, or 'auto' (EvaOptions.valueOfTimePerJobHour). */
  readonly evaValueOfTime?: ValueOfTimeSetting | undefined;
  /** With an 'auto' value of time, the mean slowdown of running jobs to hold (EvaOptions.targetSlowdown). */
  readonly evaTargetSlowdown?: number | undefined;
  /** Hard caps Eva keeps its plans under (EvaOptions.caps; the queue layer's safety rail). Baselines ignore them. */
  readonly caps?: Caps | undefined;
  /** Eva's latency-aware placement settings (domain defaults, thresholds, migration trigger). Baselines ignore them. */
  readonly latency?: LatencyOptions | undefined;
  /** Eva buys spot capacity where the catalog offers it (EvaOptions.spot; default false). Baselines ignore it. */
  readonly spot?: boolean | undefined;
}

export function isSchedulerName(name: string): name is SchedulerName {
  return (SCHEDULER_NAMES as readonly string[]).includes(name);
}

/** `unknown scheduler "x"; valid: eva, …`, for every place that takes a scheduler name. */
export function unknownSchedulerProblem(names: readonly string[]): string {
  const quoted = names.map((n) => `"${n}"`).join(', ');
  return `unknown scheduler${names.length > 1 ? 's' : ''} ${quoted}; valid: ${SCHEDULER_NAMES.join(', ')}`;
}

/**
 * The workload of a co-location key `<job name>_<task name>` (job name like `resnet18[3]`): the prefix before
 * `[`. A key without `[` (a job not named in Eva's convention) drops its `_<task name>` suffix instead.
 */
export function workloadOfKey(key: string): string {
  const bracket = key.indexOf('[');
  if (bracket >= 0) return key.slice(0, bracket);
  const underscore = key.lastIndexOf('_');
  return underscore > 0 ? key.slice(0, underscore) : key;
}

/** Owl's oracle over co-location keys, answered by the interference profile on the keys' workloads. */
export function owlOracle(profile: InterferenceProfile): InterferenceOracle {
  return (targetKey, othersKeys) => profile(workloadOfKey(targetKey), othersKeys.map(workloadOfKey));
}

/**
 * A fresh scheduler (no state shared with other runs). Unknown names throw, listing the valid ones; `field` names
 * where the name came from (default `scheduler`).
 */
export function createScheduler(name: string, options: SchedulerOptions, field = 'scheduler'): Scheduler {
  if (!isSchedulerName(name)) throw new ValidationError(field, [unknownSchedulerProblem([name])]);
  const { catalog } = options;
  switch (name) {
    case 'eva':
    case 'eva-full-only':
    case 'eva-partial-only':
    case 'eva-rp':
    case 'eva-single':
    case 'eva-latency-blind':
    case 'eva-latency-no-migration':
      return new EvaScheduler(catalog, {
        // The latency ablations are Eva with the network ignored, or with slow jobs never moved for it.
        variant: name === 'eva-latency-blind' || name === 'eva-latency-no-migration' ? 'eva' : name,
        ...evaTunables({
          prices: options.evaPrices,
          packingEfficiency: options.evaPackingEfficiency,
          paybackMargin: options.evaPaybackMargin,
          defaultRate: options.evaDefaultRate,
          valueOfTimePerJobHour: options.evaValueOfTime,
          targetSlowdown: options.evaTargetSlowdown,
        }),
        ...(options.caps !== undefined ? { caps: options.caps } : {}),
        ...(options.evaLearnedColocation !== undefined
          ? { learnedColocation: options.evaLearnedColocation }
          : {}),
        latencyAware: name !== 'eva-latency-blind',
        ...(options.spot === true ? { spot: true } : {}),
        latency: { ...options.latency, ...(name === 'eva-latency-no-migration' ? { migrate: false } : {}) },
      });
    case 'no-packing':
      return new NoPackingScheduler(catalog);
    case 'stratus':
      return new StratusScheduler(catalog);
    case 'synergy':
      return new SynergyScheduler(catalog);
    case 'owl':
      return new OwlScheduler(catalog, owlOracle(options.interferenceProfile));
    case 'karpenter':
      return new KarpenterScheduler(catalog, { policy: 'WhenEmptyOrUnderutilized' });
    case 'karpenter-balanced':
      return new KarpenterScheduler(catalog, { policy: 'Balanced' });
    case 'karpenter-when-empty':
      return new KarpenterScheduler(catalog, { policy: 'WhenEmpty' });
    case 'karpenter-spot':
    case 'skypilot-spot':
      return new SpotBaseline(catalog, name);
    default: {
      const unreachable: never = name;
      throw new Error(unknownSchedulerProblem([String(unreachable)]));
    }
  }
}

/**
 * Parse `--scheduler a,b,c`: trimmed, duplicates dropped (first occurrence kept); every unknown name is
 * reported at once with the list of valid names.
 */
export function parseSchedulerList(text: string, flag = '--scheduler'): SchedulerName[] {
  const names = text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  if (names.length === 0)
    throw new ValidationError(flag, [`no scheduler given; valid: ${SCHEDULER_NAMES.join(', ')}`]);
  const unknown = names.filter((n) => !isSchedulerName(n));
  if (unknown.length > 0) throw new ValidationError(flag, [unknownSchedulerProblem(unknown)]);
  return [...new Set(names.filter(isSchedulerName))];
}
