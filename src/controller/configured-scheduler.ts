import type { Catalog } from '../core/catalog.js';
import type { ControllerConfig } from './config.js';
import { schedulerCaps } from '../round/plan-caps.js';
import { buildScheduler, type SchedulerRecipe } from './scheduler-recipe.js';
import type { ControllerScheduler } from './scheduler-state.js';

/**
 * The scheduler the configuration names (`scheduler.name`, any registered policy), as a recipe (plain data, so a
 * prediction's worker thread can build the same scheduler) and as a factory per catalog: the controller builds one
 * at start and a fresh one whenever prices are refreshed (ControllerDeps.schedulerFor). Eva's tunables and the
 * plan-level caps reach Eva and its ablations; baselines ignore them. Owl gets no interference (NO_INTERFERENCE): a
 * live cluster has no offline co-location profile to give it.
 */
/**
 * Whether the cloud the controller runs on sells spot: EC2 does, so Eva plans spot in the catalog's pools (where the
 * catalog has a spot section, and where a job allows it and its expected cost pays); the local provider sells none.
 */
export interface SpotMarketAccess {
  readonly spot: boolean;
}

export function configuredSchedulerRecipe(
  config: Pick<ControllerConfig, 'scheduler' | 'caps'>,
  market: SpotMarketAccess = { spot: false },
): SchedulerRecipe {
  const {
    name,
    prices,
    packingEfficiency,
    paybackMargin,
    defaultRate,
    valueOfTimePerJobHour,
    targetSlowdown,
  } = config.scheduler;
  return {
    kind: 'registered',
    name,
    options: {
      evaPrices: prices,
      evaPackingEfficiency: packingEfficiency,
      evaPaybackMargin: paybackMargin,
      evaDefaultRate: defaultRate,
      evaValueOfTime: valueOfTimePerJobHour,
      evaTargetSlowdown: targetSlowdown,
      caps: schedulerCaps(config.caps),
      spot: market.spot,
    },
  };
}

export function configuredSchedulerFactory(
  config: Pick<ControllerConfig, 'scheduler' | 'caps'>,
  market: SpotMarketAccess = { spot: false },
): (catalog: Catalog) => ControllerScheduler {
  const recipe = configuredSchedulerRecipe(config, market);
  return (catalog) => buildScheduler(recipe, catalog);
}
