import type { Market } from '../../core/market.js';
import {
  CloudProviderError,
  InsufficientCapacityError,
  QuotaExceededError,
  spotFallbackReason,
  type LaunchResult,
  type ValidLaunchRequest,
} from '../provider.js';
import type { CapacityErrorCache } from './capacity-error-cache.js';
import { awsErrorCode } from './client-config.js';
import { asProviderError, type Ec2Calls } from './ec2-calls.js';
import type { ConfiguredPlacement, ParsedEc2ProviderConfig } from './ec2-provider-config.js';
import {
  GROUP_REFUSAL_CODES,
  NoSpotPoolError,
  QUOTA_CODES,
  SPOT_ACCOUNT_REFUSAL_CODES,
  SPOT_REFUSAL_CODES,
  SpotUnauthorized,
  SUBNET_FULL,
  UNAUTHORIZED,
  ZONE_CAPACITY_CODES,
} from './launch-refusals.js';
import type { PlacementGroups } from './placement-groups.js';
import { runInstancesInput, type LaunchAttempt } from './run-instances-input.js';

/**
 * Launches on EC2 with its fallbacks: zone after zone, the placement group first and without it after, spot and then
 * on demand; capacity refusals are remembered in the provider's capacity-error cache.
 */
export class InstanceLauncher {
  constructor(
    private readonly config: ParsedEc2ProviderConfig,
    private readonly ec2: Ec2Calls,
    private readonly capacityErrors: CapacityErrorCache,
    private readonly placementGroups: PlacementGroups,
    /** The worker bootstrap, rendered once by the provider. */
    private readonly userDataBase64: string | undefined,
  ) {}

  /**
   * Launch in the request's market. Spot goes zone by zone like on demand (capacity errors remembered per type, zone
   * and market); when no zone has spot capacity (or every one is remembered as having none, after a refusal or an
   * interruption), the instance is launched on demand instead and the result says why: an instance now beats a
   * cheaper one later (Karpenter falls back from spot to on-demand capacity the same way). A request that does not
   * allow the fallback (`onDemandFallback: false`: the on-demand price would break the caller's cap) gets the spot
   * capacity error instead. A spot launch none of whose allowed zones is the provider's asks EC2 for no spot at all
   * and says so (NoSpotPoolError), rather than passing for a capacity refusal.
   */
  async launch(request: ValidLaunchRequest): Promise<LaunchResult> {
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
          marketFallback: `spot launches are not authorized (${refusal.message})`,
        };
      }
      if (!(spot instanceof InsufficientCapacityError)) return spot;
      if (!request.onDemandFallback) throw spot;
      const onDemand = await this.launchIn(request, 'on-demand');
      if (onDemand instanceof InsufficientCapacityError || onDemand instanceof SpotUnauthorized)
        throw onDemand;
      return { ...onDemand, marketFallback: spotFallbackReason(spot, spot instanceof NoSpotPoolError) };
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
    request: ValidLaunchRequest,
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
      const ensured = await this.placementGroups.ensure(request.clusterName, request.placementGroup);
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
        const out = await this.ec2.call('RunInstances', () =>
          this.ec2.api.runInstances(runInstancesInput(this.config, this.userDataBase64, request, attempt)),
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
          if (code === 'InvalidPlacementGroup.Unknown') this.placementGroups.forget(group.ec2Name);
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
   * Preferred zones first (those we have a placement for), then the rest in configuration order; minus cached ICEs,
   * and minus zones outside `allowed` when given (a spot launch the caller's caps limit to some zones' prices).
   */
  private zonesToTry(
    typeName: string,
    preferred: readonly string[],
    market: Market,
    allowed?: readonly string[],
  ): { candidates: ConfiguredPlacement[]; skipped: string[] } {
    const byZone = new Map(
      this.config.placements
        .filter((p) => allowed === undefined || allowed.includes(p.availabilityZone))
        .map((p) => [p.availabilityZone, p]),
    );
    const ordered: ConfiguredPlacement[] = [];
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
}
