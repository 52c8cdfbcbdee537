import {
  DescribeAvailabilityZonesCommand,
  DescribeImagesCommand,
  DescribeSubnetsCommand,
  type EC2Client,
} from '@aws-sdk/client-ec2';
import { ValidationError } from '../../core/validation.js';
import type { Ec2ProviderConfig } from './ec2-provider.js';

/**
 * What the EC2 provider needs that an operator may leave out, looked up in the account itself at startup: the worker
 * AMI (the newest Amazon Linux 2023) and where instances go (the zones of the given subnets, else every available
 * zone of the region). Problems name the setting to fix (`ec2.amiId`, `ec2.subnetIds`, `ec2.placements`).
 */

export type Ec2Placement = Ec2ProviderConfig['placements'][number];

/** What the operator gave; every field left out is discovered. */
export interface Ec2DiscoveryRequest {
  /** For messages only: the client already points at the region. */
  readonly region: string;
  readonly amiId?: string | undefined;
  readonly placements?: readonly Ec2Placement[] | undefined;
  /** Subnets whose zones become the placements (when `placements` is left out). */
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

/** One placement per subnet, in the order given, each in the subnet's zone. */
export async function placementsOfSubnets(
  client: EC2Client,
  subnetIds: readonly string[],
  region: string,
): Promise<Ec2Placement[]> {
  const subnets = await client.send(new DescribeSubnetsCommand({ SubnetIds: [...subnetIds] }));
  const zoneOf = new Map((subnets.Subnets ?? []).map((s) => [s.SubnetId, s.AvailabilityZone]));
  return subnetIds.map((subnetId) => {
    const zone = zoneOf.get(subnetId);
    if (zone === undefined)
      throw new ValidationError('ec2.subnetIds', [`${subnetId}: no such subnet in ${region}`]);
    return { availabilityZone: zone, subnetId };
  });
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

/** Fill in the AMI and the placements the request leaves out; what it gives is kept as it is, without a call. */
export async function discoverEc2Settings(
  client: EC2Client,
  request: Ec2DiscoveryRequest,
): Promise<Ec2Discovered> {
  const amiId = request.amiId ?? (await newestAmazonLinuxAmi(client));
  if (amiId === undefined)
    throw new ValidationError('ec2.amiId', [
      'not set, and no Amazon Linux 2023 AMI was found in the region: set --ami',
    ]);
  let placements = request.placements?.map((p) => ({ ...p }));
  if (placements === undefined && request.subnetIds !== undefined)
    placements = await placementsOfSubnets(client, request.subnetIds, request.region);
  if (placements === undefined) {
    const zones = await availableZones(client);
    if (zones.length === 0)
      throw new ValidationError('ec2.placements', [`no available zone in ${request.region}`]);
    placements = zones.map((availabilityZone) => ({ availabilityZone }));
  }
  return { amiId, placements };
}
