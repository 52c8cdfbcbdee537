import { typesByName, type Catalog } from '../core/catalog.js';
import type { Caps, ClusterSnapshot, SchedInstance } from '../core/model.js';
import {
  addUsage,
  capsUsed,
  capViolations,
  hasAnyCap,
  instanceFootprint,
  NO_USAGE,
  usageOf,
  type BoughtType,
  type InstanceFootprint,
  type QueueCaps,
} from '../queue/caps.js';
import type { ConfigurationDiff } from '../scheduler/actions.js';
import { plannedPricePerHour } from '../scheduler/market-choice.js';
import type { Configuration, PlannedInstance } from '../scheduler/types.js';

/**
 * The caps as the round applies them (ARCHITECTURE.md "The round": the cap check, and the gates' launch rule): what
 * the scheduler keeps its own plans under, the check that refuses a plan over any cap whatever produced it, and the
 * check that keeps the fleet in transit under the caps (an instance the plan drops counts until it has terminated, so
 * its replacement waits).
 */

/**
 * The plan-level caps a scheduler enforces on its own plans: $/hour, instance count, migrations per round; and the
 * quotas, for the types it may buy (the round's check counts the plan against them).
 */
export function schedulerCaps(caps: QueueCaps): Caps {
  return {
    ...(caps.maxCostPerHour === undefined ? {} : { maxCostPerHour: caps.maxCostPerHour }),
    ...(caps.maxInstances === undefined ? {} : { maxInstances: caps.maxInstances }),
    ...(caps.maxMigrationsPerRound === undefined
      ? {}
      : { maxMigrationsPerRound: caps.maxMigrationsPerRound }),
    // Only which types a new instance may be of: one instance of a type too big for its group's quota never fits.
    ...(caps.quotas === undefined || caps.quotas.length === 0 ? {} : { quotas: caps.quotas }),
    ...(caps.familyGroups === undefined ? {} : { familyGroups: caps.familyGroups }),
  };
}

/** The caps a plan's instances break, counted on their real types (a CPU task packed onto a GPU instance uses GPU quota). */
export function planCapViolations(configuration: Configuration, catalog: Catalog, caps: QueueCaps): string[] {
  if (!hasAnyCap(caps)) return [];
  const instances = footprints(configuration.instances, catalog);
  return capViolations(usageOf([{ jobId: 'plan', instances }], caps), caps);
}

/**
 * The instances no plan of the round can drop: those holding tasks of pinned jobs (being launched or moved), which
 * stay whether the plan lists them or not (scheduler/actions.ts keeps them for the tasks it leaves implicit).
 */
export interface PinnedHold {
  /** Instances the diff keeps for pinned tasks the plan leaves out: the fleet pays for them as for the plan's own. */
  readonly kept: readonly PlannedInstance[];
  /** Every instance holding a pinned task, in the plan or kept: the least fleet any plan of the round leaves. */
  readonly floorIds: ReadonlySet<string>;
}

/** What pinned jobs hold in `snapshot` (the one the diff was made against) beside `configuration`. */
export function pinnedHold(
  snapshot: ClusterSnapshot,
  configuration: Configuration,
  diff: ConfigurationDiff,
): PinnedHold {
  const pinnedJobs = new Set(snapshot.jobs.filter((j) => !j.reconfigurable).map((j) => j.id));
  const floorIds = new Set<string>();
  for (const t of snapshot.tasks)
    if (t.instanceId !== undefined && pinnedJobs.has(t.jobId)) floorIds.add(t.instanceId);
  const planned = new Set(configuration.instances.map((i) => i.id));
  const terminated = new Set(
    diff.actions.flatMap((a) => (a.kind === 'terminate-instance' ? [a.instanceId] : [])),
  );
  const kept = snapshot.instances.filter((i) => !planned.has(i.id) && !terminated.has(i.id)).map(asPlanned);
  return { kept, floorIds };
}

function asPlanned(i: SchedInstance): PlannedInstance {
  return {
    id: i.id,
    typeName: i.typeName,
    isNew: false,
    taskIds: i.taskIds,
    ...(i.placement === undefined ? {} : { placement: i.placement }),
    ...(i.market === undefined ? {} : { market: i.market }),
  };
}

/**
 * Why a plan may not be carried out (a cap it breaks, with the figures), or undefined when it keeps every cap. The
 * fleet it leaves is counted: its instances and those `hold` keeps for pinned jobs it left out, which no plan of the
 * round can stop. Over a cap with them, the plan is refused when it breaks the cap by its own instances or launches
 * one the cap counts, and keeps more than the pinned jobs' instances of what the cap counts. So a cap lowered below
 * the fleet cannot refuse every plan: one keeping no more than the pinned jobs hold is the least any plan leaves, and
 * one launching nothing leaves the fleet no larger than it is (refused, the fleet would stay as it is, with what the
 * plan stops still running), as when a scheduler cut a pinned job from its plan as if that freed its instance.
 */
export function planCapViolation(
  configuration: Configuration,
  diff: ConfigurationDiff,
  catalog: Catalog,
  caps: QueueCaps,
  hold?: PinnedHold,
): string | undefined {
  const types = typesByName(catalog);
  const own = configuration.instances;
  const kept = hold?.kept ?? [];
  const fleet = [...own, ...kept];
  const usedBy = (list: readonly PlannedInstance[]): Set<string> =>
    new Set(capsUsed({ jobId: 'plan', instances: footprints(list, catalog) }, caps));
  // The caps what the plan keeps beyond the pinned jobs' instances counts against, and those its launches do.
  const beyond = usedBy(fleet.filter((i) => hold?.floorIds.has(i.id) !== true));
  const grows = usedBy(own.filter((i) => i.isNew));
  const refuses = (cap: string, ownBreaks: boolean): boolean =>
    beyond.has(cap) && (ownBreaks || grows.has(cap));
  // Each instance at its market's price: spot at its pool's.
  const priced = (list: readonly PlannedInstance[]): number =>
    list.reduce((s, i) => s + (types.has(i.typeName) ? plannedPricePerHour(catalog, i) : 0), 0);
  const keptNote = (what: string): string =>
    kept.length === 0 ? '' : ` (${what} kept for jobs being launched or moved)`;
  const maxCost = caps.maxCostPerHour;
  const cost = priced(fleet);
  if (
    maxCost !== undefined &&
    cost > maxCost + 1e-9 &&
    refuses('maxCostPerHour', priced(own) > maxCost + 1e-9)
  ) {
    const note = keptNote(`$${priced(kept).toFixed(2)}/h of it`);
    return `maxCostPerHour: $${cost.toFixed(2)}/h over the $${maxCost}/h cap${note}`;
  }
  const maxCount = caps.maxInstances;
  if (maxCount !== undefined && fleet.length > maxCount && refuses('maxInstances', own.length > maxCount)) {
    const note = keptNote(`${kept.length} of them`);
    return `maxInstances: ${fleet.length} instances over the cap of ${maxCount}${note}`;
  }
  if (caps.maxMigrationsPerRound !== undefined && diff.movedJobIds.length > caps.maxMigrationsPerRound)
    return `maxMigrationsPerRound: ${diff.movedJobIds.length} migrations over the cap of ${caps.maxMigrationsPerRound}`;
  const quotaCaps = { quotas: caps.quotas, familyGroups: caps.familyGroups };
  const ownQuotas = new Set(planCapViolations({ instances: own }, catalog, quotaCaps));
  const quotas = planCapViolations({ instances: fleet }, catalog, quotaCaps).filter((cap) =>
    refuses(cap, ownQuotas.has(cap)),
  );
  if (quotas.length > 0)
    return `${quotas.join(', ')}: the plan's instances exceed the quota${keptNote(`${kept.length} of them`)}`;
  return undefined;
}

/** Instances as the caps count them, on their real types and markets (unknown types count nothing). */
function footprints(instances: readonly PlannedInstance[], catalog: Catalog): InstanceFootprint[] {
  const types = typesByName(catalog);
  return instances.flatMap((i) => {
    const t = types.get(i.typeName);
    return t === undefined ? [] : [instanceFootprint({ ...t, market: i.market })];
  });
}

/**
 * The caps one more instance of `type` would break, counting every instance launched and not yet terminated
 * (draining ones included); empty when the launch may go ahead now.
 */
export function launchCapViolations(
  type: BoughtType,
  inTransit: Iterable<BoughtType>,
  caps: QueueCaps,
): string[] {
  if (!hasAnyCap(caps)) return [];
  const instances = [instanceFootprint(type)];
  for (const t of inTransit) instances.push(instanceFootprint(t));
  return capViolations(addUsage(NO_USAGE, { jobId: 'fleet', instances }, caps), caps);
}
