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
export function configuredSchedulerRecipe(
  config: Pick<ControllerConfig, 'scheduler' | 'caps'>,
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
    },
  };
}

export function configuredSchedulerFactory(
  config: Pick<ControllerConfig, 'scheduler' | 'caps'>,
): (catalog: Catalog) => ControllerScheduler {
  const recipe = configuredSchedulerRecipe(config);
  return (catalog) => buildScheduler(recipe, catalog);
}
