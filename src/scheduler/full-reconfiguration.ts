import type { InstanceType } from '../core/catalog.js';
import type { InstancePlacement } from '../core/network.js';
import { fits, type FamilyDemand, type Resources } from '../core/resources.js';
import { ColocationTable } from './colocation-table.js';
import {
  classify,
  compositionDemandOn,
  compositionValue,
  Composition,
  growSet,
  repeatCount,
  type PackTask,
  type RateModel,
  type TaskClass,
} from './packing.js';
import type { PriceBook } from './reservation-price.js';
import { demandSignature } from './reservation-price.js';
import type { Configuration, PlannedInstance } from './types.js';

/** An instance that exists (running or launching) and may be reused by the plan. */
export interface ExistingInstance {
  readonly id: string;
  readonly typeName: string;
  /** Tasks committed to it now; the instance preferred for reuse is the one with the most (reference). */
  readonly committedTaskCount: number;
}

/** Mutable planned instance while a plan is being built. */
export interface DraftInstance {
  readonly id: string;
  readonly type: InstanceType;
  readonly isNew: boolean;
  readonly taskIds: string[];
  readonly composition: Composition;
  used: Resources;
  /** A new instance's zone and placement group, when its tasks need them (latency-aware placement). */
  placement?: InstancePlacement | undefined;
}

/**
 * Where tasks may go beyond capacity (latency-aware placement, src/scheduler/latency-placement.ts; spot: never jobs off
 * spot instances, src/scheduler/spot-host-rules.ts): the packing loops ask before they add a task to an instance or
 * reuse a free one, and say where they put each class. Without rules, any instance with room will do (Eva).
 */
export interface PlacementRules {
  /** Whether a member of `cls` may join `draft`, an instance already in the plan. */
  mayFill(cls: TaskClass, draft: DraftInstance): boolean;
  /** Whether the set `comp` may go on the free existing instance `instanceId` (else a new instance is launched). */
  mayReuse(comp: Composition, instanceId: string): boolean;
  /** A member of `cls` was placed on `draft`. */
  placed(cls: TaskClass, draft: DraftInstance): void;
}

/** Hands out ids `new-1`, `new-2`, … for instances to launch. */
export class NewIds {
  private n = 0;
  next(): string {
    this.n += 1;
    return `new-${this.n}`;
  }
}

/** Free existing instances by type, most-committed first (Eva reference `top_down_provisioning`). */
export class FreePool {
  private readonly byType = new Map<string, ExistingInstance[]>();

  constructor(instances: readonly ExistingInstance[]) {
    for (const inst of instances) {
      const list = this.byType.get(inst.typeName) ?? [];
      list.push(inst);
      this.byType.set(inst.typeName, list);
    }
    for (const list of this.byType.values())
      list.sort((a, b) => b.committedTaskCount - a.committedTaskCount || (a.id < b.id ? -1 : 1));
  }

  peek(typeName: string): ExistingInstance | undefined {
    return this.byType.get(typeName)?.[0];
  }

  has(typeName: string): boolean {
    return (this.byType.get(typeName)?.length ?? 0) > 0;
  }

  /** Take a specific free instance (or the preferred one of the type that `accept` allows, if given). */
  take(typeName: string, id?: string, accept?: (id: string) => boolean): ExistingInstance | undefined {
    const list = this.byType.get(typeName);
    if (list === undefined || list.length === 0) return undefined;
    const i =
      id === undefined
        ? accept === undefined
          ? 0
          : list.findIndex((x) => accept(x.id))
        : list.findIndex((x) => x.id === id && (accept?.(x.id) ?? true));
    if (i < 0) return undefined;
    return list.splice(i, 1)[0];
  }
}

function draftFor(type: InstanceType, existing: ExistingInstance | undefined, ids: NewIds): DraftInstance {
  return {
    id: existing?.id ?? ids.next(),
    type,
    isNew: existing === undefined,
    taskIds: [],
    composition: new Composition(),
    used: [0, 0, 0],
  };
}

function place(draft: DraftInstance, cls: TaskClass): void {
  const t = cls.take(draft.isNew ? undefined : draft.id);
  const d = cls.demandOn(draft.type.family) as Resources;
  draft.taskIds.push(t.id);
  draft.composition.add(cls);
  draft.used = [draft.used[0] + d[0], draft.used[1] + d[1], draft.used[2] + d[2]];
}

/**
 * Top-down provisioning (Eva Algorithm 1, §4.2–§4.4): instance types from the most to the least expensive; for
 * each, grow a task set greedily by throughput-normalized reservation price; keep it when it is cost-efficient
 * (TNRP ≥ the type's price, or a single task on its own cheapest type), shrink it to the cheapest type that holds
 * it, reuse a free existing instance of that type where one exists, and try another instance of the same type;
 * otherwise the tasks whose cheapest type this is go alone, and the next cheaper type is tried.
 * Every class ends empty: each task lands on some instance.
 */
export function topDownProvisioning(
  book: PriceBook,
  classes: readonly TaskClass[],
  model: RateModel,
  free: FreePool,
  ids: NewIds,
  rules?: PlacementRules,
): DraftInstance[] {
  const out: DraftInstance[] = [];
  const eps = 1e-9;
  const minTypeName = new Map(classes.map((c) => [c, book.minType(c.demand)?.name]));
  for (const type of book.byCostDescending) {
    const candidates = classes.filter((c) => {
      const d = c.demandOn(type.family);
      return d !== undefined && fits(d, type.capacity);
    });
    for (;;) {
      if (!candidates.some((c) => c.count > 0)) break;
      const reuse = free.peek(type.name);
      const grown = growSet(type, candidates, model, reuse?.id);
      const comp = grown.composition;
      const single = comp.size === 1 ? (comp.classes[0] as TaskClass) : undefined;
      // An empty set (no task adds value here, e.g. a latency-sensitive task valued at nothing where its root is not
      // yet placed) is not cost-efficient: the tasks whose cheapest type this is still go alone, so none is left over.
      const costEfficient =
        comp.size > 0 &&
        (type.costPerHour <= grown.value + eps ||
          (single !== undefined && minTypeName.get(single) === type.name));
      if (!costEfficient) {
        // Reject (Algorithm 1 line 18): tasks whose cheapest type is this one go alone, then a cheaper type.
        for (const cls of classes) {
          if (cls.count === 0 || minTypeName.get(cls) !== type.name) continue;
          while (cls.count > 0) {
            const alone = new Composition();
            alone.add(cls);
            const draft = draftFor(type, free.take(type.name, undefined, reusable(rules, alone)), ids);
            place(draft, cls);
            rules?.placed(cls, draft);
            out.push(draft);
          }
        }
        break;
      }
      // Downsize (reference: cheapest type overall whose capacity holds the set's demand on that type's family).
      const target = cheapestHostingComposition(book, comp) ?? type;
      const canReplicate = reuse === undefined && !free.has(target.name);
      const times = canReplicate ? repeatCount(grown) : 1;
      const accept = reusable(rules, comp);
      for (let r = 0; r < times; r++) {
        const existing =
          target.name === type.name && reuse !== undefined
            ? (free.take(type.name, reuse.id, accept) ??
              (accept === undefined ? undefined : free.take(type.name, undefined, accept)))
            : free.take(target.name, undefined, accept);
        const draft = draftFor(target, existing, ids);
        comp.classes.forEach((cls, i) => {
          for (let k = 0; k < (comp.counts[i] as number); k++) place(draft, cls);
          rules?.placed(cls, draft);
        });
        out.push(draft);
      }
    }
  }
  const left = classes.filter((c) => c.count > 0);
  if (left.length > 0)
    throw new Error(`top-down provisioning left tasks unplaced: ${left.map((c) => c.key).join(', ')}`);
  return out;
}

/** Which free instances a set may reuse under the rules (undefined: any). */
function reusable(
  rules: PlacementRules | undefined,
  comp: Composition,
): ((id: string) => boolean) | undefined {
  if (rules === undefined || (comp.latencyMembers === 0 && comp.onDemandMembers === 0)) return undefined;
  return (id) => rules.mayReuse(comp, id);
}

function cheapestHostingComposition(book: PriceBook, comp: Composition): InstanceType | undefined {
  return book.byCostAscending.find((t) => {
    const total = compositionDemandOn(comp, t.family);
    return total !== undefined && fits(total, t.capacity);
  });
}

/**
 * Fill the free capacity of instances already in the plan (Eva reference: the pinned-instance step of Full
 * Reconfiguration and step 3 of Partial Reconfiguration). Each step takes the (class, instance) pair with the best
 * (marginal TNRP gain, already on that instance, alignment); a task is added only where it raises the instance's
 * TNRP, so free space is used but interference never makes an instance worth less (a guard the reference lacks).
 */
export function fillInstances(
  drafts: readonly DraftInstance[],
  classes: readonly TaskClass[],
  model: RateModel,
  rules?: PlacementRules,
): void {
  const current = drafts.map((d) => compositionValue(d.composition, model, true));
  for (;;) {
    let best: { gain: number; on: number; align: number; di: number; cls: TaskClass } | undefined;
    drafts.forEach((draft, di) => {
      const cap = draft.type.capacity;
      for (const cls of classes) {
        if (cls.count === 0) continue;
        const d = cls.demandOn(draft.type.family);
        if (d === undefined) continue;
        if (!fits([draft.used[0] + d[0], draft.used[1] + d[1], draft.used[2] + d[2]], cap)) continue;
        if (
          rules !== undefined &&
          (cls.latency !== undefined || cls.onDemandOnly) &&
          !rules.mayFill(cls, draft)
        )
          continue;
        const gain = compositionValue(draft.composition, model, true, cls) - (current[di] as number);
        if (!(gain > 1e-12)) continue;
        const on = cls.countOn(draft.isNew ? undefined : draft.id) > 0 ? 1 : 0;
        let align = 0;
        for (let i = 0; i < 3; i++) {
          const c = cap[i] as number;
          if (c > 0) align += ((d[i] as number) / c) * ((c - (draft.used[i] as number)) / c);
        }
        if (
          best === undefined ||
          gain > best.gain ||
          (gain === best.gain && (on > best.on || (on === best.on && align > best.align)))
        )
          best = { gain, on, align, di, cls };
      }
    });
    if (best === undefined) return;
    const draft = drafts[best.di] as DraftInstance;
    place(draft, best.cls);
    rules?.placed(best.cls, draft);
    current[best.di] = compositionValue(draft.composition, model, true);
  }
}

export function toPlanned(drafts: readonly DraftInstance[]): PlannedInstance[] {
  return drafts.map((d) => ({
    id: d.id,
    typeName: d.type.name,
    isNew: d.isNew,
    taskIds: [...d.taskIds].sort(),
    ...(d.isNew && d.placement !== undefined ? { placement: d.placement } : {}),
  }));
}

/**
 * Pack tasks onto a fresh cluster by Full Reconfiguration (no existing instances). Without a table, plain
 * reservation prices are used (interference ignored), which is what the ILP comparison needs.
 */
export function packFromScratch(
  book: PriceBook,
  tasks: readonly { id: string; demand: FamilyDemand; key?: string }[],
  table?: ColocationTable,
): Configuration {
  const packTasks: PackTask[] = tasks.map((t) => ({
    id: t.id,
    jobId: t.id,
    key: t.key ?? demandSignature(t.demand),
    demand: t.demand,
    rp: book.reservationPrice(t.demand),
    jobTaskCount: 1,
  }));
  const model: RateModel = {
    table: table ?? new ColocationTable(),
    throughputAware: table !== undefined,
    multiTaskAware: true,
  };
  const drafts = topDownProvisioning(book, classify(packTasks), model, new FreePool([]), new NewIds());
  return { instances: toPlanned(drafts) };
}

export function configurationCostPerHour(book: PriceBook, config: Configuration): number {
  let sum = 0;
  for (const inst of config.instances) sum += book.type(inst.typeName).costPerHour;
  return sum;
}
