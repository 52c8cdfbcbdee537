import { typesByName, type Catalog } from '../core/catalog.js';
import type { Caps } from '../core/model.js';
import {
  addUsage,
  capViolations,
  hasAnyCap,
  instanceFootprint,
  NO_USAGE,
  usageOf,
  type BoughtType,
  type QueueCaps,
} from '../queue/caps.js';
import type { ConfigurationDiff } from '../scheduler/actions.js';
import { plannedPricePerHour } from '../scheduler/market-choice.js';
import type { Configuration } from '../scheduler/types.js';

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
  const types = typesByName(catalog);
  const instances = configuration.instances.flatMap((i) => {
    const t = types.get(i.typeName);
    return t === undefined ? [] : [instanceFootprint({ ...t, market: i.market })];
  });
  return capViolations(usageOf([{ jobId: 'plan', instances }], caps), caps);
}

/** Why a plan may not be carried out (a cap it breaks, with the figures), or undefined when it keeps every cap. */
export function planCapViolation(
  configuration: Configuration,
  diff: ConfigurationDiff,
  catalog: Catalog,
  caps: QueueCaps,
): string | undefined {
  const types = typesByName(catalog);
  // Each instance at its market's price: spot at its pool's.
  const cost = configuration.instances.reduce(
    (s, i) => s + (types.has(i.typeName) ? plannedPricePerHour(catalog, i) : 0),
    0,
  );
  if (caps.maxCostPerHour !== undefined && cost > caps.maxCostPerHour + 1e-9)
    return `maxCostPerHour: $${cost.toFixed(2)}/h over the $${caps.maxCostPerHour}/h cap`;
  if (caps.maxInstances !== undefined && configuration.instances.length > caps.maxInstances)
    return `maxInstances: ${configuration.instances.length} instances over the cap of ${caps.maxInstances}`;
  if (caps.maxMigrationsPerRound !== undefined && diff.movedJobIds.length > caps.maxMigrationsPerRound)
    return `maxMigrationsPerRound: ${diff.movedJobIds.length} migrations over the cap of ${caps.maxMigrationsPerRound}`;
  const quotas = planCapViolations(configuration, catalog, {
    quotas: caps.quotas,
    familyGroups: caps.familyGroups,
  });
  if (quotas.length > 0) return `${quotas.join(', ')}: the plan's instances exceed the quota`;
  return undefined;
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
