import type { Catalog } from '../core/catalog.js';
import type { Caps } from '../core/model.js';
import { ValidationError } from '../core/validation.js';
import { KarpenterScheduler } from '../scheduler/baselines/karpenter.js';
import { NoPackingScheduler } from '../scheduler/baselines/no-packing.js';
import { OwlScheduler } from '../scheduler/baselines/owl.js';
import { StratusScheduler } from '../scheduler/baselines/stratus.js';
import { SynergyScheduler } from '../scheduler/baselines/synergy.js';
import { evaTunables, EvaScheduler } from '../scheduler/eva.js';
import type { Scheduler } from '../scheduler/types.js';
import type { GroundTruth } from '../world/ground-truth.js';
import { baseWorkloadOf } from './traces/workloads.js';

/** Every policy `fleetwise simulate` can run: Eva, its ablations (§6.3–§6.4) and the baselines. */
export const SCHEDULER_NAMES = [
  'eva',
  'eva-full-only',
  'eva-partial-only',
  'eva-rp',
  'eva-single',
  'no-packing',
  'stratus',
  'synergy',
  'owl',
  'karpenter',
  'karpenter-balanced',
  'karpenter-when-empty',
] as const;

export type SchedulerName = (typeof SCHEDULER_NAMES)[number];

export interface SchedulerOptions {
  readonly catalog: Catalog;
  /** Owl profiles co-locations offline (digest §2 "Owl": the static pkl), so it is given the ground truth. */
  readonly groundTruth: GroundTruth;
  /** Eva's prior per co-located task before anything is learned (§4.3: 0.95). */
  readonly evaDefaultRate?: number | undefined;
  /** Eva's task prices (EvaOptions.reservationPrice; default packed) and packing efficiency (default 0.8). */
  readonly evaPrices?: 'standalone' | 'packed' | undefined;
  readonly evaPackingEfficiency?: number | undefined;
  /** A move must save this many times its migration cost over the horizon (EvaOptions.paybackMargin; default 8). */
  readonly evaPaybackMargin?: number | undefined;
  /** Hard caps Eva keeps its plans under (EvaOptions.caps; the queue layer's safety rail). Baselines ignore them. */
  readonly caps?: Caps | undefined;
}

export function isSchedulerName(name: string): name is SchedulerName {
  return (SCHEDULER_NAMES as readonly string[]).includes(name);
}

function unknownSchedulerProblem(names: readonly string[]): string {
  const quoted = names.map((n) => `"${n}"`).join(', ');
  return `unknown scheduler${names.length > 1 ? 's' : ''} ${quoted}; valid: ${SCHEDULER_NAMES.join(', ')}`;
}

/**
 * The workload of a co-location key `<job name>_<task name>` (job name like `resnet18[3]`): the prefix before
 * `[`. A key without `[` (a job not named in Eva's convention) drops its `_<task name>` suffix instead.
 */
export function workloadOfKey(key: string): string {
  if (key.includes('[')) return baseWorkloadOf(key);
  const underscore = key.lastIndexOf('_');
  return underscore > 0 ? key.slice(0, underscore) : key;
}

/** Owl's oracle over co-location keys, answered by the ground truth on the keys' workloads. */
export function owlOracle(
  groundTruth: GroundTruth,
): (targetKey: string, othersKeys: readonly string[]) => number {
  return (targetKey, othersKeys) => groundTruth(workloadOfKey(targetKey), othersKeys.map(workloadOfKey));
}

/** A fresh scheduler (no state shared with other runs). Unknown names throw, listing the valid ones. */
export function createScheduler(name: string, options: SchedulerOptions): Scheduler {
  if (!isSchedulerName(name)) throw new ValidationError('--scheduler', [unknownSchedulerProblem([name])]);
  const { catalog } = options;
  switch (name) {
    case 'eva':
    case 'eva-full-only':
    case 'eva-partial-only':
    case 'eva-rp':
    case 'eva-single':
      return new EvaScheduler(catalog, {
        variant: name,
        ...evaTunables({
          prices: options.evaPrices,
          packingEfficiency: options.evaPackingEfficiency,
          paybackMargin: options.evaPaybackMargin,
          defaultRate: options.evaDefaultRate,
        }),
        ...(options.caps !== undefined ? { caps: options.caps } : {}),
      });
    case 'no-packing':
      return new NoPackingScheduler(catalog);
    case 'stratus':
      return new StratusScheduler(catalog);
    case 'synergy':
      return new SynergyScheduler(catalog);
    case 'owl':
      return new OwlScheduler(catalog, owlOracle(options.groundTruth));
    case 'karpenter':
      return new KarpenterScheduler(catalog, { policy: 'WhenEmptyOrUnderutilized' });
    case 'karpenter-balanced':
      return new KarpenterScheduler(catalog, { policy: 'Balanced' });
    case 'karpenter-when-empty':
      return new KarpenterScheduler(catalog, { policy: 'WhenEmpty' });
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
export function parseSchedulerList(text: string): SchedulerName[] {
  const names = text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  if (names.length === 0)
    throw new ValidationError('--scheduler', [`no scheduler given; valid: ${SCHEDULER_NAMES.join(', ')}`]);
  const unknown = names.filter((n) => !isSchedulerName(n));
  if (unknown.length > 0) throw new ValidationError('--scheduler', [unknownSchedulerProblem(unknown)]);
  return [...new Set(names.filter(isSchedulerName))];
}
