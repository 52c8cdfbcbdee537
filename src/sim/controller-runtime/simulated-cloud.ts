import type { Catalog, InstanceType } from '../../core/catalog.js';
import type { Market } from '../../core/market.js';
import { openSpotPool, type SpotOffering } from '../../core/spot.js';
import {
  CapacityErrorCache,
  DEFAULT_CAPACITY_ERROR_TTL_SECONDS,
} from '../../cloud/aws/capacity-error-cache.js';
import {
  CloudProviderError,
  InsufficientCapacityError,
  parseLaunchRequest,
  TAG_CLUSTER,
  TAG_INSTANCE_KEY,
  TAG_LAUNCH_TOKEN,
  TAG_PLACEMENT_GROUP,
  TAG_PLAN,
  type CloudInstance,
  type CloudProvider,
  type InstanceState,
  type LaunchRequest,
  type LaunchResult,
  type ListOptions,
} from '../../cloud/provider.js';
import { billedNothing } from '../../controller/cost-accounting.js';
import { Timeline } from './timeline.js';
import { VirtualClock } from './virtual-clock.js';

/**
 * A CloudProvider over simulated time, with the engine's instance timing (src/world/simulation.ts): a launched instance is
 * `pending` for the type's instantiate delay, then `running` (billed from then on), its worker starts and registers
 * after the catalog's worker-start and register delays, and a terminate takes the terminate delay (billing stops
 * when it completes). An instance terminated before it came up is never billed. Launches are idempotent by token
 * (same token ⇒ same instance), instances are found by their cluster tag, and a configured set of types is refused
 * with InsufficientCapacityError, as EC2 refuses a type it has no capacity for. An instance goes to the first preferred
 * zone the cloud has (else its first zone) and into the placement group asked for, unless that group is configured
 * as full: then, as EC2 does, it is launched in the same zone without the group and the result says why.
 *
 * With its spot market open (`spot`), a launch asking for spot goes to the catalog's pool of the type in the zone asked
 * for and is billed at the pool's price; a pool marked unavailable (an interruption, as the controller marks it) is
 * skipped for the next one the type has, price-capacity-optimized, for the EC2 provider's cache window; with none
 * left the instance is launched on demand and the result says why, as EC2Provider falls back (or, when the request
 * does not allow that fallback, refused with InsufficientCapacityError). `reclaim` is EC2 taking a spot instance back:
 * it is gone at once, its worker with it, and within an hour of its launch it is charged nothing (`billedNothing`), as
 * AWS bills an interrupted spot instance and the controller's cost reports count it.
 */

export interface SimulatedInstance {
  readonly instanceId: string;
  /**
   * What the spot market's draws are keyed by: the engine's name for the same instance, `i-<n>` for the controller's
   * `inst-<n>` (its instance key), so that an instance lives as long in both runtimes. Both number an instance when a
   * plan asks for it, whether or not a cap holds its launch back (world/commands.ts); a launch without that key
   * counts by the cloud's own launches.
   */
  readonly drawKey: string;
  readonly type: InstanceType;
  readonly availabilityZone: string;
  readonly tags: Readonly<Record<string, string>>;
  readonly launchedAtSeconds: number;
  /** How it was bought, and its price per hour in that market (its pool's on spot). */
  readonly market: Market;
  readonly pricePerHour: number;
  state: InstanceState;
  /** The worker on it has registered (after instantiate + worker start + register). */
  registered: boolean;
  billedFromSeconds: number | undefined;
  /** When it became terminated (a terminate completed, or EC2 took it back). */
  terminatedAtSeconds?: number | undefined;
  /**
   * AWS charges nothing for it: EC2 reclaimed it, a spot instance, within its first hour (controller/cost-accounting.ts
   * `billedNothing`). Set when it is reclaimed, before `billingStopped`.
   */
  billedNothing?: boolean | undefined;
}

export interface SimulatedCloudHooks {
  /** A launch created the instance (not a retry that found it by its token). */
  readonly launched?: (instance: SimulatedInstance) => void;
  /** A terminate was asked for the instance. */
  readonly terminating?: (instance: SimulatedInstance) => void;
  /** The instance came up: billing starts. */
  readonly billingStarted?: (instance: SimulatedInstance) => void;
  /**
   * The instance is gone after being billed for `billedSeconds`, or charged nothing for them after all when it says
   * `billedNothing`.
   */
  readonly billingStopped?: (instance: SimulatedInstance, billedSeconds: number) => void;
  /** Its worker registered: the controller may start tasks on it. */
  readonly registered?: (instance: SimulatedInstance) => void;
  /** The instance is gone (a terminate completed): it no longer counts against a cap. */
  readonly terminated?: (instance: SimulatedInstance) => void;
}

export interface SimulatedCloudOptions {
  readonly catalog: Catalog;
  readonly clock: { nowSeconds(): number };
  readonly timeline: Timeline;
  /** Types refused with InsufficientCapacityError (every zone). */
  readonly refusedTypes?: Iterable<string> | undefined;
  /** The cloud's zones, in default order (default: the catalog region's zone `a`). */
  readonly availabilityZones?: readonly string[] | undefined;
  /** Placement groups with no room left: a launch into one lands in its zone without the group. */
  readonly fullPlacementGroups?: Iterable<string> | undefined;
  /** Sell spot capacity from the catalog's spot market (default false: every launch is on demand). */
  readonly spot?: boolean | undefined;
  readonly hooks?: SimulatedCloudHooks | undefined;
}

export class SimulatedCloud implements CloudProvider {
  private readonly types: ReadonlyMap<string, InstanceType>;
  private readonly refused: Set<string>;
  private readonly zones: readonly string[];
  private readonly fullGroups: ReadonlySet<string>;
  private readonly instances = new Map<string, SimulatedInstance>();
  private readonly byToken = new Map<string, SimulatedInstance>();
  /** Spot pools recently interrupted (markOfferingUnavailable), as the EC2 provider remembers them. */
  private readonly unavailable: CapacityErrorCache;
  /** How long a marked spot pool stays closed: the EC2 provider's default. */
  readonly unavailableOfferingSeconds = DEFAULT_CAPACITY_ERROR_TTL_SECONDS;
  private launches = 0;

  constructor(private readonly o: SimulatedCloudOptions) {
    this.types = new Map(o.catalog.types.map((t) => [t.name, t]));
    this.refused = new Set(o.refusedTypes ?? []);
    this.zones =
      o.availabilityZones !== undefined && o.availabilityZones.length > 0
        ? [...o.availabilityZones]
        : [`${o.catalog.region}a`];
    this.fullGroups = new Set(o.fullPlacementGroups ?? []);
    this.unavailable = new CapacityErrorCache(
      this.unavailableOfferingSeconds,
      () => o.clock.nowSeconds() * 1000,
    );
  }

  /** Refuse (or stop refusing) launches of a type from now on. */
  setRefused(typeName: string, refused: boolean): void {
    if (refused) this.refused.add(typeName);
    else this.refused.delete(typeName);
  }

  launch(request: LaunchRequest): Promise<LaunchResult> {
    try {
      return Promise.resolve(this.launchNow(request));
    } catch (e) {
      return Promise.reject(e instanceof Error ? e : new Error(String(e)));
    }
  }

  private launchNow(request: LaunchRequest): LaunchResult {
    const r = parseLaunchRequest(request);
    // A launch token belongs to its cluster (as the EC2 provider scopes its ClientToken).
    const tokenKey = `${r.clusterName}\u0000${r.idempotencyToken}`;
    const existing = this.byToken.get(tokenKey);
    if (existing !== undefined)
      return {
        instanceIds: [existing.instanceId],
        availabilityZone: existing.availabilityZone,
        placementGroup: existing.tags[TAG_PLACEMENT_GROUP],
        reusedExisting: true,
        ...(existing.market === 'spot' ? { market: 'spot' } : {}),
      };
    const type = this.types.get(r.typeName);
    if (type === undefined)
      throw new CloudProviderError(`unknown instance type ${r.typeName}`, 'InvalidParameterValue');
    if (this.refused.has(type.name)) throw new InsufficientCapacityError(type.name, [...this.zones], []);
    const named = r.availabilityZones.find((z) => this.zones.includes(z));
    // A spot launch without a zone goes to the price-capacity-optimized pool (CreateFleet's choice, and the engine's).
    const pool = r.market === 'spot' ? this.spotPool(type.name, named) : undefined;
    // No spot to be had and the caller cannot afford on demand: refused, as EC2Provider refuses it.
    if (r.market === 'spot' && pool === undefined && !r.onDemandFallback)
      throw new InsufficientCapacityError(type.name, [...this.zones], []);
    const zone = pool?.zone ?? named ?? (this.zones[0] as string);
    const groupFull = r.placementGroup !== undefined && this.fullGroups.has(r.placementGroup);
    const group = groupFull ? undefined : r.placementGroup;
    this.launches += 1;
    const now = this.o.clock.nowSeconds();
    const inst: SimulatedInstance = {
      instanceId: `i-${this.launches.toString(16).padStart(17, '0')}`,
      drawKey: `i-${/^inst-(\d+)$/.exec(r.instanceKey)?.[1] ?? this.launches}`,
      type,
      availabilityZone: zone,
      tags: {
        ...r.tags,
        [TAG_CLUSTER]: r.clusterName,
        [TAG_PLAN]: r.planId,
        [TAG_INSTANCE_KEY]: r.instanceKey,
        [TAG_LAUNCH_TOKEN]: r.idempotencyToken,
        ...(group === undefined ? {} : { [TAG_PLACEMENT_GROUP]: group }),
      },
      launchedAtSeconds: now,
      market: pool === undefined ? 'on-demand' : 'spot',
      pricePerHour: pool?.pricePerHour ?? type.costPerHour,
      state: 'pending',
      registered: false,
      billedFromSeconds: undefined,
    };
    this.instances.set(inst.instanceId, inst);
    this.byToken.set(tokenKey, inst);
    this.o.timeline.at(now + type.delays.instantiateSeconds, () => this.instantiated(inst));
    this.o.hooks?.launched?.(inst);
    return {
      instanceIds: [inst.instanceId],
      availabilityZone: zone,
      placementGroup: group,
      ...(groupFull
        ? { placementFallback: `placement group ${r.placementGroup} has no room (simulated)` }
        : {}),
      reusedExisting: false,
      ...(pool !== undefined ? { market: 'spot' } : {}),
      ...(r.market === 'spot' && pool === undefined
        ? { marketFallback: `no spot capacity for ${type.name} (simulated)` }
        : {}),
    };
  }

  /**
   * The spot pool a launch of the type gets: the one in the zone asked for, else the type's next pool in
   * price-capacity-optimized order; none when the market is closed or every pool is marked unavailable.
   */
  private spotPool(typeName: string, zone: string | undefined): SpotOffering | undefined {
    return openSpotPool(
      this.o.spot === true ? this.o.catalog.spot : undefined,
      typeName,
      zone,
      (p) => this.zones.includes(p.zone) && !this.unavailable.isUnavailable(typeName, p.zone, 'spot'),
    );
  }

  markOfferingUnavailable(typeName: string, zone: string, market: Market, sinceSeconds?: number): void {
    this.unavailable.markUnavailable(
      typeName,
      zone,
      market,
      sinceSeconds === undefined ? undefined : sinceSeconds * 1000,
    );
  }

  /**
   * EC2 takes a spot instance back: terminated at once, its worker gone; billed until now, unless that is within its
   * first hour from launch, when AWS charges nothing for it.
   */
  reclaim(instanceId: string): void {
    const inst = this.instances.get(instanceId);
    if (inst === undefined || inst.state === 'terminated') return;
    const now = this.o.clock.nowSeconds();
    inst.billedNothing = billedNothing({
      id: inst.instanceId,
      typeName: inst.type.name,
      costPerHour: inst.pricePerHour,
      fromSeconds: inst.launchedAtSeconds,
      terminatedAtSeconds: now,
      reclaimedBySpot: inst.market === 'spot',
    });
    this.terminated(inst);
  }

  /** Spot instances of a pool neither terminated nor shutting down (what a pool-wide reclaim takes). */
  liveInPool(pool: SpotOffering): SimulatedInstance[] {
    return [...this.instances.values()].filter(
      (i) =>
        i.market === 'spot' &&
        i.state !== 'terminated' &&
        i.state !== 'shutting-down' &&
        i.type.name === pool.typeName &&
        i.availabilityZone === pool.zone,
    );
  }

  terminate(instanceIds: readonly string[]): Promise<void> {
    const now = this.o.clock.nowSeconds();
    for (const id of instanceIds) {
      const inst = this.instances.get(id);
      if (inst === undefined || (inst.state !== 'pending' && inst.state !== 'running')) continue;
      inst.state = 'shutting-down';
      this.o.hooks?.terminating?.(inst);
      this.o.timeline.at(now + inst.type.delays.terminateSeconds, () => this.terminated(inst));
    }
    return Promise.resolve();
  }

  list(clusterName: string, options: ListOptions = {}): Promise<CloudInstance[]> {
    const out: CloudInstance[] = [];
    for (const inst of this.instances.values()) {
      if (inst.tags[TAG_CLUSTER] !== clusterName) continue;
      if (inst.state === 'terminated' && options.includeTerminated !== true) continue;
      out.push(this.describe(inst));
    }
    return Promise.resolve(out);
  }

  isCapacityConstrained(typeName: string): boolean {
    return this.refused.has(typeName);
  }

  /** The instance by cloud id (the simulated workers find their host by it). */
  get(instanceId: string): SimulatedInstance | undefined {
    return this.instances.get(instanceId);
  }

  /** Instances launched so far (a retried launch with a known token is not counted). */
  get launchCount(): number {
    return this.launches;
  }

  /** Instances not yet terminated (shutting-down ones included: they are still billed). */
  get liveCount(): number {
    let n = 0;
    for (const inst of this.instances.values()) if (inst.state !== 'terminated') n += 1;
    return n;
  }

  private describe(inst: SimulatedInstance): CloudInstance {
    return {
      instanceId: inst.instanceId,
      typeName: inst.type.name,
      state: inst.state,
      tags: inst.tags,
      launchTime: new Date(inst.launchedAtSeconds * 1000),
      availabilityZone: inst.availabilityZone,
      placementGroup: inst.tags[TAG_PLACEMENT_GROUP],
      privateIpAddress: undefined,
      market: inst.market,
      endedAt: inst.terminatedAtSeconds === undefined ? undefined : new Date(inst.terminatedAtSeconds * 1000),
    };
  }

  // Engine: onInstantiated. An instance whose terminate was asked while it came up is billed from now until that
  // terminate completes, but starts no worker.
  private instantiated(inst: SimulatedInstance): void {
    if (inst.state === 'terminated') return;
    const now = this.o.clock.nowSeconds();
    inst.billedFromSeconds = now;
    this.o.hooks?.billingStarted?.(inst);
    if (inst.state !== 'pending') return;
    inst.state = 'running';
    this.o.timeline.at(now + inst.type.delays.workerStartSeconds, () => {
      if (inst.state !== 'running') return;
      this.o.timeline.at(this.o.clock.nowSeconds() + inst.type.delays.workerRegisterSeconds, () => {
        if (inst.state !== 'running') return;
        inst.registered = true;
        this.o.hooks?.registered?.(inst);
      });
    });
  }

  private terminated(inst: SimulatedInstance): void {
    inst.state = 'terminated';
    inst.terminatedAtSeconds = this.o.clock.nowSeconds();
    inst.registered = false;
    if (inst.billedFromSeconds !== undefined)
      this.o.hooks?.billingStopped?.(inst, this.o.clock.nowSeconds() - inst.billedFromSeconds);
    inst.billedFromSeconds = undefined;
    this.o.hooks?.terminated?.(inst);
  }
}

/** A standalone simulated cloud on its own clock, for tests (and the shared CloudProvider contract suite). */
export interface SimulatedCloudHarness {
  readonly cloud: SimulatedCloud;
  readonly clock: VirtualClock;
  /** Move time forward by `seconds`, carrying out every instance transition due by then. */
  advance(seconds: number): void;
}

export function createSimulatedCloud(options: {
  readonly catalog: Catalog;
  readonly refusedTypes?: Iterable<string> | undefined;
  readonly availabilityZones?: readonly string[] | undefined;
  readonly fullPlacementGroups?: Iterable<string> | undefined;
  readonly spot?: boolean | undefined;
  readonly hooks?: SimulatedCloudHooks | undefined;
  readonly startSeconds?: number | undefined;
}): SimulatedCloudHarness {
  const clock = new VirtualClock(options.startSeconds ?? 0);
  const timeline = new Timeline();
  const cloud = new SimulatedCloud({
    catalog: options.catalog,
    clock,
    timeline,
    refusedTypes: options.refusedTypes,
    availabilityZones: options.availabilityZones,
    fullPlacementGroups: options.fullPlacementGroups,
    spot: options.spot,
    hooks: options.hooks,
  });
  const advance = (seconds: number): void => {
    const target = clock.nowSeconds() + seconds;
    for (;;) {
      const next = timeline.nextTime();
      if (next === undefined || next > target) break;
      clock.advanceTo(Math.max(next, clock.nowSeconds()));
      timeline.runUntil(clock.nowSeconds(), 'effect');
    }
    clock.advanceTo(target);
  };
  return { cloud, clock, advance };
}
