import type { InstanceType } from '../core/catalog.js';
import type { SchedInstance } from '../core/model.js';
import { fits, type FamilyDemand } from '../core/resources.js';
import { EPS, type IlpTask, type RawInstance } from './ilp-model.js';
import { sumOn } from './reservation-price.js';
import type { Configuration, PlannedInstance } from './types.js';

/** From decoded instances to a named, checked configuration. */

/** To a billionth of a dollar, so sums of float prices print as they add up (58.497, not 58.49700000000001). */
export const roundDollars = (x: number): number => Math.round(x * 1e9) / 1e9;

/** The cheapest type that still hosts the instance's tasks (its own type if none is cheaper). */
export function downsize(
  inst: RawInstance,
  types: readonly InstanceType[],
  byName: ReadonlyMap<string, InstanceType>,
  taskById: ReadonlyMap<string, IlpTask>,
): RawInstance {
  const current = byName.get(inst.typeName) as InstanceType;
  const demands = inst.taskIds.map((id) => (taskById.get(id) as IlpTask).demand);
  let best = current;
  for (const k of types) {
    if (k.costPerHour >= best.costPerHour - EPS) continue;
    const total = sumOn(demands, k.family);
    if (total !== undefined && fits(total, k.capacity)) best = k;
  }
  return best === current ? inst : { typeName: best.name, taskIds: inst.taskIds };
}

/** Keep ids of existing instances of the same type (most shared tasks first); the rest are `new-1`, `new-2`, …. */
export function nameInstances(
  raw: readonly RawInstance[],
  existing: readonly Pick<SchedInstance, 'id' | 'typeName' | 'taskIds'>[],
): PlannedInstance[] {
  const pairs: { r: number; e: number; shared: number }[] = [];
  raw.forEach((inst, r) => {
    const mine = new Set(inst.taskIds);
    existing.forEach((ex, e) => {
      if (ex.typeName === inst.typeName)
        pairs.push({ r, e, shared: ex.taskIds.filter((id) => mine.has(id)).length });
    });
  });
  pairs.sort((a, b) => b.shared - a.shared || a.r - b.r || a.e - b.e);
  const idOf = new Map<number, string>();
  const usedExisting = new Set<number>();
  for (const p of pairs) {
    if (idOf.has(p.r) || usedExisting.has(p.e)) continue;
    idOf.set(p.r, (existing[p.e] as Pick<SchedInstance, 'id'>).id);
    usedExisting.add(p.e);
  }
  let next = 0;
  return raw.map((inst, r) => {
    const kept = idOf.get(r);
    return {
      id: kept ?? `new-${++next}`,
      typeName: inst.typeName,
      isNew: kept === undefined,
      taskIds: [...inst.taskIds],
    };
  });
}

/**
 * Check a configuration against the tasks: every task exactly once, on a family it can run on, within every
 * resource capacity. Returns its cost in $/hour; throws naming the first violation (a solver or decoding bug).
 */
export function validateConfiguration(
  configuration: Configuration,
  tasks: readonly IlpTask[],
  types: readonly InstanceType[],
): number {
  const typeByName = new Map(types.map((k) => [k.name, k]));
  const taskById = new Map(tasks.map((t) => [t.id, t]));
  const placed = new Set<string>();
  let costPerHour = 0;
  for (const inst of configuration.instances) {
    const type = typeByName.get(inst.typeName);
    if (type === undefined) throw new Error(`instance ${inst.id}: unknown type ${inst.typeName}`);
    if (inst.taskIds.length === 0) throw new Error(`instance ${inst.id}: hosts no task`);
    const demands: FamilyDemand[] = [];
    for (const id of inst.taskIds) {
      const task = taskById.get(id);
      if (task === undefined) throw new Error(`instance ${inst.id}: unknown task ${id}`);
      if (placed.has(id)) throw new Error(`task ${id} is placed twice`);
      placed.add(id);
      demands.push(task.demand);
    }
    const total = sumOn(demands, type.family);
    if (total === undefined)
      throw new Error(`instance ${inst.id}: a task cannot run on family ${type.family}`);
    if (!fits(total, type.capacity))
      throw new Error(
        `instance ${inst.id} (${type.name}): demand ${total.join('/')} exceeds ${type.capacity.join('/')}`,
      );
    costPerHour += type.costPerHour;
  }
  const missing = tasks.filter((t) => !placed.has(t.id));
  if (missing.length > 0) throw new Error(`tasks not placed: ${missing.map((t) => t.id).join(', ')}`);
  return costPerHour;
}
