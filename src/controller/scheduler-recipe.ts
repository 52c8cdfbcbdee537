import type { Catalog } from '../core/catalog.js';
import { EvaScheduler, type EvaOptions } from '../scheduler/eva.js';
import {
  createScheduler,
  NO_INTERFERENCE,
  type SchedulerName,
  type SchedulerOptions,
} from '../scheduler/registry.js';
import type { ControllerScheduler } from './scheduler-state.js';

/**
 * How to build the controller's scheduler, as plain data: the controller builds its scheduler from it, and a
 * completion-time prediction rebuilds the same scheduler in its worker thread (prediction-worker.ts), where no object
 * of the controller's thread can go. Eva directly with its options (the controller's default), or any registered
 * policy by name (the configuration's `scheduler.name`). Owl gets no interference profile, as in the controller.
 */
export type SchedulerRecipe =
  | { readonly kind: 'eva'; readonly options: EvaOptions }
  | {
      readonly kind: 'registered';
      readonly name: SchedulerName;
      readonly options: Omit<SchedulerOptions, 'catalog' | 'interferenceProfile'>;
    };

export function buildScheduler(recipe: SchedulerRecipe, catalog: Catalog): ControllerScheduler {
  if (recipe.kind === 'eva') return new EvaScheduler(catalog, recipe.options);
  return createScheduler(
    recipe.name,
    { ...recipe.options, catalog, interferenceProfile: NO_INTERFERENCE },
    'scheduler.name',
  );
}
