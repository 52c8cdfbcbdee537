import type { Catalog } from '../core/catalog.js';
import { createScheduler, NO_INTERFERENCE } from '../scheduler/registry.js';
import type { ControllerConfig } from './config.js';
import { schedulerCaps } from '../round/plan-caps.js';
import type { ControllerScheduler } from './scheduler-state.js';

/**
 * The scheduler the configuration names (`scheduler.name`, any registered policy), as a factory per catalog: the
 * controller builds one at start and a fresh one whenever prices are refreshed (ControllerDeps.schedulerFor).
 * Eva's tunables and the plan-level caps reach Eva and its ablations; baselines ignore them. Owl gets no
 * interference (NO_INTERFERENCE): a live cluster has no offline co-location profile to give it.
 */
export function configuredSchedulerFactory(
  config: Pick<ControllerConfig, 'scheduler' | 'caps'>,
): (catalog: Catalog) => ControllerScheduler {
  const { name, prices, packingEfficiency, paybackMargin, defaultRate } = config.scheduler;
  const caps = schedulerCaps(config.caps);
  return (catalog) =>
    createScheduler(
      name,
      {
        catalog,
        interferenceProfile: NO_INTERFERENCE,
        evaPrices: prices,
        evaPackingEfficiency: packingEfficiency,
        evaPaybackMargin: paybackMargin,
        evaDefaultRate: defaultRate,
        caps,
      },
      'scheduler.name',
    );
}
