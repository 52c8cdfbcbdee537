import type { RunInstancesCommandInput, Tag } from '@aws-sdk/client-ec2';
import type { Market } from '../../core/market.js';
import {
  TAG_CLUSTER,
  TAG_INSTANCE_KEY,
  TAG_LAUNCH_TOKEN,
  TAG_PLACEMENT_GROUP,
  TAG_PLAN,
  type ValidLaunchRequest,
} from '../provider.js';
import type { ConfiguredPlacement, ParsedEc2ProviderConfig } from './ec2-provider-config.js';
import { zoneClientToken } from './launch-idempotency.js';

/** One RunInstances attempt: a zone, the market, and the placement group to launch into, if any. */
export interface LaunchAttempt {
  readonly placement: ConfiguredPlacement;
  readonly market: Market;
  readonly group?: { readonly name: string; readonly ec2Name: string } | undefined;
}

/**
 * What one attempt asks RunInstances for: the request's type and count in the attempt's zone, market and group, tagged
 * with the cluster, plan, instance key and launch token (on the volumes too), from the configured AMI.
 */
export function runInstancesInput(
  config: ParsedEc2ProviderConfig,
  /** The worker bootstrap, rendered once by the provider; undefined when the AMI starts a worker itself. */
  userDataBase64: string | undefined,
  request: ValidLaunchRequest,
  attempt: LaunchAttempt,
): RunInstancesCommandInput {
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
  const profile = config.instanceProfile;
  return {
    ImageId: config.amiId,
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
    ...(config.securityGroupIds.length === 0 ? {} : { SecurityGroupIds: config.securityGroupIds }),
    ...(profile === undefined
      ? {}
      : { IamInstanceProfile: profile.startsWith('arn:') ? { Arn: profile } : { Name: profile } }),
    ...(config.keyName === undefined ? {} : { KeyName: config.keyName }),
    ...(userDataBase64 === undefined ? {} : { UserData: userDataBase64 }),
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
