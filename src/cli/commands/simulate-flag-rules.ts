import { seedVariesRun } from '../../bench/arms-plan.js';
import { ValidationError } from '../../core/validation.js';
import type { SchedulerName } from '../../scheduler/registry.js';
import type { RunRequest } from '../../sim/run-request.js';
import type { Trace } from '../../world/trace.js';
import { flagName } from './sim-flags.js';

/**
 * The baselines that model buying spot capacity: without the spot market (`--spot on`) they would buy on demand and
 * print on-demand figures under a spot name.
 */
export const SPOT_ONLY_SCHEDULERS: readonly SchedulerName[] = ['karpenter-spot', 'skypilot-spot'];

/** The spot-only baselines among `schedulers`, in the order given. */
export function spotOnlySchedulers(schedulers: readonly string[]): string[] {
  return schedulers.filter((s) => (SPOT_ONLY_SCHEDULERS as readonly string[]).includes(s));
}

/**
 * Flags of `fleetwise simulate` that act only beside another: given without it they would do nothing, silently, so
 * they are refused, naming the flag and what it needs.
 */
export interface DependentFlags {
  readonly runtime: 'engine' | 'controller';
  /** The schedulers run: the spot baselines among them need the spot market. */
  readonly schedulers: readonly string[];
  readonly spot?: 'on' | 'off' | undefined;
  readonly spotBursts?: number | undefined;
  readonly spotRebalance?: number | undefined;
  readonly spotFalseRebalances?: number | undefined;
  readonly targetSlowdown?: number | undefined;
  /** The values of time the Eva runs get (`auto` among them when one is learned). */
  readonly valuesOfTime: readonly (number | 'auto')[];
  /** `--value-of-time` as given (`valuesOfTime` holds a default without it). */
  readonly valueOfTime?: readonly (number | 'auto')[] | undefined;
  readonly evaDefaultRate?: number | undefined;
  readonly evaPrices?: string | undefined;
  readonly evaPackingEfficiency?: number | undefined;
  readonly evaPaybackMargin?: number | undefined;
  readonly bind?: 'on' | 'off' | undefined;
  readonly placeBetweenRounds?: 'on' | 'off' | undefined;
  readonly pollSeconds?: number | undefined;
  /** Whether the `--price-overrides` file gives spot prices (`spotPricePerType`). */
  readonly spotPriceOverrides?: boolean | undefined;
  /** How often jobs checkpoint: only a spot reclaim sends a job back to its latest periodic checkpoint. */
  readonly checkpointMinutes?: number | undefined;
  /** `--admit-by` as given: how waiting jobs are sized against the $/hour cap. */
  readonly admitBy?: string | undefined;
  /** Whether the runs have a $/hour cap: the flag's, a controller config's (`--config`) or a tuned queue config's. */
  readonly dollarCapped?: boolean | undefined;
}

/** Whether a scheduler is Eva or one of its ablations (`eva-rp`, …): the runs the Eva flags tune. */
export function isEvaScheduler(name: string): boolean {
  return name.startsWith('eva');
}

/** The flags that tune Eva alone, by field; with no Eva run they would be reported as settings no run took. */
const EVA_ONLY_FLAGS = [
  'valueOfTime',
  'targetSlowdown',
  'evaDefaultRate',
  'evaPrices',
  'evaPackingEfficiency',
  'evaPaybackMargin',
] as const satisfies readonly (keyof DependentFlags)[];

export function checkDependentFlags(o: DependentFlags): void {
  if (!o.schedulers.some(isEvaScheduler)) {
    const given = EVA_ONLY_FLAGS.find((f) => o[f] !== undefined);
    if (given !== undefined)
      throw new ValidationError(flagName(given), [
        `only Eva takes it, and no run here is Eva (${o.schedulers.join(', ')}): add an eva scheduler`,
      ]);
  }
  const spotOn = o.spot === 'on';
  const spotOnly = spotOnlySchedulers(o.schedulers);
  if (!spotOn && spotOnly.length > 0) {
    const many = spotOnly.length > 1;
    throw new ValidationError('--scheduler', [
      `${spotOnly.join(', ')} ${many ? 'buy' : 'buys'} spot capacity: ${many ? 'need' : 'needs'} --spot on ` +
        `(without it ${many ? 'their runs' : 'its run'} would buy on demand and print on-demand figures under a ` +
        'spot name)',
    ]);
  }
  if (!spotOn && o.spotBursts !== undefined)
    throw new ValidationError('--spot-bursts', ['needs --spot on (bursts reclaim spot instances)']);
  if (!spotOn && o.spotRebalance !== undefined)
    throw new ValidationError('--spot-rebalance', [
      'needs --spot on (recommendations warn of spot reclaims)',
    ]);
  if (!spotOn && o.spotFalseRebalances !== undefined)
    throw new ValidationError('--spot-false-rebalances', [
      'needs --spot on (false alarms are recommendations on spot instances)',
    ]);
  if (!spotOn && o.spotPriceOverrides === true)
    throw new ValidationError('--price-overrides', [
      'spotPricePerType prices spot instances: needs --spot on (without it the runs buy on demand only)',
    ]);
  if (!spotOn && o.checkpointMinutes !== undefined)
    throw new ValidationError('--checkpoint-minutes', [
      'needs --spot on (a checkpoint-stop saves all progress: only a spot reclaim loses what the last checkpoint ' +
        'did not save)',
    ]);
  if (o.admitBy !== undefined && o.dollarCapped !== true)
    throw new ValidationError('--admit-by', [
      'sizes waiting jobs against the $/hour cap: needs --cap-dollars-per-hour (or caps.maxCostPerHour in --config ' +
        'or --queue-config)',
    ]);
  if (o.targetSlowdown !== undefined && !o.valuesOfTime.includes('auto'))
    throw new ValidationError('--target-slowdown', [
      'applies to a learned value of time only: add auto to --value-of-time',
    ]);
  if (o.bind === 'on' && o.placeBetweenRounds !== 'on')
    throw new ValidationError('--bind', [
      'binds what is placed between rounds to instances still coming up: needs --place-between-rounds on',
    ]);
  if (o.pollSeconds !== undefined && o.runtime !== 'controller')
    throw new ValidationError('--poll-seconds', [
      "paces the controller's reconcile passes: needs --runtime controller (the engine acts at each event)",
    ]);
}

/**
 * `--seed` where it changes nothing: a trace read from a file as it is (eva, fleetwise, specs), with no spot market
 * and no simulated network to draw from it. Checked by `simulate` alone: `bench arms` gives every run its seed, and
 * refuses seeds that would all run the same itself. `request`: any of the runs (they share the trace, spot and
 * network); `trace`: its trace, loaded.
 */
export function checkSeedTaken(seed: number | undefined, request: RunRequest, trace: Trace): void {
  if (seed === undefined || seedVariesRun(request, trace)) return;
  throw new ValidationError('--seed', [
    `changes nothing here: ${request.trace.format} traces are read from their file as they are (alibaba, ` +
      'synthetic and success traces are drawn from the seed), and nothing else of these runs is seeded (the spot ' +
      'market of --spot on and the network of --latency-config, --latency-sensitive or jobs declaring one are): ' +
      'leave it out',
  ]);
}
