import type { Instance, Tag } from '@aws-sdk/client-ec2';
import { TAG_PLACEMENT_GROUP, type CloudInstance, type InstanceState } from '../provider.js';
import { asProviderError, type Ec2Calls } from './ec2-calls.js';

/** The states of an instance that still exists (or may still bill): what a listing shows unless asked for more. */
export const LIVE_STATES: readonly InstanceState[] = [
  'pending',
  'running',
  'stopping',
  'stopped',
  'shutting-down',
];
const INSTANCE_STATES: ReadonlySet<string> = new Set<InstanceState>([...LIVE_STATES, 'terminated']);
/** An EC2 instance id; anything else is refused before EC2 is asked. */
export const INSTANCE_ID = /^i-[0-9a-f]{8,17}$/;

/** EC2's tag list as a record (a tag without a value reads as ''). */
export function tagsToRecord(tags: readonly Tag[] | undefined): Record<string, string> {
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

/** Order of launch (then of id, for instances launched together): the order listings are given in. */
export function oldestFirst(a: CloudInstance, b: CloudInstance): number {
  const byTime = (a.launchTime?.getTime() ?? 0) - (b.launchTime?.getTime() ?? 0);
  return byTime !== 0 ? byTime : a.instanceId.localeCompare(b.instanceId);
}

/** The instances matching `filters` (and, when given, carrying one of `clientTokens`), every page. */
export async function describeInstances(
  ec2: Ec2Calls,
  pageSize: number,
  filters: { Name: string; Values: string[] }[],
  operation: string,
  clientTokens?: ReadonlySet<string>,
): Promise<CloudInstance[]> {
  const out: CloudInstance[] = [];
  let nextToken: string | undefined;
  do {
    const page = await ec2
      .call(operation, () =>
        ec2.api.describeInstances({
          Filters: filters,
          MaxResults: pageSize,
          ...(nextToken === undefined ? {} : { NextToken: nextToken }),
        }),
      )
      .catch((e: unknown) => {
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
