import type { InstanceType } from '../core/catalog.js';
import type { FamilyDemand } from '../core/resources.js';
import { sumOn } from '../scheduler/reservation-price.js';
import { fits } from '../core/resources.js';
import type { GateWait } from './gates.js';

/**
 * The instance type to launch instead of one the cloud refused (no capacity in any zone tried, or a quota):
 * the next-cheapest type that holds every task planned on the instance, that the cloud has not refused for it, that
 * is not known to be short of capacity, and whose launch keeps the caps (industry-anchors.md: Karpenter falls back
 * across offerings the same way). Undefined when none does: the tasks return to the queue and the next round plans
 * again.
 */
export interface ReplacementQuery {
  /** Candidate types, cheapest first. */
  readonly typesByCost: readonly InstanceType[];
  /** Demands of the tasks planned on the refused instance. */
  readonly demands: readonly FamilyDemand[];
  /** Types already refused for this instance (the refused one included). */
  readonly refused: ReadonlySet<string>;
  readonly capacityConstrained?: ((typeName: string) => boolean) | undefined;
  /** The launch gate for a candidate (caps on the fleet in transit, the refused instance left out). */
  readonly launchGate: (type: InstanceType) => GateWait;
}

export function chooseReplacementType(q: ReplacementQuery): InstanceType | undefined {
  if (q.demands.length === 0) return undefined;
  return q.typesByCost.find(
    (type) =>
      !q.refused.has(type.name) &&
      q.capacityConstrained?.(type.name) !== true &&
      hosts(type, q.demands) &&
      q.launchGate(type) === undefined,
  );
}

/** Whether one instance of `type` holds all of `demands` together. */
export function hosts(type: InstanceType, demands: readonly FamilyDemand[]): boolean {
  const total = sumOn(demands, type.family);
  return total !== undefined && fits(total, type.capacity);
}
