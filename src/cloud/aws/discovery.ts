import {
  DescribeAvailabilityZonesCommand,
  DescribeImagesCommand,
  DescribeSubnetsCommand,
  type EC2Client,
} from '@aws-sdk/client-ec2';
import { groupBy } from '../../core/group.js';
import { ValidationError } from '../../core/validation.js';
import { awsErrorCode } from './client-config.js';
import type { Ec2ProviderConfig } from './ec2-provider-config.js';

/**
 * What the EC2 provider needs that an operator may leave out, looked up in the account itself at startup: the worker
 * AMI (the newest Amazon Linux 2023) and where instances go (the zones of the given subnets, else every available
 * zone of the region); given placements' subnets are checked to be in their zones. Problems name the setting to fix
 * (`ec2.amiId`, `ec2.subnetIds`, `ec2.placements`).
 */

export type Ec2Placement = Ec2ProviderConfig['placements'][number];

/** What the operator gave; every field left out is discovered. */
export interface Ec2DiscoveryRequest {
  /** For messages only: the client already points at the region. */
  readonly region: string;
  readonly amiId?: string | undefined;
  readonly placements?: readonly Ec2Placement[] | undefined;
  /** Subnets whose zones become the placements (instead of `placements`: giving both is refused). */
  readonly subnetIds?: readonly string[] | undefined;
}

export interface Ec2Discovered {
  readonly amiId: string;
  readonly placements: Ec2Placement[];
}

/** Amazon Linux 2023 x86_64 images Amazon publishes; the `minimal` flavour lacks what the worker bootstrap uses. */
const AMAZON_LINUX_2023_NAME = 'al2023-ami-2023.*-x86_64';

export async function newestAmazonLinuxAmi(client: EC2Client): Promise<string | undefined> {
  const images = await client.send(
    new DescribeImagesCommand({
      Owners: ['amazon'],
      Filters: [
        { Name: 'name', Values: [AMAZON_LINUX_2023_NAME] },
        { Name: 'state', Values: ['available'] },
        // The workers' instance types are x86_64; the name pattern says so too, the architecture for certain.
        { Name: 'architecture', Values: ['x86_64'] },
      ],
    }),
  );
  const newest = (images.Images ?? [])
    .filter((i) => i.ImageId !== undefined && !(i.Name ?? '').includes('minimal'))
    .sort(
      (a, b) =>
        (b.CreationDate ?? '').localeCompare(a.CreationDate ?? '') ||
        (b.Name ?? '').localeCompare(a.Name ?? ''),
    )[0];
  return newest?.ImageId;
}

/**
 * An AMI given (`--ami`, `ec2.amiId`) that EC2 does not have is refused at start, naming it: every launch would fail
 * with it, retried for as long as the controller runs while its jobs wait.
 */
async function checkAmi(client: EC2Client, amiId: string, region: string): Promise<void> {
  let images;
  try {
    images = await client.send(new DescribeImagesCommand({ ImageIds: [amiId] }));
  } catch (e) {
    if (awsErrorCode(e)?.startsWith('InvalidAMIID') === true)
      throw new ValidationError('ec2.amiId', [`${amiId}: ${(e as Error).message}`]);
    throw e;
  }
  if (!(images.Images ?? []).some((i) => i.ImageId === amiId))
    throw new ValidationError('ec2.amiId', [`${amiId}: no such image in ${region}`]);
}

/**
 * Each subnet's availability zone, as EC2 describes it; a subnet it does not know is absent, or refused by EC2 itself
 * (InvalidSubnetID.NotFound, naming it), which is then a problem of `field`.
 */
async function zonesOfSubnets(
  client: EC2Client,
  subnetIds: readonly string[],
  field: string,
): Promise<Map<string, string>> {
  let subnets;
  try {
    subnets = await client.send(new DescribeSubnetsCommand({ SubnetIds: [...new Set(subnetIds)] }));
  } catch (e) {
    if (awsErrorCode(e)?.startsWith('InvalidSubnetID') === true)
      throw new ValidationError(field, [(e as Error).message]);
    throw e;
  }
  const zoneOf = new Map<string, string>();
  for (const s of subnets.Subnets ?? [])
    if (s.SubnetId !== undefined && s.AvailabilityZone !== undefined)
      zoneOf.set(s.SubnetId, s.AvailabilityZone);
  return zoneOf;
}

/**
 * One placement per subnet, in the order given, each in the subnet's zone. A placement stands for a whole zone (the
 * provider keys its attempts and capacity errors by zone), so two subnets of one zone are refused by name.
 */
export async function placementsOfSubnets(
  client: EC2Client,
  subnetIds: readonly string[],
  region: string,
): Promise<Ec2Placement[]> {
  const twice = subnetIds.filter((id, i) => subnetIds.indexOf(id) !== i);
  if (twice.length > 0)
    throw new ValidationError(
      'ec2.subnetIds',
      [...new Set(twice)].map((id) => `${id} is given more than once`),
    );
  const zoneOf = await zonesOfSubnets(client, subnetIds, 'ec2.subnetIds');
  const placements = subnetIds.map((subnetId) => {
    const zone = zoneOf.get(subnetId);
    if (zone === undefined)
      throw new ValidationError('ec2.subnetIds', [`${subnetId}: no such subnet in ${region}`]);
    return { availabilityZone: zone, subnetId };
  });
  const shared = [...groupBy(placements, (p) => p.availabilityZone)].filter(
    ([, inZone]) => inZone.length > 1,
  );
  if (shared.length > 0)
    throw new ValidationError(
      'ec2.subnetIds',
      shared.map(
        ([zone, inZone]) =>
          `${inZone.map((p) => p.subnetId).join(', ')} are ${inZone.length === 2 ? 'both' : 'all'} in ${zone}: ` +
          'give at most one subnet per availability zone',
      ),
    );
  return placements;
}

/**
 * Refuse a placement whose subnet is in another zone than the placement names: EC2 launches in the subnet's zone
 * whatever the placement says, so spot limited to some zones could land in one left out, priced at a pool the plan
 * never chose. Only the placements that name a subnet are described (none: no call).
 */
export async function checkPlacementSubnets(
  client: EC2Client,
  placements: readonly Ec2Placement[],
  region: string,
): Promise<void> {
  const subnetIds = placements.flatMap((p) => (p.subnetId === undefined ? [] : [p.subnetId]));
  if (subnetIds.length === 0) return;
  const zoneOf = await zonesOfSubnets(client, subnetIds, 'ec2.placements');
  const problems = placements.flatMap((p, i) => {
    if (p.subnetId === undefined) return [];
    const zone = zoneOf.get(p.subnetId);
    const placement = `${i} (availabilityZone ${p.availabilityZone}, subnetId ${p.subnetId})`;
    if (zone === undefined) return [`${placement}: no such subnet in ${region}`];
    return zone === p.availabilityZone
      ? []
      : [`${placement}: subnet ${p.subnetId} is in ${zone}, not in ${p.availabilityZone}`];
  });
  if (problems.length > 0) throw new ValidationError('ec2.placements', problems);
}

/**
 * Refuse placements naming a zone twice (the provider keys its attempts and capacity errors by zone, so a second
 * subnet there would never be used) or a zone the region does not offer (no launch there could ever succeed), as
 * `--subnets` refuses the same, naming the placements.
 */
export async function checkPlacementZones(
  client: EC2Client,
  placements: readonly Ec2Placement[],
  region: string,
): Promise<void> {
  const problems: string[] = [];
  const indices = groupBy(placements.keys(), (i) => (placements[i] as Ec2Placement).availabilityZone);
  for (const [zone, at] of indices)
    if (at.length > 1)
      problems.push(`${at.join(', ')}: each in ${zone}; give at most one placement per zone`);
  const offered = new Set(await availableZones(client));
  for (const [zone, at] of indices)
    if (!offered.has(zone))
      problems.push(
        `${at.join(', ')} (availabilityZone ${zone}): not an available zone of ${region}` +
          (offered.size === 0 ? '' : ` (${[...offered].join(', ')})`),
      );
  if (problems.length > 0) throw new ValidationError('ec2.placements', problems);
}

/** The region's available availability zones (not Local or Wavelength Zones), sorted by name. */
export async function availableZones(client: EC2Client): Promise<string[]> {
  const zones = await client.send(
    new DescribeAvailabilityZonesCommand({ Filters: [{ Name: 'state', Values: ['available'] }] }),
  );
  return (zones.AvailabilityZones ?? [])
    .filter((z) => z.ZoneType === undefined || z.ZoneType === 'availability-zone')
    .map((z) => z.ZoneName)
    .filter((n): n is string => n !== undefined)
    .sort();
}

/**
 * Fill in the AMI and the placements the request leaves out. What it gives is kept as it is, the placements once the
 * subnets they name are found in the zones they name.
 */
export async function discoverEc2Settings(
  client: EC2Client,
  request: Ec2DiscoveryRequest,
): Promise<Ec2Discovered> {
  // Two ways of saying where instances go: taking one would silently drop the other.
  if (request.placements !== undefined && request.subnetIds !== undefined)
    throw new ValidationError('ec2', ['give either ec2.placements or ec2.subnetIds (--subnets), not both']);
  if (request.amiId !== undefined) await checkAmi(client, request.amiId, request.region);
  const amiId = request.amiId ?? (await newestAmazonLinuxAmi(client));
  if (amiId === undefined)
    throw new ValidationError('ec2.amiId', [
      'not set, and no Amazon Linux 2023 AMI was found in the region: set --ami',
    ]);
  let placements = request.placements?.map((p) => ({ ...p }));
  if (placements !== undefined) {
    await checkPlacementZones(client, placements, request.region);
    await checkPlacementSubnets(client, placements, request.region);
  }
  if (request.subnetIds !== undefined)
    placements = await placementsOfSubnets(client, request.subnetIds, request.region);
  if (placements === undefined) {
    const zones = await availableZones(client);
    if (zones.length === 0)
      throw new ValidationError('ec2.placements', [`no available zone in ${request.region}`]);
    placements = zones.map((availabilityZone) => ({ availabilityZone }));
  }
  return { amiId, placements };
}
