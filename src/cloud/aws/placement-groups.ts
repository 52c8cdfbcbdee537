import { createHash } from 'node:crypto';
import { TAG_CLUSTER, TAG_PLACEMENT_GROUP, ThrottlingError } from '../provider.js';
import { awsErrorCode } from './client-config.js';
import { asProviderError, type Ec2Calls } from './ec2-calls.js';
import { tagsToRecord } from './describe-instances.js';

/** EC2's limit on a placement group's name. */
const MAX_GROUP_NAME = 255;

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

/** A cluster's placement groups in EC2: created on first use, deleted when no job needs them any longer. */
export class PlacementGroups {
  /** EC2 names of the placement groups known to exist (created or found by this provider object). */
  private readonly knownGroups = new Set<string>();

  constructor(private readonly ec2: Ec2Calls) {}

  /**
   * The cluster placement group, created on first use (strategy `cluster`, tagged with the cluster so only its own
   * groups are ever deleted). Creating is the idempotent step: a group that exists already answers Duplicate. A group
   * that cannot be created (a policy without the permission, the account's group quota) is not a reason to launch
   * nothing: the launch goes on without it and says why; only throttling, which a later retry gets past, fails it.
   */
  async ensure(clusterName: string, group: string): Promise<{ ec2Name: string } | { refused: string }> {
    const ec2Name = ec2PlacementGroupName(clusterName, group);
    if (this.knownGroups.has(ec2Name)) return { ec2Name };
    try {
      await this.ec2.call('CreatePlacementGroup', () =>
        this.ec2.api.createPlacementGroup({
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

  /** The cluster's groups not in `keep`, deleted when EC2 lets them go; the names of those deleted, sorted. */
  async deleteUnused(clusterName: string, keep: ReadonlySet<string>): Promise<string[]> {
    const listed = await this.ec2
      .call('DescribePlacementGroups', () =>
        this.ec2.api.describePlacementGroups({
          Filters: [{ Name: `tag:${TAG_CLUSTER}`, Values: [clusterName] }],
        }),
      )
      .catch((e: unknown) => {
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
        await this.ec2.call('DeletePlacementGroup', () =>
          this.ec2.api.deletePlacementGroup({ GroupName: ec2Name }),
        );
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

  /** A group EC2 said does not exist (deleted meanwhile): the next launch into it creates it again. */
  forget(ec2Name: string): void {
    this.knownGroups.delete(ec2Name);
  }
}
