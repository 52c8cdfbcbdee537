import type { Catalog } from '../../core/catalog.js';
import type { ClusterSnapshot } from '../../core/model.js';
import { demandSignature, PriceBook } from '../reservation-price.js';
import type { Configuration, PlannedInstance, Plan, Scheduler } from '../types.js';

/**
 * No-Packing (Eva §6 baseline; reference `naive_scheduler.py`, research digest §2 "Baselines"): every new task
 * gets an instance of its own, of the cheapest type that can host it (its reservation-price type, over all
 * families); nothing ever moves; instances left empty are dropped (and so terminated). It is the calibration
 * baseline every normalized cost is measured against.
 */
export class NoPackingScheduler implements Scheduler {
  readonly name = 'no-packing';
  private readonly prices: PriceBook;

  constructor(catalog: Catalog) {
    this.prices = new PriceBook(catalog);
  }

  observe(): void {
    // Interference does not change where No-Packing puts anything.
  }

  plan(snapshot: ClusterSnapshot): Plan {
    const kept = new Map<string, string[]>(); // instance id → tasks staying on it
    const newInstances: PlannedInstance[] = [];
    for (const task of snapshot.tasks) {
      if (task.instanceId !== undefined) {
        // Placed tasks (running, or pinned while launching) stay where they are committed.
        const list = kept.get(task.instanceId) ?? [];
        list.push(task.id);
        kept.set(task.instanceId, list);
        continue;
      }
      const type = this.prices.minType(task.demand);
      if (type === undefined)
        throw new Error(
          `no-packing: no instance type can host task ${task.id} (demand ${demandSignature(task.demand)})`,
        );
      newInstances.push({
        id: `new-${newInstances.length + 1}`,
        typeName: type.name,
        isNew: true,
        taskIds: [task.id],
      });
    }
    const instances: PlannedInstance[] = snapshot.instances
      .filter((i) => kept.has(i.id))
      .map((i) => ({ id: i.id, typeName: i.typeName, isNew: false, taskIds: kept.get(i.id) as string[] }));
    const configuration: Configuration = { instances: [...instances, ...newInstances] };
    return {
      configuration,
      decision: {
        scheduler: this.name,
        nowSeconds: snapshot.nowSeconds,
        candidates: [],
        chosen: 'baseline',
        reason:
          newInstances.length === 0
            ? 'no new tasks; placed tasks stay, empty instances are released'
            : `${newInstances.length} new task(s), each on its own cheapest feasible instance type`,
        waiting: [],
        pinned: [],
      },
    };
  }
}
