import type { InstanceType } from '../core/catalog.js';
import type { FamilyDemand } from '../core/resources.js';
import type { PriceBook } from '../scheduler/reservation-price.js';

/**
 * The hosts a multi-task job needs under an instance-count cap, where the scheduler packs new instances tighter to keep
 * under it (scheduler/count-cap-merge.ts, Eva's rule): from the cheapest host of each task, the pair whose merge into
 * the cheapest type of `book` holding both adds least $/hour is made one (ties: the pair first in task order), while
 * the job needs more than `maxInstances` and some pair fits one type. Admission then counts a gang as a plan holding it
 * alone would: a 2-task job under a cap of one instance waits for room on one instance, not for ever. Undefined when a
 * task has no host.
 */
export function countCapHosts(
  demands: readonly FamilyDemand[],
  book: PriceBook,
  maxInstances: number,
): InstanceType[] | undefined {
  const hosts: { demands: FamilyDemand[]; type: InstanceType }[] = [];
  for (const d of demands) {
    const type = book.minType(d);
    if (type === undefined) return undefined;
    hosts.push({ demands: [d], type });
  }
  while (hosts.length > maxInstances) {
    let best: { i: number; j: number; type: InstanceType; added: number } | undefined;
    for (let i = 0; i < hosts.length; i++)
      for (let j = i + 1; j < hosts.length; j++) {
        const a = hosts[i] as (typeof hosts)[number];
        const b = hosts[j] as (typeof hosts)[number];
        const type = book.minTypeTogether([...a.demands, ...b.demands]);
        if (type === undefined) continue;
        const added = type.costPerHour - a.type.costPerHour - b.type.costPerHour;
        if (best === undefined || added < best.added - 1e-9) best = { i, j, type, added };
      }
    if (best === undefined) break;
    const a = hosts[best.i] as (typeof hosts)[number];
    const b = hosts[best.j] as (typeof hosts)[number];
    hosts[best.i] = { demands: [...a.demands, ...b.demands], type: best.type };
    hosts.splice(best.j, 1);
  }
  return hosts.map((h) => h.type);
}
