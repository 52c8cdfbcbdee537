import { createHash } from 'node:crypto';
import type { Market } from '../../core/market.js';
import { TAG_CLUSTER, TAG_LAUNCH_TOKEN, type CloudInstance, type ValidLaunchRequest } from '../provider.js';
import { describeInstances, oldestFirst } from './describe-instances.js';
import type { Ec2Calls } from './ec2-calls.js';
import type { ConfiguredPlacement, ParsedEc2ProviderConfig } from './ec2-provider-config.js';
import { ec2PlacementGroupName } from './placement-groups.js';

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
 * The instances an earlier attempt of this launch made: tagged with its launch token, or else carrying a ClientToken
 * any of its attempts could have sent. The second look is needed because the ClientToken is per zone, market and
 * group while the order of attempts is not fixed: the capacity-error memory that moved the first attempt from zone a
 * to zone b is per process, so a retry after a restart (or by the standby taking over) starts in zone a again, with
 * a token EC2 launched nothing for; were the first instance missed by the tag look, EC2 would launch a second. So
 * every token of every zone, market and group the launch could have used is looked for before any RunInstances.
 * Matched on the instances' own ClientToken among the cluster's instances of the type (one launch's are all of its
 * type), not with EC2's client-token filter, which stand-ins such as moto do not implement.
 */
export async function findEarlierLaunch(
  ec2: Ec2Calls,
  config: ParsedEc2ProviderConfig,
  request: ValidLaunchRequest,
): Promise<CloudInstance[]> {
  const byTag = await describeInstances(
    ec2,
    config.listPageSize,
    [
      { Name: `tag:${TAG_CLUSTER}`, Values: [request.clusterName] },
      { Name: `tag:${TAG_LAUNCH_TOKEN}`, Values: [request.idempotencyToken] },
    ],
    'DescribeInstances (launch-token pre-check)',
  );
  const found =
    byTag.length > 0
      ? byTag
      : await describeInstances(
          ec2,
          config.listPageSize,
          // The cluster's tag too: RunInstances applies it with the instance, so every instance a launch of this
          // cluster made carries it, and a fresh launch does not page through every cluster's instances of the type.
          [
            { Name: 'instance-type', Values: [request.typeName] },
            { Name: `tag:${TAG_CLUSTER}`, Values: [request.clusterName] },
          ],
          'DescribeInstances (client-token pre-check)',
          possibleClientTokens(config.placements, request),
        );
  // A running one first: the record takes the first, and the cloud sync terminates the others as twins.
  const rank = (i: CloudInstance): number =>
    i.state === 'pending' || i.state === 'running' ? 0 : i.state === 'terminated' ? 2 : 1;
  return found.sort((a, b) => rank(a) - rank(b) || oldestFirst(a, b));
}

/** Every ClientToken a launch's attempts may send: each configured zone, in each market and group it may try. */
function possibleClientTokens(
  placements: readonly ConfiguredPlacement[],
  request: ValidLaunchRequest,
): ReadonlySet<string> {
  const markets: Market[] = request.market === 'spot' ? ['on-demand', 'spot'] : ['on-demand'];
  const groups = [
    undefined,
    ...(request.placementGroup === undefined
      ? []
      : [ec2PlacementGroupName(request.clusterName, request.placementGroup)]),
  ];
  const tokens = new Set<string>();
  for (const { availabilityZone } of placements)
    for (const market of markets)
      for (const group of groups)
        tokens.add(
          zoneClientToken(request.clusterName, request.idempotencyToken, availabilityZone, group, market),
        );
  return tokens;
}
