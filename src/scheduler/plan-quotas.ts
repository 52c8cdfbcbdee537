import type { InstanceType } from '../core/catalog.js';
import type { Caps } from '../core/model.js';
import type { Market } from '../core/market.js';
import {
  familyQuotaGroup,
  quotaBreaches,
  spotQuotaGroup,
  type QuotaBreach,
  type QuotaUse,
} from '../core/quota-groups.js';

export type { QuotaBreach } from '../core/quota-groups.js';

/**
 * A plan's instances against the family-group quotas, counted as the round's check counts them
 * (round/plan-caps.ts planCapViolations, through queue/caps.ts): each instance's real type, in its group's on-demand
 * quota, or in `<group>-spot` when bought on spot; the comparison with the quotas is the core's (quota-groups.ts),
 * which the queue layer's caps make too.
 */

const EPS = 1e-9;

/** An instance as the quotas see it: its type (family, capacity) and how it is bought (absent: on demand). */
export interface QuotaInstance {
  readonly type: Pick<InstanceType, 'family' | 'capacity'>;
  readonly market?: Market | undefined;
}

/** The quota group an instance counts against. */
export function quotaGroupOf(i: QuotaInstance, familyGroups: Caps['familyGroups']): string {
  const group = familyQuotaGroup(i.type.family, familyGroups);
  return i.market === 'spot' ? spotQuotaGroup(group) : group;
}

/** How much of a quota dimension one instance uses. */
export function dimensionUse(i: QuotaInstance, dimension: QuotaBreach['dimension']): number {
  return dimension === 'maxGpus' ? i.type.capacity[0] : i.type.capacity[1];
}

/** The quotas `instances` break, in the caps' order (each quota's vCPUs, then GPUs); empty when they all hold. */
export function planQuotaBreaches(instances: readonly QuotaInstance[], caps: Caps): QuotaBreach[] {
  const quotas = caps.quotas ?? [];
  if (quotas.length === 0) return [];
  const use = new Map<string, QuotaUse>();
  for (const i of instances) {
    const g = quotaGroupOf(i, caps.familyGroups);
    const u = use.get(g) ?? { vcpus: 0, gpus: 0 };
    use.set(g, { vcpus: u.vcpus + i.type.capacity[1], gpus: u.gpus + i.type.capacity[0] });
  }
  return quotaBreaches(use, quotas);
}

/** A breach as a candidate's rejection reason: the quota, the plan's use and the quota's size. */
export function describeBreach(b: QuotaBreach): string {
  const use = +b.use.toFixed(3);
  const unit = (b.dimension === 'maxGpus' ? 'GPU' : 'vCPU') + (use === 1 ? '' : 's');
  return `${b.cap}: ${use} ${unit} over the quota of ${b.max}`;
}

/** A plan instance the spot fallback may move: its market alone, and what spot saves on it. */
export interface SpotChoice extends QuotaInstance {
  readonly id: string;
  readonly isNew: boolean;
  /** On-demand $/hour less the expected spot cost (spot-cost.ts): what buying it on demand gives up. */
  readonly savingPerHour: number;
}

/**
 * Which new spot instances a plan buys on demand instead, so that its spot instances keep every `<group>-spot` quota:
 * as Karpenter falls back to on-demand capacity when spot is unavailable. Existing spot instances keep their market and
 * count first; then new ones of the group go on demand, least saving first (ties by id, so the plan is the same every
 * time), until the group's spot quotas hold or none is left. An instance that uses none of an exceeded dimension stays
 * spot. What the fallback adds to the on-demand quotas and the $/hour is left to the caps (caps.ts enforceCaps).
 */
export function spotQuotaFallback(choices: readonly SpotChoice[], caps: Caps): Set<string> {
  const onDemand = new Set<string>();
  const quotasOn = caps.quotas ?? [];
  if (quotasOn.length === 0) return onDemand;
  const spot = choices.filter((c) => c.market === 'spot');
  const groups = new Set(spot.map((c) => quotaGroupOf(c, caps.familyGroups)));
  for (const group of [...groups].sort()) {
    const quotas = quotasOn.filter((q) => q.group === group);
    if (quotas.length === 0) continue;
    const inGroup = spot.filter((c) => quotaGroupOf(c, caps.familyGroups) === group);
    let gpus = inGroup.reduce((s, c) => s + dimensionUse(c, 'maxGpus'), 0);
    let vcpus = inGroup.reduce((s, c) => s + dimensionUse(c, 'maxVcpus'), 0);
    const over = (): { gpus: boolean; vcpus: boolean } => ({
      gpus: quotas.some((q) => q.maxGpus !== undefined && gpus > q.maxGpus + EPS),
      vcpus: quotas.some((q) => q.maxVcpus !== undefined && vcpus > q.maxVcpus + EPS),
    });
    const movable = inGroup
      .filter((c) => c.isNew)
      .sort((a, b) => a.savingPerHour - b.savingPerHour || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    for (const c of movable) {
      const o = over();
      if (!o.gpus && !o.vcpus) break;
      const g = dimensionUse(c, 'maxGpus');
      const v = dimensionUse(c, 'maxVcpus');
      if (!((o.gpus && g > 0) || (o.vcpus && v > 0))) continue;
      onDemand.add(c.id);
      gpus -= g;
      vcpus -= v;
    }
  }
  return onDemand;
}
