import { z } from 'zod';
import { MARKETS, type Market } from '../core/market.js';

/**
 * The cloud as the controller sees it (ARCHITECTURE.md "The two runtimes"): launch one instance of a type,
 * terminate instances, and list what a cluster owns so reconciliation can find its instances again after a restart
 * (level-triggered: the tags are the source of truth, not the controller's memory). Implemented for EC2
 * (aws/ec2-provider.ts), local worker processes (local/) and the simulator.
 */

/** Tags every fleetwise instance carries. */
export const TAG_CLUSTER = 'fleetwise:cluster';
export const TAG_PLAN = 'fleetwise:plan';
/** The controller's stable name for the instance slot (survives relaunches of the same planned instance). */
export const TAG_INSTANCE_KEY = 'fleetwise:instance-key';
/** The launch's idempotency token: a retried launch finds the instance by it instead of launching a second one. */
export const TAG_LAUNCH_TOKEN = 'fleetwise:launch-token';
/**
 * The cluster placement group an instance was launched into (the cluster's own name for it), set only when the launch
 * really went into the group: a launch that fell back to no group carries no such tag.
 */
export const TAG_PLACEMENT_GROUP = 'fleetwise:placement-group';
export const RESERVED_TAG_PREFIX = 'fleetwise:';
/** EC2 refuses tag keys under "aws:": they are AWS's own. */
export const AWS_TAG_PREFIX = 'aws:';
/** EC2's limit on the tags of one resource. */
export const MAX_TAGS_PER_RESOURCE = 50;
/**
 * The tags a launch adds to the caller's: Name (unless the caller gives one), cluster, plan, instance key, launch
 * token and placement group. The caller's tags must leave room for them under EC2's limit.
 */
export const PROVIDER_TAG_COUNT = 6;

// EC2 limits: tag keys ≤ 128 characters, values ≤ 256; ClientToken ≤ 64 ASCII characters.
const tagValue = z.string().max(256);
const name = z
  .string()
  .regex(
    /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/,
    'letters, digits, "_", ".", ":" and "-", starting alphanumeric',
  );

/**
 * Extra tags for every instance, checked as EC2 and the provider need them: keys of 1–128 characters, values of at
 * most 256, no key under the reserved prefixes, and few enough to leave room for the provider's own under EC2's limit
 * (a `Name` the caller gives replaces the provider's). The controller checks its configured tags with it at start,
 * so that a tag every launch would be refused for is an error then, not a launch failing forever.
 */
export const extraTagsSchema = z.record(z.string().min(1).max(128), tagValue).superRefine((tags, ctx) => {
  const keys = Object.keys(tags);
  for (const key of keys) {
    if (key.startsWith(RESERVED_TAG_PREFIX))
      ctx.addIssue({
        code: 'custom',
        path: [key],
        message: `the "${RESERVED_TAG_PREFIX}" prefix is reserved for fleetwise's own tags`,
      });
    // EC2 refuses the prefix in any case ("AWS:" too).
    if (key.toLowerCase().startsWith(AWS_TAG_PREFIX))
      ctx.addIssue({
        code: 'custom',
        path: [key],
        message: `the "${AWS_TAG_PREFIX}" prefix is reserved by AWS`,
      });
  }
  const max = MAX_TAGS_PER_RESOURCE - PROVIDER_TAG_COUNT + (keys.includes('Name') ? 1 : 0);
  if (keys.length > max)
    ctx.addIssue({
      code: 'custom',
      path: [],
      message: `${keys.length} tags: at most ${max}, since EC2 allows ${MAX_TAGS_PER_RESOURCE} per instance and fleetwise adds its own`,
    });
});

export const launchRequestSchema = z.object({
  typeName: z.string().regex(/^[a-z0-9-]+\.[a-z0-9-]+$/, 'must look like an EC2 type name, e.g. c7i.large'),
  /** Eva's plans launch instances one at a time (each has its own key and token). */
  count: z.literal(1).default(1),
  /** Same token ⇒ same instance, however often the launch is retried. Printable ASCII, ≤ 64 characters. */
  idempotencyToken: z.string().regex(/^[\x21-\x7e]{1,64}$/, '1–64 printable ASCII characters, no spaces'),
  clusterName: name,
  planId: name,
  instanceKey: name,
  /** Preferred availability zones, best first; zones the provider has no placement for are ignored. */
  availabilityZones: z.array(z.string().min(1)).default([]),
  /**
   * A cluster placement group to launch into (latency-aware placement, research digest nomora-latency-placement.md
   * §10.3), named within the cluster; the provider creates it on first use. Best effort: when the group has no room,
   * the instance is launched without it (LaunchResult.placementGroup says which happened).
   */
  placementGroup: name.optional(),
  /**
   * How to buy it: on demand (the default), or spot, which a provider without a spot market launches on demand
   * and one with it falls back from to on demand when spot capacity is refused (LaunchResult.market says which).
   */
  market: z.enum(MARKETS).default('on-demand'),
  /**
   * Whether a spot launch may be bought on demand when no spot capacity is to be had (default true). False when the
   * caller cannot afford the on-demand price (a $/hour cap it checked at the spot price): then the provider throws
   * InsufficientCapacityError instead, as when on-demand capacity is refused, and the caller decides what follows.
   * Ignored for an on-demand launch.
   */
  onDemandFallback: z.boolean().default(true),
  /**
   * Where a spot launch may go, when the caller limits it (a $/hour cap it checked at these zones' spot prices): spot
   * is tried in no other zone. Absent: every zone. On-demand attempts are not limited by it.
   */
  spotZones: z.array(z.string().min(1)).optional(),
  /** Extra tags (cost allocation, owner). Keys under "fleetwise:" and "aws:" are reserved. */
  tags: extraTagsSchema.default({}),
});

export type LaunchRequest = z.input<typeof launchRequestSchema>;
export type ValidLaunchRequest = z.output<typeof launchRequestSchema>;

/** A launch request validated, or a CloudProviderError naming every bad field (providers without their own API checks). */
export function parseLaunchRequest(request: LaunchRequest): ValidLaunchRequest {
  const parsed = launchRequestSchema.safeParse(request);
  if (parsed.success) return parsed.data;
  throw new CloudProviderError(
    `invalid launch request: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`,
    'InvalidParameterValue',
  );
}

export interface LaunchResult {
  /** The launched instance, or the instances an earlier attempt with the same token launched (oldest first). */
  readonly instanceIds: readonly string[];
  readonly availabilityZone: string | undefined;
  /** The placement group the instance really is in: the one asked for, or undefined when the launch fell back. */
  readonly placementGroup: string | undefined;
  /** Why the instance is not in the placement group the request asked for (no room in it, it could not be created). */
  readonly placementFallback?: string | undefined;
  /** True when no new instance was launched because one with this idempotency token already existed. */
  readonly reusedExisting: boolean;
  /** How the instance was bought (absent: on demand). */
  readonly market?: Market | undefined;
  /** Why a spot request was launched on demand instead (no spot capacity for the type in any zone tried). */
  readonly marketFallback?: string | undefined;
}

export type InstanceState = 'pending' | 'running' | 'stopping' | 'stopped' | 'shutting-down' | 'terminated';

export interface CloudInstance {
  readonly instanceId: string;
  readonly typeName: string;
  readonly state: InstanceState;
  readonly tags: Readonly<Record<string, string>>;
  readonly launchTime: Date | undefined;
  readonly availabilityZone: string | undefined;
  /** The cluster placement group it was launched into (the cluster's name for it), if any. */
  readonly placementGroup: string | undefined;
  readonly privateIpAddress: string | undefined;
  /** The image it was launched from (EC2's ImageId), where the provider has one. */
  readonly imageId?: string | undefined;
  /** The account that owns it (EC2's reservation OwnerId), where the provider has one. */
  readonly accountId?: string | undefined;
  /** How it was bought, where the provider knows (EC2's InstanceLifecycle). */
  readonly market?: Market | undefined;
  /**
   * When it stopped running, for one that ended (terminated, shutting down, stopped), where the provider can say:
   * EC2's StateTransitionReason carries the time, the local provider records it. A controller that was not running
   * then bills the instance up to this moment, not up to when it noticed.
   */
  readonly endedAt?: Date | undefined;
  /**
   * For one that ended, whether EC2 ended it as a spot interruption (EC2's StateReason code) rather than its owner, a
   * person or other automation: EC2 charges nothing for a spot instance it interrupts within its first hour, but the
   * owner for one ended otherwise. Undefined where the provider cannot say.
   */
  readonly endedBySpotInterruption?: boolean | undefined;
}

export interface ListOptions {
  /** Terminated instances are left out unless asked for (EC2 shows them for about an hour). */
  readonly includeTerminated?: boolean;
}

export interface CloudProvider {
  launch(request: LaunchRequest): Promise<LaunchResult>;
  /** Terminate instances; ids that no longer exist are ignored, so a retried terminate succeeds. */
  terminate(instanceIds: readonly string[]): Promise<void>;
  /** Every instance tagged with the cluster's name, in any state but terminated (unless asked). */
  list(clusterName: string, options?: ListOptions): Promise<CloudInstance[]>;
  /**
   * True when recent capacity errors say this type cannot be launched in any zone the provider may use (in `market`,
   * on demand when left out), so the
   * caller can pick the next-cheapest type without another round trip. Providers without capacity limits omit it.
   */
  isCapacityConstrained?(typeName: string, market?: Market): boolean;
  /**
   * EC2 is reclaiming an instance of this offering (a spot interruption): launches of the type in that zone and
   * market avoid it for a while, as after a capacity error (Karpenter marks the offering unavailable the same way).
   * A cache entry, not a cloud call. Providers without markets omit it. `sinceSeconds` (epoch seconds), when given,
   * is when the window opened (a notice recorded before the controller started again): it ends a window after that.
   */
  markOfferingUnavailable?(typeName: string, zone: string, market: Market, sinceSeconds?: number): void;
  /**
   * Seconds an offering marked unavailable stays out of launches (the EC2 provider's `capacityErrorTtlSeconds`): how
   * far back a controller started again looks for the interruption notices whose pools it closes again. Left out:
   * UNAVAILABLE_OFFERING_SECONDS.
   */
  readonly unavailableOfferingSeconds?: number | undefined;
  /**
   * Delete the cluster's placement groups not named in `keep` (best effort: a group the cloud still counts instances
   * in stays for a later call). Returns the groups deleted. Providers without placement groups of their own omit it.
   */
  deletePlacementGroups?(clusterName: string, keep: ReadonlySet<string>): Promise<string[]>;
  /**
   * What an instance this cloud no longer lists is said to have done, in the reason its tasks are recovered with
   * (`fleetwise job`'s restarts, events). Left out: EC2's words, "vanished from EC2".
   */
  readonly vanishedReason?: string | undefined;
}

/** A failure of the cloud API, with the provider's error code when there is one. */
export class CloudProviderError extends Error {
  constructor(
    message: string,
    readonly code: string | undefined,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'CloudProviderError';
  }
}

/**
 * Why a spot launch fell back to on demand (`LaunchResult.marketFallback`), from the spot refusal: the event that
 * records the fallback says "launched on demand instead of spot: " before it. `noPool`: the type has no spot pool in
 * the zones tried, which the refusal's message says itself.
 */
export function spotFallbackReason(refusal: Error, noPool: boolean): string {
  return noPool ? refusal.message : `no spot capacity: ${refusal.message}`;
}

/**
 * No capacity for the type in any zone tried (or every zone is in the capacity-error cache). The caller should choose
 * another type, e.g. the next-cheapest that fits (industry-anchors.md: Karpenter retries ICE with other offerings).
 */
export class InsufficientCapacityError extends CloudProviderError {
  constructor(
    readonly typeName: string,
    /** Zones where the launch was attempted and refused. */
    readonly zonesTried: readonly string[],
    /** Zones skipped because a recent capacity error for this type is still remembered. */
    readonly zonesSkipped: readonly string[],
    options?: { cause?: unknown },
  ) {
    super(
      `insufficient capacity for ${typeName}: ` +
        [
          zonesTried.length > 0 ? `refused in ${zonesTried.join(', ')}` : '',
          zonesSkipped.length > 0 ? `recently refused in ${zonesSkipped.join(', ')}` : '',
        ]
          .filter((s) => s !== '')
          .join('; '),
      'InsufficientInstanceCapacity',
      options,
    );
    this.name = 'InsufficientCapacityError';
  }
}

/** The API kept throttling after the bounded number of attempts. */
export class ThrottlingError extends CloudProviderError {
  constructor(
    readonly operation: string,
    readonly attempts: number,
    code: string | undefined,
    options?: { cause?: unknown },
  ) {
    super(`${operation} still throttled after ${attempts} attempts (${code ?? 'throttled'})`, code, options);
    this.name = 'ThrottlingError';
  }
}

/** An account limit (instance or vCPU quota) blocks the launch; another type of a different quota class may fit. */
export class QuotaExceededError extends CloudProviderError {
  /** The market whose quota refused it: AWS counts spot and on-demand capacity against separate quotas. */
  readonly market: Market;

  constructor(
    readonly typeName: string,
    code: string,
    options?: { cause?: unknown; market?: Market | undefined },
  ) {
    super(
      `launching ${typeName}${options?.market === 'spot' ? ' on spot' : ''} would exceed an account quota (${code})`,
      code,
      options,
    );
    this.name = 'QuotaExceededError';
    this.market = options?.market ?? 'on-demand';
  }
}
