import { z } from 'zod';
import type { Catalog, InstanceType } from '../core/catalog.js';
import type { Caps } from '../core/model.js';
import { familyQuotaGroup, quotaBreaches, spotQuotaGroup } from '../core/quota-groups.js';
import type { Market } from '../core/market.js';
import type { FamilyDemand } from '../core/resources.js';
import type { SpotPreference } from '../core/spot.js';
import { parseWith } from '../core/validation.js';
import { spotPlanningCatalog } from '../scheduler/market-choice.js';
import { PriceBook } from '../scheduler/reservation-price.js';

/**
 * Caps the queue layer admits jobs under: $/hour, instance count (core `Caps`), and AWS-style on-demand quotas per
 * family group. AWS counts running on-demand capacity in vCPUs per quota group ("Running On-Demand Standard
 * (A, C, D, H, I, M, R, T, Z) instances", "Running On-Demand P instances", …); fleetwise adds an optional GPU count
 * per group because GPU budgets are usually what teams argue about.
 */
/** The caps as the queue layer reads them: core `Caps`, quotas included (checked against admitted footprints). */
export type QueueCaps = Caps & {
  /** Where the caps were set, for the messages about them (each quota says its own, `FamilyGroupQuota.source`). */
  readonly sources?: CapSources | undefined;
};

/**
 * Where the $/hour and instance caps, and how jobs are sized against the $/hour cap (`admitBy`), were set when not by
 * `simulate`'s flag for them: a file's field (`tuned.yaml: caps.maxCostPerHour (1)`), so that a message about a cap
 * names the setting to change and not a flag nobody typed. Absent: named as the flag that sets it.
 */
export interface CapSources {
  readonly maxCostPerHour?: string | undefined;
  readonly maxInstances?: string | undefined;
  readonly admitBy?: string | undefined;
}

export const queueCapsSchema = z.object({
  maxCostPerHour: z.number().finite().positive().optional(),
  maxInstances: z.number().int().positive().optional(),
  maxMigrationsPerRound: z.number().int().nonnegative().optional(),
  quotas: z
    .array(
      z.object({
        group: z.string().min(1),
        maxVcpus: z.number().finite().nonnegative().optional(),
        maxGpus: z.number().finite().nonnegative().optional(),
      }),
    )
    .optional(),
  familyGroups: z.record(z.string(), z.string().min(1)).optional(),
});

/** Validate caps from a config file or CLI flags; `source` names them in errors. */
export function parseQueueCaps(value: unknown, source = 'caps'): QueueCaps {
  return parseWith(queueCapsSchema, value, source);
}

/** One instance a job is expected to occupy (its reservation-price instance, Eva §4.2). */
export interface InstanceFootprint {
  readonly family: string;
  readonly gpus: number;
  readonly vcpus: number;
  readonly costPerHour: number;
  /** Bought on spot: counted against the group's spot quota (`<group>-spot`), not its on-demand one. */
  readonly market?: Market | undefined;
}

/** An instance type as bought: its market, and its price there as `costPerHour` (spot: its pool's). */
export type BoughtType = InstanceType & { readonly market?: Market | undefined };

/** What one instance of a type counts against the caps (AWS counts an instance until it has terminated). */
export function instanceFootprint(type: BoughtType): InstanceFootprint {
  return {
    family: type.family,
    gpus: type.capacity[0],
    vcpus: type.capacity[1],
    costPerHour: type.costPerHour,
    ...(type.market === 'spot' ? { market: 'spot' } : {}),
  };
}

/** What admitting a job is expected to add against the caps. */
export interface JobFootprint {
  readonly jobId: string;
  readonly instances: readonly InstanceFootprint[];
}

/**
 * A job's footprint as one standalone reservation-price instance per task. This is the estimate Eva's own
 * cost model starts from; packing usually needs less, so it is conservative for $/hour and instance count. Quota
 * use can differ when Eva packs a CPU task onto a GPU instance: the packed plan must still pass
 * `scheduler/caps.ts enforceCaps`, the safety rail under this layer.
 */
export function reservationFootprint(
  jobId: string,
  taskDemands: readonly FamilyDemand[],
  prices: PriceBook,
  /** Types `prices` prices at a spot pool: an instance of one is bought on spot. */
  spotPriced: ReadonlySet<string> = new Set(),
): JobFootprint {
  return {
    jobId,
    instances: taskDemands.map((d) => {
      const t = prices.minType(d);
      if (t === undefined) throw new Error(`job ${jobId}: no instance type can host a task alone`);
      return instanceFootprint(spotPriced.has(t.name) ? { ...t, market: 'spot' } : t);
    }),
  };
}

/**
 * Sizes jobs in the market a plan buys them in. On demand by default. Where the run buys spot (`spotOpen`: the
 * controller on EC2, `simulate --spot on`; a catalog's spot section alone is not enough, the local provider sells
 * none), a job that may go on spot is sized at its cheapest host at spot prices, each type at the pool a spot launch
 * of it gets (scheduler/market-choice.ts spotPlanningCatalog: what Eva plans such a round with), and counted against
 * the spot quota group. Sized on demand, such a job would count two to three times what the fleet pays for it against
 * a $ cap the plan check and launch gate enforce at spot prices, and the fleet would run at a fraction of the cap.
 */
export class FootprintPrices {
  private readonly onDemand: PriceBook;
  private readonly spot: PriceBook | undefined;
  /** Types the spot book prices at a spot pool (the others stay at their on-demand price, bought on demand). */
  private readonly spotPriced: ReadonlySet<string>;

  constructor(catalog: Catalog, spotOpen: boolean) {
    this.onDemand = new PriceBook(catalog);
    if (!spotOpen || catalog.spot === undefined) {
      this.spot = undefined;
      this.spotPriced = new Set();
      return;
    }
    const spotCatalog = spotPlanningCatalog(catalog);
    const onDemandPrice = new Map(catalog.types.map((t) => [t.name, t.costPerHour]));
    this.spot = new PriceBook(spotCatalog);
    this.spotPriced = new Set(
      spotCatalog.types.filter((t) => t.costPerHour < (onDemandPrice.get(t.name) ?? 0)).map((t) => t.name),
    );
  }

  /**
   * The job's standalone footprint (`reservationFootprint`) in the market it will be bought in. A job that may go on
   * spot is sized on demand where its spot footprint alone breaks a cap (a spot quota) that its on-demand one keeps:
   * the plan buys such instances on demand (scheduler/plan-quotas.ts spotQuotaFallback). Throws when no type can host
   * one of its tasks.
   */
  footprint(
    jobId: string,
    taskDemands: readonly FamilyDemand[],
    spot: SpotPreference | undefined,
    caps: QueueCaps,
  ): JobFootprint {
    const onDemand = reservationFootprint(jobId, taskDemands, this.onDemand);
    if (this.spot === undefined || spot === 'never') return onDemand;
    const onSpot = reservationFootprint(jobId, taskDemands, this.spot, this.spotPriced);
    const fitsAlone = (f: JobFootprint): boolean => capViolations(usageOf([f], caps), caps).length === 0;
    return fitsAlone(onSpot) || !fitsAlone(onDemand) ? onSpot : onDemand;
  }
}

export interface GroupUse {
  readonly vcpus: number;
  readonly gpus: number;
}

export interface CapUsage {
  readonly costPerHour: number;
  readonly instances: number;
  readonly byGroup: ReadonlyMap<string, GroupUse>;
}

export const NO_USAGE: CapUsage = { costPerHour: 0, instances: 0, byGroup: new Map() };

export function addUsage(usage: CapUsage, footprint: JobFootprint, caps: QueueCaps, sign = 1): CapUsage {
  const byGroup = new Map(usage.byGroup);
  let cost = usage.costPerHour;
  for (const inst of footprint.instances) {
    const family = familyQuotaGroup(inst.family, caps.familyGroups);
    const g = inst.market === 'spot' ? spotQuotaGroup(family) : family;
    const u = byGroup.get(g) ?? { vcpus: 0, gpus: 0 };
    byGroup.set(g, { vcpus: u.vcpus + sign * inst.vcpus, gpus: u.gpus + sign * inst.gpus });
    cost += sign * inst.costPerHour;
  }
  return { costPerHour: cost, instances: usage.instances + sign * footprint.instances.length, byGroup };
}

export function usageOf(footprints: readonly JobFootprint[], caps: QueueCaps): CapUsage {
  return footprints.reduce((u, f) => addUsage(u, f, caps), NO_USAGE);
}

const EPS = 1e-9;

/** The caps `usage` breaks, named like `maxCostPerHour` or `quota p maxVcpus`; empty when it fits. */
export function capViolations(usage: CapUsage, caps: QueueCaps): string[] {
  const out: string[] = [];
  if (caps.maxCostPerHour !== undefined && usage.costPerHour > caps.maxCostPerHour + EPS)
    out.push('maxCostPerHour');
  if (caps.maxInstances !== undefined && usage.instances > caps.maxInstances + EPS) out.push('maxInstances');
  for (const b of quotaBreaches(usage.byGroup, caps.quotas ?? [])) out.push(b.cap);
  return out;
}

/** The caps (named as `capViolations` names them) a footprint uses any of. */
export function capsUsed(footprint: JobFootprint, caps: QueueCaps): string[] {
  const u = usageOf([footprint], caps);
  const out: string[] = [];
  if (caps.maxCostPerHour !== undefined && u.costPerHour > 0) out.push('maxCostPerHour');
  if (caps.maxInstances !== undefined && u.instances > 0) out.push('maxInstances');
  for (const q of caps.quotas ?? []) {
    const g = u.byGroup.get(q.group) ?? { vcpus: 0, gpus: 0 };
    if (q.maxVcpus !== undefined && g.vcpus > 0) out.push(`quota ${q.group} maxVcpus`);
    if (q.maxGpus !== undefined && g.gpus > 0) out.push(`quota ${q.group} maxGpus`);
  }
  return out;
}

/** Whether a set of jobs, each with its cost/resource estimate, fits every cap at once. */
export function fitsCaps(footprints: readonly JobFootprint[], caps: QueueCaps): boolean {
  return capViolations(usageOf(footprints, caps), caps).length === 0;
}

export function hasAnyCap(caps: QueueCaps): boolean {
  return (
    caps.maxCostPerHour !== undefined ||
    caps.maxInstances !== undefined ||
    (caps.quotas ?? []).some((q) => q.maxVcpus !== undefined || q.maxGpus !== undefined)
  );
}

/**
 * The job's dominant share of the caps: max over capped dimensions of (its use / the cap), in [0, ∞).
 * WFQ needs one scalar capacity (PCS §3 works on GPUs); with several caps we measure every job in "fractions of
 * the whole capped capacity", as DRF does. A set whose shares sum to ≤ 1 fits every cap (each dimension's share
 * is ≤ the dominant one), so the scalar is safe; admission still checks the exact caps to use the slack.
 * Returns 0 when nothing is capped (then nobody queues) and Infinity when a cap is 0 but the job needs some.
 */
export function dominantShare(footprint: JobFootprint, caps: QueueCaps): number {
  const u = usageOf([footprint], caps);
  let share = 0;
  const ratio = (use: number, cap: number | undefined): void => {
    if (cap === undefined || use <= 0) return;
    share = Math.max(share, cap <= 0 ? Number.POSITIVE_INFINITY : use / cap);
  };
  ratio(u.costPerHour, caps.maxCostPerHour);
  ratio(u.instances, caps.maxInstances);
  for (const q of caps.quotas ?? []) {
    const g = u.byGroup.get(q.group);
    if (g === undefined) continue;
    ratio(g.vcpus, q.maxVcpus);
    ratio(g.gpus, q.maxGpus);
  }
  return share;
}
