import { InsufficientCapacityError } from '../provider.js';

/**
 * How a launch reads EC2's refusals of RunInstances: which codes mean another zone, another market, or no launch.
 */

/**
 * Codes meaning "this type cannot be had in this zone right now": try another zone, and remember it for a while.
 * `Unsupported` is what EC2 answers when a type is not offered in the requested zone at all.
 */
export const ZONE_CAPACITY_CODES: ReadonlySet<string> = new Set([
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
export const GROUP_REFUSAL_CODES: ReadonlySet<string> = new Set([
  ...ZONE_CAPACITY_CODES,
  'InvalidParameterCombination',
  'InvalidPlacementGroup.Unknown',
]);

/**
 * Spot refusals: no spot capacity for the type in the zone (the zone codes) or at the price asked, or the account's
 * spot quota. A spot launch then tries the next zone, and after the last one falls back to on demand.
 */
export const SPOT_REFUSAL_CODES: ReadonlySet<string> = new Set([
  ...ZONE_CAPACITY_CODES,
  'SpotMaxPriceTooLow',
]);

/**
 * Spot refused for the whole account, whatever the type and zone: its spot quota is used up, or spot launches are not
 * authorized (no spot service-linked role and no right to create it). No other spot zone is tried, spot is remembered
 * as unavailable for a while, and the instance is launched on demand: the job runs, at the on-demand price, and the
 * fallback says why.
 */
export const SPOT_ACCOUNT_REFUSAL_CODES: ReadonlySet<string> = new Set([
  'MaxSpotInstanceCountExceeded',
  'AuthFailure.ServiceLinkedRoleCreationNotPermitted',
]);

/**
 * UnauthorizedOperation on a spot attempt may be spot's own (a policy without `spot-instances-request/*`) or anything
 * else the launch needs (iam:PassRole for the instance profile, the AMI, the subnet); EC2's message is usually encoded
 * and does not say which. Only one naming spot is taken as spot's; otherwise the same launch is tried on demand once:
 * refused there too, it is an authorization error, not a capacity one, and spot is not remembered as unavailable.
 */
export const UNAUTHORIZED = 'UnauthorizedOperation';

/** The zone's subnet has no free address: full for every type and market, so it is remembered per zone. */
export const SUBNET_FULL = 'InsufficientFreeAddressesInSubnet';

/** Account quotas: no other zone helps; a type in another quota class (e.g. C/R instead of P) may. */
export const QUOTA_CODES: ReadonlySet<string> = new Set([
  'InstanceLimitExceeded',
  'VcpuLimitExceeded',
  'MaxSpotInstanceCountExceeded',
]);

/** A spot attempt refused with UnauthorizedOperation that does not say it is spot's (see UNAUTHORIZED). */
export class SpotUnauthorized {
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
