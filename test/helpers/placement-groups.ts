/**
 * EC2 placement groups in front of moto_server. moto 5.2.1 does not implement them: CreatePlacementGroup,
 * DescribePlacementGroups and DeletePlacementGroup answer HTTP 500 (NotImplementedError), and RunInstances accepts
 * Placement.GroupName but ignores it. This stand-in keeps the groups in memory with EC2's documented answers
 * (InvalidPlacementGroup.Duplicate / .Unknown / .InUse, tag filters, a group's members) and passes every other call
 * to the moto-backed API, so instances, zones, subnets and tags stay moto's. `full` groups refuse new members with
 * InsufficientInstanceCapacity, as a cluster group without room near its instances does.
 */
import {
  EC2ServiceException,
  type PlacementGroup,
  type RunInstancesCommandOutput,
  type Tag,
} from '@aws-sdk/client-ec2';
import type { Ec2Api } from '../../src/cloud/aws/ec2-api.js';

/** An error as the SDK raises it for an EC2 error response. */
export function ec2Error(code: string, httpStatusCode = 400): EC2ServiceException {
  return new EC2ServiceException({
    name: code,
    $fault: httpStatusCode >= 500 ? 'server' : 'client',
    $metadata: { httpStatusCode },
    message: `${code} (EC2 stand-in)`,
  });
}

export interface StandInGroup {
  readonly name: string;
  readonly strategy: string | undefined;
  readonly tags: readonly Tag[];
  /** Instances launched into the group. */
  readonly members: Set<string>;
}

export interface PlacementGroupStandIn extends Ec2Api {
  readonly groups: Map<string, StandInGroup>;
  /** Group names whose next RunInstances answer InsufficientInstanceCapacity. */
  readonly full: Set<string>;
  /** Calls to the group operations, in order (`Create <name>`, `Describe`, `Delete <name>`). */
  readonly groupCalls: string[];
}

export function withPlacementGroups(real: Ec2Api): PlacementGroupStandIn {
  const groups = new Map<string, StandInGroup>();
  const full = new Set<string>();
  const groupCalls: string[] = [];
  const view = (g: StandInGroup): PlacementGroup => ({
    GroupName: g.name,
    Strategy: g.strategy as PlacementGroup['Strategy'],
    State: 'available',
    Tags: [...g.tags],
  });
  const liveMembers = async (g: StandInGroup): Promise<string[]> => {
    if (g.members.size === 0) return [];
    const out = await real.describeInstances({ InstanceIds: [...g.members] });
    return (out.Reservations ?? [])
      .flatMap((r) => r.Instances ?? [])
      .filter((i) => i.State?.Name !== 'terminated')
      .flatMap((i) => (i.InstanceId === undefined ? [] : [i.InstanceId]));
  };
  return {
    groups,
    full,
    groupCalls,
    runInstances: async (input): Promise<RunInstancesCommandOutput> => {
      const name = input.Placement?.GroupName;
      if (name === undefined) return real.runInstances(input);
      const group = groups.get(name);
      if (group === undefined) throw ec2Error('InvalidPlacementGroup.Unknown');
      if (full.has(name)) throw ec2Error('InsufficientInstanceCapacity', 500);
      const out = await real.runInstances(input);
      for (const i of out.Instances ?? []) if (i.InstanceId !== undefined) group.members.add(i.InstanceId);
      return out;
    },
    describeInstances: (input) => real.describeInstances(input),
    terminateInstances: (input) => real.terminateInstances(input),
    describeInstanceTypes: (input) => real.describeInstanceTypes(input),
    createPlacementGroup: async (input) => {
      const name = input.GroupName ?? '';
      groupCalls.push(`Create ${name}`);
      if (groups.has(name)) throw ec2Error('InvalidPlacementGroup.Duplicate');
      const tags = (input.TagSpecifications ?? [])
        .filter((t) => t.ResourceType === 'placement-group')
        .flatMap((t) => t.Tags ?? []);
      const group: StandInGroup = { name, strategy: input.Strategy, tags, members: new Set() };
      groups.set(name, group);
      return { $metadata: {}, PlacementGroup: view(group) };
    },
    describePlacementGroups: async (input) => {
      groupCalls.push('Describe');
      let found = [...groups.values()];
      if (input.GroupNames !== undefined) {
        const unknown = input.GroupNames.filter((n) => !groups.has(n));
        if (unknown.length > 0) throw ec2Error('InvalidPlacementGroup.Unknown');
        found = found.filter((g) => input.GroupNames?.includes(g.name) === true);
      }
      for (const filter of input.Filters ?? []) {
        const key = filter.Name?.startsWith('tag:') === true ? filter.Name.slice(4) : undefined;
        if (key === undefined) throw new Error(`the stand-in knows only tag filters, not ${filter.Name}`);
        found = found.filter((g) =>
          g.tags.some((t) => t.Key === key && (filter.Values ?? []).includes(t.Value ?? '')),
        );
      }
      return { $metadata: {}, PlacementGroups: found.map(view) };
    },
    deletePlacementGroup: async (input) => {
      const name = input.GroupName ?? '';
      groupCalls.push(`Delete ${name}`);
      const group = groups.get(name);
      if (group === undefined) throw ec2Error('InvalidPlacementGroup.Unknown');
      if ((await liveMembers(group)).length > 0) throw ec2Error('InvalidPlacementGroup.InUse');
      groups.delete(name);
      return { $metadata: {} };
    },
  };
}
