import { compareText } from '../core/compare.js';
import type { DraftInstance } from './full-reconfiguration.js';
import type { PackTask } from './packing.js';
import { draftWithTasks } from './reconfiguration.js';
import type { PriceBook } from './reservation-price.js';

/**
 * A plan with more instances than `maxInstances` first packs its new instances tighter before any job is sent back to
 * wait: two new instances become one of the cheapest type that hosts all their tasks together. Eva packs for dollars,
 * so tasks it plans on two small instances (cheaper) may well fit one larger one; under a count cap that keeps their
 * jobs running rather than waiting for the next round. New instances with a placement (latency-aware groups) are left
 * as placed.
 */

/**
 * `drafts` with the pair of new instances whose merge adds the least $/hour (ties: the pair first by id) made one,
 * under the id of the pair's first; undefined when no two new instances fit on one type of `book`.
 */
export function mergeNewInstances(
  drafts: readonly DraftInstance[],
  tasks: ReadonlyMap<string, PackTask>,
  book: PriceBook,
  pricePerHour: (d: DraftInstance) => number,
): DraftInstance[] | undefined {
  const movable = drafts
    .filter((d) => d.isNew && d.placement === undefined)
    .sort((a, b) => compareText(a.id, b.id));
  const tasksOf = (d: DraftInstance): PackTask[] => d.taskIds.map((id) => tasks.get(id) as PackTask);
  let best: { a: DraftInstance; b: DraftInstance; merged: DraftInstance; added: number } | undefined;
  for (let i = 0; i < movable.length; i++) {
    const a = movable[i] as DraftInstance;
    for (let j = i + 1; j < movable.length; j++) {
      const b = movable[j] as DraftInstance;
      const together = [...tasksOf(a), ...tasksOf(b)];
      const type = book.minTypeTogether(together.map((t) => t.demand));
      if (type === undefined) continue;
      const merged = draftWithTasks({ id: a.id, type, isNew: true }, together);
      const added = pricePerHour(merged) - pricePerHour(a) - pricePerHour(b);
      if (best === undefined || added < best.added - 1e-9) best = { a, b, merged, added };
    }
  }
  if (best === undefined) return undefined;
  const { a, b, merged } = best;
  return drafts.filter((d) => d !== b).map((d) => (d === a ? merged : d));
}
