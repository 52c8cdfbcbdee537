import { createHash } from 'node:crypto';
import type { Instance, RunInstancesCommandInput, Tag } from '@aws-sdk/client-ec2';
import { z } from 'zod';
import type { Market } from '../../core/market.js';
import { Rng } from '../../core/random.js';
import { parseWith, ValidationError } from '../../core/validation.js';
import {
  CloudProviderError,
  InsufficientCapacityError,
  launchRequestSchema,
  QuotaExceededError,
  TAG_CLUSTER,
  ThrottlingError,
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
} from '../provider.js';
import { CapacityErrorCache, DEFAULT_CAPACITY_ERROR_TTL_SECONDS } from './capacity-error-cache.js';
import { awsErrorCode, type AwsClientOptions } from './client-config.js';
import { createEc2Client, ec2ApiFromClient, type Ec2Api } from './ec2-api.js';
import { backoffPolicySchema, realSleep, retryOnThrottling, type RetryDeps } from './throttling.js';
import { workerBootstrapSchema, workerUserDataBase64 } from './user-data.js';

/**
 * Codes meaning "this type cannot be had in this zone right now": try another zone, and remember it for a while.
 * `Unsupported` is what EC2 answers when a type is not offered in the requested zone at all.
 */
const ZONE_CAPACITY_CODES: ReadonlySet<string> = new Set([
  'InsufficientInstanceCapacity',
  'InsufficientCapacity',
  'InsufficientHostCapacity',
  'Unsupported',
  // The zone's subnet has no free address left: another zone's subnet may (Karpenter counts it as unfulfillable
  // capacity too). Without it a full first subnet stopped every launch that named no zone.
  'InsufficientFreeAddressesInSubnet',
]);

/**
 * What EC2 answers when a cluster placement group cannot take the instance: no room left near the group's instances
 * (the capacity codes), a type the group's strategy does not allow or a zone other than the group's
 * (InvalidParameterCombination), or a group deleted meanwhile. The instance is then launched without the group,
 * in the same zone first: a slower network beats no instance (digest §10.3 step 5).
 */
const GROUP_REFUSAL_CODES: ReadonlySet<string> = new Set([
  ...ZONE_CAPACITY_CODES,
  'InvalidParameterCombination',
  'InvalidPlacementGroup.Unknown',
]);

/**
 * Spot refusals: no spot capacity for the type in the zone (the zone codes) or at the price asked, or the account's
 * spot quota. A spot launch then tries the next zone, and after the last one falls back to on demand.
 */
const SPOT_REFUSAL_CODES: ReadonlySet<string> = new Set([...ZONE_CAPACITY_CODES, 'SpotMaxPriceTooLow']);

/**
 * Spot refused for the whole account, whatever the type and zone: its spot quota is used up, or spot launches are not
 * authorized (no spot service-linked role and no right to create it). No other spot zone is tried, spot is remembered
 * as unavailable for a while, and the instance is launched on demand: the job runs, at the on-demand price, and the
 * fallback says why.
 */
const SPOT_ACCOUNT_REFUSAL_CODES: ReadonlySet<string> = new Set([
  'MaxSpotInstanceCountExceeded',
  'AuthFailure.ServiceLinkedRoleCreationNotPermitted',
]);

/**
 * UnauthorizedOperation on a spot attempt may be spot's own (a policy without `spot-instances-request/*`) or anything
 * else the launch needs (iam:PassRole for the instance profile, the AMI, the subnet); EC2's message is usually encoded
 * and does not say which. Only one naming spot is taken as spot's; otherwise the same launch is tried on demand once:
 * refused there too, it is an authorization error, not a capacity one, and spot is not remembered as unavailable.
 */
const UNAUTHORIZED = 'UnauthorizedOperation';

/** The zone's subnet has no free address: full for every type and market, so it is remembered per zone. */
const SUBNET_FULL = 'InsufficientFreeAddressesInSubnet';

/** Account quotas: no other zone helps; a type in another quota class (e.g. C/R instead of P) may. */
const QUOTA_CODES: ReadonlySet<string> = new Set([
  'InstanceLimitExceeded',
  'VcpuLimitExceeded',
  'MaxSpotInstanceCountExceeded',
]);

const LIVE_STATES: readonly InstanceState[] = ['pending', 'running', 'stopping', 'stopped', 'shutting-down'];
const INSTANCE_STATES: ReadonlySet<string> = new Set<InstanceState>([...LIVE_STATES, 'terminated']);
const INSTANCE_ID = /^i-[0-9a-f]{8,17}$/;
/** TerminateInstances takes at most 1000 ids per call. */
const TERMINATE_BATCH = 1000;

export const ec2ProviderConfigSchema = z
  .object({
    region: z.string().min(1),
    /** The worker AMI (for GPU types: one with the NVIDIA driver and container toolkit). */
    amiId: z.string().regex(/^ami-[0-9a-f]{8,17}$/, 'an AMI id like ami-0123456789abcdef0'),
    /** One entry per availability zone the cluster may use, in default preference order; subnets pin the VPC. */
    placements: z
      .array(
        z.object({
          availabilityZone: z.string().min(1),
          subnetId: z
            .string()
            .regex(/^subnet-[0-9a-f]{8,17}$/, 'a subnet id like subnet-0123456789abcdef0')
            .optional(),
        }),
      )
      .min(1, 'at least one availability zone')
      .refine(
        (ps) => new Set(ps.map((p) => p.availabilityZone)).size === ps.length,
        'each availability zone may appear once',
      ),
    securityGroupIds: z
      .array(z.string().regex(/^sg-[0-9a-f]{8,17}$/, 'a security group id like sg-0123…'))
      .default([]),
    /** Instance profile name or ARN: the workers' role (S3 access to the checkpoint bucket). */
    instanceProfile: z.string().min(1).optional(),
    keyName: z.string().min(1).optional(),
    /** How new instances start a worker; leave out when the AMI starts one itself. */
    worker: workerBootstrapSchema.optional(),
    capacityErrorTtlSeconds: z.number().nonnegative().default(DEFAULT_CAPACITY_ERROR_TTL_SECONDS),
    throttling: backoffPolicySchema.default(backoffPolicySchema.parse({})),
    /** DescribeInstances page size (EC2 allows 5–1000). */
    listPageSize: z.number().int().min(5).max(1000).default(1000),
  })
  .strict();
export type Ec2ProviderConfig = z.input<typeof ec2ProviderConfigSchema>;
type ParsedConfig = z.output<typeof ec2ProviderConfigSchema>;
type Placement = ParsedConfig['placements'][number];
type ValidRequest = z.output<typeof launchRequestSchema>;

/** A spot attempt refused with UnauthorizedOperation that does not say it is spot's (see UNAUTHORIZED). */
class SpotUnauthorized {
  constructor(
    readonly zone: string,
    readonly error: unknown,
  ) {}
}

/**
 * A spot launch with no zone to try: none of the zones the request allows spot in (`spotZones`: where the caller's
 * catalog has a pool of the type, within its caps) is one of the provider's. EC2 was not asked, so the code is not
 * one of EC2's capacity codes; still a capacity error, so the caller moves on to another type as after one.
 */
export class NoSpotPoolError extends InsufficientCapacityError {
  override readonly code = 'NoSpotPool';

  constructor(
    typeName: string,
    /** The zones the request allowed spot in. */
    readonly allowedZones: readonly string[],
    /** The zones the provider launches in (its placements'). */
    readonly providerZones: readonly string[],
    /** Whether the launch may be bought on demand instead (said in the message when it may not). */
    onDemandFallback: boolean,
  ) {
    super(typeName, [], []);
    this.message =
      `no spot pool of ${typeName} in the allowed zones: spot is allowed in ` +
      `${allowedZones.length === 0 ? 'no zone' : allowedZones.join(', ')}, instances go to ${providerZones.join(', ')}` +
      (onDemandFallback ? '' : '; buying it on demand instead is not allowed for this launch');
    this.name = 'NoSpotPoolError';
  }
}

/** One RunInstances attempt: a zone, the market, and the placement group to launch into, if any. */
interface LaunchAttempt {
  readonly placement: Placement;
  readonly market: Market;
  readonly group?: { readonly name: string; readonly ec2Name: string } | undefined;
}

/** EC2's limit on a placement group's name. */
const MAX_GROUP_NAME = 255;

export interface Ec2ProviderDeps {
  readonly api: Ec2Api;
  readonly nowMs?: () => number;
  readonly sleep?: (ms: number) => Promise<void>;
  /** Jitter for throttling backoff. */
  readonly rng?: Rng;
}

/**
 * The ClientToken for one zone's attempt. EC2 treats a token reused with different parameters as an error
 * (IdempotentParameterMismatch), so each zone gets its own token, derived deterministically so that a retry of the
 * same launch in the same zone reuses it. The cluster is part of it because launch tokens are per cluster (the tag
 * pre-check looks in the launching cluster only) while EC2's ClientToken is per account: the same token from two
 * clusters must launch two instances. A SHA-256 hex digest is exactly EC2's 64-character limit; no part can contain
 * the newline separating them.
 */
export function zoneClientToken(
  clusterName: string,
  idempotencyToken: string,
  availabilityZone: string,
  /** The EC2 name of the placement group of the attempt: an attempt in the group and one without it differ. */
  placementGroup?: string,
  /** A spot attempt and an on-demand one in the same zone differ too (an on-demand token is as it always was). */
  market: Market = 'on-demand',
): string {
  return createHash('sha256')
    .update(
      `${clusterName}\n${idempotencyToken}\n${availabilityZone}` +
        (placementGroup === undefined ? '' : `\n${placementGroup}`) +
        (market === 'spot' ? '\nspot' : ''),
    )
    .digest('hex');
}

/**
 * The EC2 name of a cluster's placement group. EC2 names are unique per account and region, so the cluster is part of
 * it, after its length: cluster `a-b`'s group `c` and cluster `a`'s group `b-c` stay apart (`fleetwise-3-a-b-c`,
 * `fleetwise-1-a-b-c`). A name over EC2's 255 characters becomes a digest.
 */
export function ec2PlacementGroupName(clusterName: string, group: string): string {
  const plain = `fleetwise-${clusterName.length}-${clusterName}-${group}`;
  if (plain.length <= MAX_GROUP_NAME) return plain;
  return `fleetwise-${createHash('sha256').update(`${clusterName}\n${group}`).digest('hex')}`;
}

function tagsToRecord(tags: readonly Tag[] | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const tag of tags ?? []) if (tag.Key !== undefined) out[tag.Key] = tag.Value ?? '';
  return out;
}

/** EC2's StateReason codes for a spot instance it stopped or terminated itself (an interruption). */
const SPOT_INTERRUPTION_CODES = new Set(['Server.SpotInstanceTermination', 'Server.SpotInstanceShutdown']);

/** One instance of a DescribeInstances answer as the provider lists it (`ownerId`: its reservation's OwnerId). */
export function toCloudInstance(instance: Instance, ownerId: string | undefined): CloudInstance | undefined {
  if (instance.InstanceId === undefined) return undefined;
  const state = instance.State?.Name ?? 'pending';
  const tags = tagsToRecord(instance.Tags);
  const ended = state !== 'running' && state !== 'pending';
  const reasonCode = instance.StateReason?.Code;
  return {
    instanceId: instance.InstanceId,
    typeName: instance.InstanceType ?? 'unknown',
    state: INSTANCE_STATES.has(state) ? (state as InstanceState) : 'pending',
    tags,
    launchTime: instance.LaunchTime,
    availabilityZone: instance.Placement?.AvailabilityZone,
    // The cluster's name for the group, tagged by the launch that got into it (Placement.GroupName is EC2's name).
    placementGroup: tags[TAG_PLACEMENT_GROUP],
    privateIpAddress: instance.PrivateIpAddress,
    imageId: instance.ImageId,
    accountId: ownerId,
    market: instance.InstanceLifecycle === 'spot' ? 'spot' : 'on-demand',
    endedAt: ended ? transitionTime(instance.StateTransitionReason) : undefined,
    endedBySpotInterruption:
      ended && reasonCode !== undefined ? SPOT_INTERRUPTION_CODES.has(reasonCode) : undefined,
  };
}

/**
 * The time in a StateTransitionReason, e.g. "User initiated (2026-12-05 02:00:00 GMT)": when an instance was asked to
 * stop or terminate. Undefined when the reason carries none (EC2 leaves it out for some transitions).
 */
export function transitionTime(reason: string | undefined): Date | undefined {
  const match = /\((\d{4}-\d{2}-\d{2}) (\d{2}:\d{2}:\d{2}) GMT\)/.exec(reason ?? '');
  if (match === null) return undefined;
  const at = new Date(`${match[1] ?? ''}T${match[2] ?? ''}Z`);
  return Number.isNaN(at.getTime()) ? undefined : at;
}

function oldestFirst(a: CloudInstance, b: CloudInstance): number {
  const byTime = (a.launchTime?.getTime() ?? 0) - (b.launchTime?.getTime() ?? 0);
  return byTime !== 0 ? byTime : a.instanceId.localeCompare(b.instanceId);
}

function asProviderError(error: unknown, operation: string): Error {
  if (error instanceof CloudProviderError) return error;
  const message = error instanceof Error ? error.message : String(error);
  return new CloudProviderError(`${operation} failed: ${message}`, awsErrorCode(error), { cause: error });
}

/**
 * CloudProvider on EC2. Launches are idempotent twice over: the ClientToken makes EC2 itself return the original
 * instance, and before launching we look for an instance already tagged with the launch token (EC2 stand-ins such as
 * moto ignore ClientToken; a controller restarted between RunInstances and recording its result relies on this too).
 * The tags are applied by RunInstances itself, so no instance ever exists without them.
 */
export class Ec2Provider implements CloudProvider {
  private readonly config: ParsedConfig;
  private readonly api: Ec2Api;
  private readonly retry: RetryDeps;
  private readonly capacityErrors: CapacityErrorCache;
  /** How long a capacity error or an interruption notice keeps an offering closed (`capacityErrorTtlSeconds`). */
  readonly unavailableOfferingSeconds: number;
  private readonly userDataBase64: string | undefined;
  /** EC2 names of the placement groups known to exist (created or found by this provider object). */
  private readonly knownGroups = new Set<string>();

  constructor(config: Ec2ProviderConfig, deps: Ec2ProviderDeps) {
    this.config = parseWith(ec2ProviderConfigSchema, config, 'EC2 provider configuration');
    this.api = deps.api;
    this.retry = {
      policy: this.config.throttling,
      sleep: deps.sleep ?? realSleep,
      rng: deps.rng ?? new Rng(0x5eed),
    };
    this.unavailableOfferingSeconds = this.config.capacityErrorTtlSeconds;
    this.capacityErrors = new CapacityErrorCache(this.unavailableOfferingSeconds, deps.nowMs ?? Date.now);
    // Rendered once: a bad template or value fails at startup, not at the first launch.
    this.userDataBase64 =
      this.config.worker === undefined
        ? undefined
        : workerUserDataBase64(this.config.worker, 'EC2 provider worker');
  }

  /** A provider using the SDK's standard configuration (credential chain, AWS_ENDPOINT_URL_EC2, …). */
  static fromEnvironment(config: Ec2ProviderConfig, clientOptions: AwsClientOptions = {}): Ec2Provider {
    const client = createEc2Client({ region: config.region, ...clientOptions });
    return new Ec2Provider(config, { api: ec2ApiFromClient(client) });
  }

  private call<T>(operation: string, fn: () => Promise<T>): Promise<T> {
    return retryOnThrottling(operation, fn, this.retry);
  }

  /**
   * Launch in the request's market. Spot goes zone by zone like on demand (capacity errors remembered per type, zone
   * and market); when no zone has spot capacity (or every one is remembered as having none, after a refusal or an
   * interruption), the instance is launched on demand instead and the result says why: an instance now beats a
   * cheaper one later (Karpenter falls back from spot to on-demand capacity the same way). A request that does not
   * allow the fallback (`onDemandFallback: false`: the on-demand price would break the caller's cap) gets the spot
   * capacity error instead. A spot launch none of whose allowed zones is the provider's asks EC2 for no spot at all
   * and says so (NoSpotPoolError), rather than passing for a capacity refusal.
   */
  async launch(input: LaunchRequest): Promise<LaunchResult> {
    const request = parseWith(launchRequestSchema, input, 'launch request');
    const existing = await this.findEarlierLaunch(request);
    if (existing.length > 0)
      return {
        instanceIds: existing.map((i) => i.instanceId),
        availabilityZone: existing[0]?.availabilityZone,
        placementGroup: existing[0]?.placementGroup,
        reusedExisting: true,
        ...(existing[0]?.market === 'spot' ? { market: 'spot' } : {}),
      };
    if (request.market === 'spot') {
      const spot = await this.launchIn(request, 'spot');
      if (spot instanceof SpotUnauthorized) {
        const refusal = asProviderError(
          spot.error,
          `RunInstances ${request.typeName} (spot) in ${spot.zone}`,
        );
        if (!request.onDemandFallback) throw refusal;
        // Refused on demand too (UnauthorizedOperation thrown from here): not spot's doing.
        const onDemand = await this.launchIn(request, 'on-demand');
        if (onDemand instanceof InsufficientCapacityError || onDemand instanceof SpotUnauthorized)
          throw onDemand instanceof SpotUnauthorized ? refusal : onDemand;
        // On demand was authorized: the refusal was spot's own, for the whole account.
        this.capacityErrors.markMarketUnavailable('spot');
        return {
          ...onDemand,
          marketFallback: `spot launches are not authorized (${refusal.message}); launched on demand`,
        };
      }
      if (!(spot instanceof InsufficientCapacityError)) return spot;
      if (!request.onDemandFallback) throw spot;
      const onDemand = await this.launchIn(request, 'on-demand');
      if (onDemand instanceof InsufficientCapacityError || onDemand instanceof SpotUnauthorized)
        throw onDemand;
      const why = spot instanceof NoSpotPoolError ? spot.message : `no spot capacity: ${spot.message}`;
      return { ...onDemand, marketFallback: `${why}; launched on demand` };
    }
    const launched = await this.launchIn(request, 'on-demand');
    if (launched instanceof InsufficientCapacityError || launched instanceof SpotUnauthorized) throw launched;
    return launched;
  }

  /**
   * Every zone in one market (for spot, those of `spotZones` when the request limits them); the capacity error
   * (returned, not thrown) when none has room.
   */
  private async launchIn(
    request: ValidRequest,
    market: Market,
  ): Promise<LaunchResult | InsufficientCapacityError | SpotUnauthorized> {
    const allowed = market === 'spot' ? request.spotZones : undefined;
    const { candidates, skipped } = this.zonesToTry(
      request.typeName,
      request.availabilityZones,
      market,
      allowed,
    );
    // No zone to try at all, none refused nor remembered as refused: not a capacity error EC2 gave.
    if (allowed !== undefined && candidates.length === 0 && skipped.length === 0)
      return new NoSpotPoolError(
        request.typeName,
        allowed,
        this.config.placements.map((p) => p.availabilityZone),
        request.onDemandFallback,
      );
    const attempts: LaunchAttempt[] = candidates.map((placement) => ({ placement, market }));
    // Why the instance is not in the group it asked for, once it is known not to be.
    let groupFallback: string | undefined;
    // The group's attempt goes first, in the best zone there is capacity in (the preferred one, normally).
    const first = candidates[0];
    if (request.placementGroup !== undefined && first !== undefined) {
      const ensured = await this.ensurePlacementGroup(request.clusterName, request.placementGroup);
      if ('refused' in ensured) groupFallback = ensured.refused;
      else
        attempts.unshift({
          placement: first,
          market,
          group: { name: request.placementGroup, ec2Name: ensured.ec2Name },
        });
    }
    const refused: string[] = [];
    let lastCapacityError: unknown;
    for (const attempt of attempts) {
      const { placement, group } = attempt;
      try {
        const out = await this.call('RunInstances', () =>
          this.api.runInstances(this.runInput(request, attempt)),
        );
        const ids = (out.Instances ?? []).flatMap((i) => (i.InstanceId === undefined ? [] : [i.InstanceId]));
        if (ids.length === 0) throw new CloudProviderError('RunInstances returned no instance', undefined);
        return {
          instanceIds: ids,
          availabilityZone: out.Instances?.[0]?.Placement?.AvailabilityZone ?? placement.availabilityZone,
          placementGroup: group?.name,
          ...(group === undefined && groupFallback !== undefined ? { placementFallback: groupFallback } : {}),
          reusedExisting: false,
          ...(market === 'spot' ? { market } : {}),
        };
      } catch (e) {
        const code = awsErrorCode(e);
        if (group !== undefined && code !== undefined && GROUP_REFUSAL_CODES.has(code)) {
          // The group is full (or cannot take this type here): that says nothing about the zone's capacity.
          if (code === 'InvalidPlacementGroup.Unknown') this.knownGroups.delete(group.ec2Name);
          groupFallback = `placement group ${group.name} refused the instance in ${placement.availabilityZone} (${code})`;
          lastCapacityError = e;
          continue;
        }
        if (market === 'spot' && code === UNAUTHORIZED && !/spot/i.test(e instanceof Error ? e.message : ''))
          return new SpotUnauthorized(placement.availabilityZone, e);
        if (
          market === 'spot' &&
          code !== undefined &&
          (SPOT_ACCOUNT_REFUSAL_CODES.has(code) || code === UNAUTHORIZED)
        ) {
          this.capacityErrors.markMarketUnavailable('spot');
          refused.push(`${placement.availabilityZone} (${code}: spot is refused for the account)`);
          return new InsufficientCapacityError(request.typeName, refused, skipped, { cause: e });
        }
        const capacityCodes = market === 'spot' ? SPOT_REFUSAL_CODES : ZONE_CAPACITY_CODES;
        if (code !== undefined && capacityCodes.has(code)) {
          if (code === SUBNET_FULL) this.capacityErrors.markZoneUnavailable(placement.availabilityZone);
          else this.capacityErrors.markUnavailable(request.typeName, placement.availabilityZone, market);
          refused.push(placement.availabilityZone);
          lastCapacityError = e;
          continue;
        }
        if (code !== undefined && QUOTA_CODES.has(code))
          throw new QuotaExceededError(request.typeName, code, { cause: e, market });
        throw asProviderError(
          e,
          `RunInstances ${request.typeName}${market === 'spot' ? ' (spot)' : ''} in ${placement.availabilityZone}`,
        );
      }
    }
    return new InsufficientCapacityError(request.typeName, refused, skipped, { cause: lastCapacityError });
  }

  /**
   * The cluster placement group, created on first use (strategy `cluster`, tagged with the cluster so only its own
   * groups are ever deleted). Creating is the idempotent step: a group that exists already answers Duplicate. A group
   * that cannot be created (a policy without the permission, the account's group quota) is not a reason to launch
   * nothing: the launch goes on without it and says why; only throttling, which a later retry gets past, fails it.
   */
  private async ensurePlacementGroup(
    clusterName: string,
    group: string,
  ): Promise<{ ec2Name: string } | { refused: string }> {
    const ec2Name = ec2PlacementGroupName(clusterName, group);
    if (this.knownGroups.has(ec2Name)) return { ec2Name };
    try {
      await this.call('CreatePlacementGroup', () =>
        this.api.createPlacementGroup({
          GroupName: ec2Name,
          Strategy: 'cluster',
          TagSpecifications: [
            {
              ResourceType: 'placement-group',
              Tags: [
                { Key: TAG_CLUSTER, Value: clusterName },
                { Key: TAG_PLACEMENT_GROUP, Value: group },
              ],
            },
          ],
        }),
      );
    } catch (e) {
      if (e instanceof ThrottlingError) throw e;
      if (awsErrorCode(e) !== 'InvalidPlacementGroup.Duplicate')
        return { refused: asProviderError(e, `CreatePlacementGroup ${ec2Name}`).message };
    }
    this.knownGroups.add(ec2Name);
    return { ec2Name };
  }

  async deletePlacementGroups(clusterName: string, keep: ReadonlySet<string>): Promise<string[]> {
    const listed = await this.call('DescribePlacementGroups', () =>
      this.api.describePlacementGroups({ Filters: [{ Name: `tag:${TAG_CLUSTER}`, Values: [clusterName] }] }),
    ).catch((e: unknown) => {
      throw asProviderError(e, 'DescribePlacementGroups');
    });
    const deleted: string[] = [];
    for (const pg of listed.PlacementGroups ?? []) {
      const tags = tagsToRecord(pg.Tags);
      const group = tags[TAG_PLACEMENT_GROUP];
      // Only groups this cluster created (both tags), and not one being deleted already.
      if (pg.GroupName === undefined || group === undefined || tags[TAG_CLUSTER] !== clusterName) continue;
      if (keep.has(group) || pg.State === 'deleting' || pg.State === 'deleted') continue;
      const ec2Name = pg.GroupName;
      try {
        await this.call('DeletePlacementGroup', () => this.api.deletePlacementGroup({ GroupName: ec2Name }));
        this.knownGroups.delete(ec2Name);
        deleted.push(group);
      } catch (e) {
        const code = awsErrorCode(e);
        // InUse: instances (terminating ones too) are still in it; the next call tries again.
        if (code === 'InvalidPlacementGroup.InUse') continue;
        if (code === 'InvalidPlacementGroup.Unknown') {
          this.knownGroups.delete(ec2Name);
          continue;
        }
        throw asProviderError(e, `DeletePlacementGroup ${ec2Name}`);
      }
    }
    return deleted.sort();
  }

  markOfferingUnavailable(typeName: string, zone: string, market: Market, sinceSeconds?: number): void {
    this.capacityErrors.markUnavailable(
      typeName,
      zone,
      market,
      sinceSeconds === undefined ? undefined : sinceSeconds * 1000,
    );
  }

  isCapacityConstrained(typeName: string, market: Market = 'on-demand'): boolean {
    return this.config.placements.every((p) =>
      this.capacityErrors.isUnavailable(typeName, p.availabilityZone, market),
    );
  }

  /**
   * Preferred zones first (those we have a placement for), then the rest in configuration order; minus cached ICEs,
   * and minus zones outside `allowed` when given (a spot launch the caller's caps limit to some zones' prices).
   */
  private zonesToTry(
    typeName: string,
    preferred: readonly string[],
    market: Market,
    allowed?: readonly string[],
  ): { candidates: Placement[]; skipped: string[] } {
    const byZone = new Map(
      this.config.placements
        .filter((p) => allowed === undefined || allowed.includes(p.availabilityZone))
        .map((p) => [p.availabilityZone, p]),
    );
    const ordered: Placement[] = [];
    for (const zone of [...preferred, ...byZone.keys()]) {
      const placement = byZone.get(zone);
      if (placement !== undefined && !ordered.includes(placement)) ordered.push(placement);
    }
    const candidates = ordered.filter(
      (p) => !this.capacityErrors.isUnavailable(typeName, p.availabilityZone, market),
    );
    const skipped = ordered.filter((p) => !candidates.includes(p)).map((p) => p.availabilityZone);
    return { candidates, skipped };
  }

  private runInput(request: ValidRequest, attempt: LaunchAttempt): RunInstancesCommandInput {
    const { placement, group, market } = attempt;
    const tags: Tag[] = [
      ...('Name' in request.tags
        ? []
        : [{ Key: 'Name', Value: `fleetwise-${request.clusterName}-${request.instanceKey}`.slice(0, 256) }]),
      ...Object.entries(request.tags).map(([Key, Value]) => ({ Key, Value })),
      { Key: TAG_CLUSTER, Value: request.clusterName },
      { Key: TAG_PLAN, Value: request.planId },
      { Key: TAG_INSTANCE_KEY, Value: request.instanceKey },
      { Key: TAG_LAUNCH_TOKEN, Value: request.idempotencyToken },
      ...(group === undefined ? [] : [{ Key: TAG_PLACEMENT_GROUP, Value: group.name }]),
    ];
    const profile = this.config.instanceProfile;
    return {
      ImageId: this.config.amiId,
      InstanceType: request.typeName as RunInstancesCommandInput['InstanceType'],
      MinCount: request.count,
      MaxCount: request.count,
      ClientToken: zoneClientToken(
        request.clusterName,
        request.idempotencyToken,
        placement.availabilityZone,
        group?.ec2Name,
        market,
      ),
      // A subnet fixes the zone; without one (default VPC) the zone is asked for by name.
      ...(placement.subnetId === undefined ? {} : { SubnetId: placement.subnetId }),
      ...(placement.subnetId === undefined || group !== undefined
        ? {
            Placement: {
              ...(placement.subnetId === undefined ? { AvailabilityZone: placement.availabilityZone } : {}),
              ...(group === undefined ? {} : { GroupName: group.ec2Name }),
            },
          }
        : {}),
      ...(this.config.securityGroupIds.length === 0
        ? {}
        : { SecurityGroupIds: this.config.securityGroupIds }),
      ...(profile === undefined
        ? {}
        : { IamInstanceProfile: profile.startsWith('arn:') ? { Arn: profile } : { Name: profile } }),
      ...(this.config.keyName === undefined ? {} : { KeyName: this.config.keyName }),
      ...(this.userDataBase64 === undefined ? {} : { UserData: this.userDataBase64 }),
      // A one-time spot request at the on-demand price cap (no MaxPrice): EC2 terminates the instance when it needs
      // the capacity back, after the two-minute notice the worker and the interruption queue act on.
      ...(market === 'spot'
        ? {
            InstanceMarketOptions: {
              MarketType: 'spot',
              SpotOptions: { SpotInstanceType: 'one-time', InstanceInterruptionBehavior: 'terminate' },
            },
          }
        : {}),
      // IMDSv2 only, and a hop limit of 1 so job containers (one network hop further) cannot read the worker role's
      // credentials; the worker itself runs on the host.
      MetadataOptions: { HttpTokens: 'required', HttpEndpoint: 'enabled', HttpPutResponseHopLimit: 1 },
      // A worker that powers its machine off should stop the bill, not leave a stopped instance behind.
      InstanceInitiatedShutdownBehavior: 'terminate',
      TagSpecifications: [
        { ResourceType: 'instance', Tags: tags },
        { ResourceType: 'volume', Tags: tags },
      ],
    };
  }

  /**
   * The instances an earlier attempt of this launch made: tagged with its launch token, or else carrying a ClientToken
   * any of its attempts could have sent. The second look is needed because the ClientToken is per zone, market and
   * group while the order of attempts is not fixed: the capacity-error memory that moved the first attempt from zone a
   * to zone b is per process, so a retry after a restart (or by the standby taking over) starts in zone a again, with
   * a token EC2 launched nothing for; were the first instance missed by the tag look, EC2 would launch a second. So
   * every token of every zone, market and group the launch could have used is looked for before any RunInstances.
   * Matched on the instances' own ClientToken among the cluster's instances of the type (one launch's are all of its
   * type), not with EC2's client-token filter, which stand-ins such as moto do not implement.
   */
  private async findEarlierLaunch(request: ValidRequest): Promise<CloudInstance[]> {
    const byTag = await this.describe(
      [
        { Name: `tag:${TAG_CLUSTER}`, Values: [request.clusterName] },
        { Name: `tag:${TAG_LAUNCH_TOKEN}`, Values: [request.idempotencyToken] },
      ],
      'DescribeInstances (launch-token pre-check)',
    );
    const found =
      byTag.length > 0
        ? byTag
        : await this.describe(
            // The cluster's tag too: RunInstances applies it with the instance, so every instance a launch of this
            // cluster made carries it, and a fresh launch does not page through every cluster's instances of the type.
            [
              { Name: 'instance-type', Values: [request.typeName] },
              { Name: `tag:${TAG_CLUSTER}`, Values: [request.clusterName] },
            ],
            'DescribeInstances (client-token pre-check)',
            this.possibleClientTokens(request),
          );
    // A running one first: the record takes the first, and the cloud sync terminates the others as twins.
    const rank = (i: CloudInstance): number =>
      i.state === 'pending' || i.state === 'running' ? 0 : i.state === 'terminated' ? 2 : 1;
    return found.sort((a, b) => rank(a) - rank(b) || oldestFirst(a, b));
  }

  /** Every ClientToken a launch's attempts may send: each configured zone, in each market and group it may try. */
  private possibleClientTokens(request: ValidRequest): ReadonlySet<string> {
    const markets: Market[] = request.market === 'spot' ? ['on-demand', 'spot'] : ['on-demand'];
    const groups = [
      undefined,
      ...(request.placementGroup === undefined
        ? []
        : [ec2PlacementGroupName(request.clusterName, request.placementGroup)]),
    ];
    const tokens = new Set<string>();
    for (const { availabilityZone } of this.config.placements)
      for (const market of markets)
        for (const group of groups)
          tokens.add(
            zoneClientToken(request.clusterName, request.idempotencyToken, availabilityZone, group, market),
          );
    return tokens;
  }

  async list(clusterName: string, options: ListOptions = {}): Promise<CloudInstance[]> {
    // Only filters moto implements too: tag:<key> and instance-state-name (its availability-zone filter is broken).
    const filters = [{ Name: `tag:${TAG_CLUSTER}`, Values: [clusterName] }];
    if (options.includeTerminated !== true)
      filters.push({ Name: 'instance-state-name', Values: [...LIVE_STATES] });
    return (await this.describe(filters, 'DescribeInstances')).sort(oldestFirst);
  }

  /**
   * One instance of the cluster, in any state, as EC2 describes it now (type, zone, image, owner): what a worker's
   * signed instance identity document is checked against when it registers. Undefined when EC2 has no instance with
   * that id and the cluster's tag.
   */
  async describeInstance(clusterName: string, instanceId: string): Promise<CloudInstance | undefined> {
    if (!INSTANCE_ID.test(instanceId)) return undefined;
    const found = await this.describe(
      [
        { Name: 'instance-id', Values: [instanceId] },
        { Name: `tag:${TAG_CLUSTER}`, Values: [clusterName] },
      ],
      'DescribeInstances (worker identity)',
    );
    return found.find((i) => i.instanceId === instanceId);
  }

  /** The instances matching `filters` (and, when given, carrying one of `clientTokens`), every page. */
  private async describe(
    filters: { Name: string; Values: string[] }[],
    operation: string,
    clientTokens?: ReadonlySet<string>,
  ): Promise<CloudInstance[]> {
    const out: CloudInstance[] = [];
    let nextToken: string | undefined;
    do {
      const page = await this.call(operation, () =>
        this.api.describeInstances({
          Filters: filters,
          MaxResults: this.config.listPageSize,
          ...(nextToken === undefined ? {} : { NextToken: nextToken }),
        }),
      ).catch((e: unknown) => {
        throw asProviderError(e, operation);
      });
      for (const reservation of page.Reservations ?? [])
        for (const instance of reservation.Instances ?? []) {
          if (clientTokens !== undefined && !clientTokens.has(instance.ClientToken ?? '')) continue;
          const mapped = toCloudInstance(instance, reservation.OwnerId);
          if (mapped !== undefined) out.push(mapped);
        }
      nextToken = page.NextToken === '' ? undefined : page.NextToken;
    } while (nextToken !== undefined);
    return out;
  }

  async terminate(instanceIds: readonly string[]): Promise<void> {
    const ids = [...new Set(instanceIds)];
    const bad = ids.filter((id) => !INSTANCE_ID.test(id));
    if (bad.length > 0)
      throw new ValidationError(
        'terminate',
        bad.map((id) => `${JSON.stringify(id)}: not an EC2 instance id`),
      );
    for (let start = 0; start < ids.length; start += TERMINATE_BATCH) {
      const batch = ids.slice(start, start + TERMINATE_BATCH);
      try {
        await this.call('TerminateInstances', () => this.api.terminateInstances({ InstanceIds: batch }));
      } catch (e) {
        // One unknown id fails the whole call: retry one by one, ignoring ids that are already gone.
        if (awsErrorCode(e) !== 'InvalidInstanceID.NotFound') throw asProviderError(e, 'TerminateInstances');
        for (const id of batch) await this.terminateOneIgnoringMissing(id);
      }
    }
  }

  private async terminateOneIgnoringMissing(id: string): Promise<void> {
    try {
      await this.call('TerminateInstances', () => this.api.terminateInstances({ InstanceIds: [id] }));
    } catch (e) {
      if (awsErrorCode(e) !== 'InvalidInstanceID.NotFound')
        throw asProviderError(e, `TerminateInstances ${id}`);
    }
  }
}
