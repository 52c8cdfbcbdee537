import type { Catalog, InstanceType } from '../core/catalog.js';
import type { ClusterSnapshot, NoCapacityOffering, SchedJob } from '../core/model.js';
import type { FamilyDemand } from '../core/resources.js';
import { offeringsOf } from '../core/spot.js';
import type { WaitingEntry } from '../scheduler/types.js';
import { hosts } from './replacement.js';

/**
 * Jobs the round keeps waiting because the cloud has no capacity for any instance type that could host one of their
 * tasks (`ClusterSnapshot.noCapacity`: refused in every zone, until the end of the provider's capacity-error window).
 * Planned, such a job would be launched on the type just refused, walk every other fitting type to the same refusal
 * and come back to the queue, round after round, each time leaving closed instance records behind. Held, it is out of
 * the round (admission and plan) until one of those types may have capacity again, as Karpenter's provisioner leaves
 * out the offerings its unavailable-offerings cache holds. A job holding capacity is never held, nor a task an
 * existing instance's type could host (the plan may find room there), nor a type the job could still get on spot.
 */

/** The cap name of a job kept waiting for capacity (metrics count waits by it). */
export const NO_CAPACITY = 'no capacity';

/** How many of the refused types a wait names (the cheapest first). */
const TYPES_NAMED = 4;

export interface CapacityHold {
  readonly jobId: string;
  /** When one of the types its blocked task needs may have capacity again. */
  readonly untilSeconds: number;
  /** The types that could host its blocked tasks, all refused, cheapest first. */
  readonly typeNames: readonly string[];
}

/** The waiting jobs no type with capacity can host; none when the cloud refused nothing. */
export function capacityHolds(
  snapshot: ClusterSnapshot,
  catalog: Catalog,
  buysSpot: boolean,
): CapacityHold[] {
  const out = outOffersByType(snapshot.noCapacity ?? [], snapshot.nowSeconds);
  if (out.size === 0) return [];
  const existingTypes = new Set(snapshot.instances.map((i) => i.typeName));
  const byCost = [...catalog.types].sort((a, b) => a.costPerHour - b.costPerHour);
  const demandsOf = new Map<string, FamilyDemand[]>();
  const placed = new Set<string>();
  for (const t of snapshot.tasks) {
    if (t.instanceId !== undefined) placed.add(t.jobId);
    const list = demandsOf.get(t.jobId);
    if (list === undefined) demandsOf.set(t.jobId, [t.demand]);
    else list.push(t.demand);
  }
  // A job's tasks share a few templates: each demand is matched against the catalog once.
  const fittingTypes = new Map<FamilyDemand, InstanceType[]>();
  const fitting = (demand: FamilyDemand): InstanceType[] => {
    let types = fittingTypes.get(demand);
    if (types === undefined) {
      types = byCost.filter((type) => hosts(type, [demand]));
      fittingTypes.set(demand, types);
    }
    return types;
  };
  const holds: CapacityHold[] = [];
  for (const job of snapshot.jobs) {
    if (!job.reconfigurable || placed.has(job.id)) continue;
    const spot = buysSpot && job.spot !== 'never';
    /** When `type` may take the job's task again: now when it has capacity. */
    const reopensAt = (type: InstanceType): number => {
      const refused = out.get(type.name);
      if (refused === undefined || existingTypes.has(type.name)) return snapshot.nowSeconds;
      const onDemand = refused.get('on-demand') ?? snapshot.nowSeconds;
      if (!spot || catalog.spot === undefined || offeringsOf(catalog.spot, type.name).length === 0)
        return onDemand;
      return Math.min(onDemand, refused.get('spot') ?? snapshot.nowSeconds);
    };
    const blocked = blockedTasks(job, demandsOf.get(job.id) ?? [], fitting, reopensAt, snapshot.nowSeconds);
    if (blocked !== undefined) holds.push(blocked);
  }
  return holds;
}

/** The hold of one job: undefined when every one of its tasks fits some type with capacity (or fits none at all). */
function blockedTasks(
  job: SchedJob,
  demands: readonly FamilyDemand[],
  fitting: (demand: FamilyDemand) => InstanceType[],
  reopensAt: (type: InstanceType) => number,
  nowSeconds: number,
): CapacityHold | undefined {
  let untilSeconds: number | undefined;
  const names = new Set<string>();
  for (const demand of new Set(demands)) {
    const types = fitting(demand);
    // No type of the catalog hosts it at all: admission's own wait (never-fits), not a shortage.
    if (types.length === 0) return undefined;
    const reopen = Math.min(...types.map(reopensAt));
    if (reopen <= nowSeconds) continue;
    untilSeconds = Math.max(untilSeconds ?? reopen, reopen);
    for (const t of types) names.add(t.name);
  }
  return untilSeconds === undefined ? undefined : { jobId: job.id, untilSeconds, typeNames: [...names] };
}

/** Per refused type, per market, when its window ends (the ended ones left out). */
function outOffersByType(
  offerings: readonly NoCapacityOffering[],
  nowSeconds: number,
): Map<string, Map<NoCapacityOffering['market'], number>> {
  const out = new Map<string, Map<NoCapacityOffering['market'], number>>();
  for (const o of offerings) {
    if (o.untilSeconds <= nowSeconds) continue;
    const markets = out.get(o.typeName) ?? new Map<NoCapacityOffering['market'], number>();
    markets.set(o.market, Math.max(o.untilSeconds, markets.get(o.market) ?? o.untilSeconds));
    out.set(o.typeName, markets);
  }
  return out;
}

/**
 * A held job as a decision's `waiting` entry: a wait in the queue (round.ts `QUEUE_WAIT_PREFIX`, so no plan counts as
 * cut without it), which `fleetwise why` words "kept waiting: in the queue for capacity: the cloud refused …".
 */
export function capacityWait(hold: CapacityHold): WaitingEntry {
  const named = hold.typeNames.slice(0, TYPES_NAMED).join(', ');
  const more = hold.typeNames.length > TYPES_NAMED ? ` and ${hold.typeNames.length - TYPES_NAMED} more` : '';
  const until = new Date(hold.untilSeconds * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z');
  return {
    jobId: hold.jobId,
    cap: `queue for capacity: the cloud refused every instance type that fits it (${named}${more}) until ${until}`,
    capName: NO_CAPACITY,
  };
}
