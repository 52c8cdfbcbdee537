import { setupSeconds } from '../core/catalog.js';
import type { FamilyDemand } from '../core/resources.js';
import type { PriceBook } from './reservation-price.js';

/**
 * Seconds a launch made now for a job takes until it can run: the longest setup among its tasks' reservation-price
 * types. A job starts when all its tasks do, so its last instance to come up sets the time, whether that launch
 * replaces a spot instance an interruption took (the round's and between rounds' spot bound) or is the launch a
 * waiting job would otherwise wait for (binding). A task no type can host adds nothing: no launch is made for it.
 */
export function jobLaunchSeconds(
  book: Pick<PriceBook, 'minType'>,
  tasks: Iterable<{ readonly demand: FamilyDemand }>,
): number {
  let seconds = 0;
  for (const t of tasks) {
    const type = book.minType(t.demand);
    if (type !== undefined) seconds = Math.max(seconds, setupSeconds(type));
  }
  return seconds;
}
