import {
  CreateSubnetCommand,
  CreateVpcCommand,
  DescribeAvailabilityZonesCommand,
  DescribeImagesCommand,
  type EC2Client,
} from '@aws-sdk/client-ec2';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { ValidationError } from '../../../src/core/validation.js';
import {
  availableZones,
  discoverEc2Settings,
  type Ec2DiscoveryRequest,
  newestAmazonLinuxAmi,
} from '../../../src/cloud/aws/discovery.js';
import { createEc2Client } from '../../../src/cloud/aws/ec2-api.js';
import { describeWithMoto, TEST_CREDENTIALS, TEST_REGION } from '../../helpers/moto.js';

async function problemOf(promise: Promise<unknown>): Promise<ValidationError> {
  try {
    await promise;
  } catch (e) {
    if (e instanceof ValidationError) return e;
    throw e;
  }
  throw new Error('expected a ValidationError');
}

describeWithMoto(
  'EC2 discovery against moto',
  (moto) => {
    let client: EC2Client;
    let subnetB: string;
    let subnetA: string;
    let subnetA2: string;

    beforeAll(async () => {
      client = createEc2Client(moto.clientOptions);
      const vpc = await client.send(new CreateVpcCommand({ CidrBlock: '10.1.0.0/16' }));
      const subnet = async (zone: string, cidr: string): Promise<string> =>
        (
          await client.send(
            new CreateSubnetCommand({ VpcId: vpc.Vpc?.VpcId ?? '', CidrBlock: cidr, AvailabilityZone: zone }),
          )
        ).Subnet?.SubnetId ?? '';
      subnetB = await subnet('us-east-1b', '10.1.1.0/24');
      subnetA = await subnet('us-east-1a', '10.1.0.0/24');
      subnetA2 = await subnet('us-east-1a', '10.1.2.0/24');
    });

    /** Discovery with the AMI given, placed as `where` says. */
    const discover = (where: Pick<Ec2DiscoveryRequest, 'placements' | 'subnetIds'>) =>
      discoverEc2Settings(client, { region: TEST_REGION, amiId: 'ami-12c6146b', ...where });

    it('defaults the placements to every available zone of the region, sorted', async () => {
      const described = await client.send(new DescribeAvailabilityZonesCommand({}));
      const expected = (described.AvailabilityZones ?? [])
        .filter((z) => z.State === 'available' && (z.ZoneType ?? 'availability-zone') === 'availability-zone')
        .map((z) => z.ZoneName ?? '')
        .sort();
      expect(expected.length).toBeGreaterThan(1);
      expect(await availableZones(client)).toEqual(expected);
      const found = await discover({});
      expect(found).toEqual({
        amiId: 'ami-12c6146b',
        placements: expected.map((availabilityZone) => ({ availabilityZone })),
      });
    });

    it('places instances in the zones of the given subnets, in the order given', async () => {
      const found = await discover({
        subnetIds: [subnetB, subnetA],
      });
      expect(found.placements).toEqual([
        { availabilityZone: 'us-east-1b', subnetId: subnetB },
        { availabilityZone: 'us-east-1a', subnetId: subnetA },
      ]);
    });

    it('keeps the placements it is given, and names an unknown subnet', async () => {
      const placements = [{ availabilityZone: 'us-east-1c' }];
      const found = await discover({
        placements,
      });
      expect(found.placements).toEqual(placements);
      expect(found.placements).not.toBe(placements);
      // moto answers an unknown subnet id with an error of its own or an empty list; either way it is refused.
      await expect(
        discover({
          subnetIds: ['subnet-0123456789abcdef0'],
        }),
      ).rejects.toThrow(/subnet-0123456789abcdef0/);
    });

    it('refuses placements naming one zone twice, or a zone the region does not offer, naming them', async () => {
      const e = await problemOf(
        discover({
          placements: [
            { availabilityZone: 'us-east-1a', subnetId: subnetA },
            { availabilityZone: 'us-east-1a', subnetId: subnetA2 },
            { availabilityZone: 'us-east-1z' },
          ],
        }),
      );
      expect(e.source).toBe('ec2.placements');
      expect(e.problems[0]).toBe('0, 1: each in us-east-1a; give at most one placement per zone');
      expect(e.problems[1]).toMatch(
        /^2 \(availabilityZone us-east-1z\): not an available zone of us-east-1 \(us-east-1a, /,
      );
      expect(e.problems).toHaveLength(2);
    });

    it('refuses placements and subnets given together, rather than dropping the subnets', async () => {
      const e = await problemOf(
        discover({
          placements: [{ availabilityZone: 'us-east-1c' }],
          subnetIds: [subnetA],
        }),
      );
      expect(e.source).toBe('ec2');
      expect(e.problems).toEqual(['give either ec2.placements or ec2.subnetIds (--subnets), not both']);
    });

    it('refuses a placement whose subnet is in another zone, naming the placement, the subnet and both zones', async () => {
      const e = await problemOf(
        discover({
          placements: [
            { availabilityZone: 'us-east-1a', subnetId: subnetA },
            { availabilityZone: 'us-east-1c', subnetId: subnetB },
          ],
        }),
      );
      expect(e.source).toBe('ec2.placements');
      expect(e.problems).toEqual([
        `1 (availabilityZone us-east-1c, subnetId ${subnetB}): subnet ${subnetB} is in us-east-1b, not in us-east-1c`,
      ]);
      // In their own zones, they are kept as given.
      const placements = [
        { availabilityZone: 'us-east-1a', subnetId: subnetA },
        { availabilityZone: 'us-east-1b', subnetId: subnetB },
        { availabilityZone: 'us-east-1c' },
      ];
      const found = await discover({
        placements,
      });
      expect(found.placements).toEqual(placements);
      // A subnet EC2 does not know is named too.
      await expect(
        discover({
          placements: [{ availabilityZone: 'us-east-1a', subnetId: 'subnet-0123456789abcdef0' }],
        }),
      ).rejects.toThrow(/ec2\.placements: .*subnet-0123456789abcdef0/);
    });

    it('refuses two subnets in one zone, naming both and the zone', async () => {
      const e = await problemOf(
        discover({
          subnetIds: [subnetA, subnetB, subnetA2],
        }),
      );
      expect(e.source).toBe('ec2.subnetIds');
      expect(e.problems).toEqual([
        `${subnetA}, ${subnetA2} are both in us-east-1a: give at most one subnet per availability zone`,
      ]);
      const twice = await problemOf(
        discover({
          subnetIds: [subnetB, subnetB],
        }),
      );
      expect(twice.problems).toEqual([`${subnetB} is given more than once`]);
    });

    it('takes an Amazon Linux 2023 x86_64 AMI of Amazon when none is set', async () => {
      const found = await discoverEc2Settings(client, {
        region: TEST_REGION,
        placements: [{ availabilityZone: 'us-east-1a' }],
      });
      const image = (await client.send(new DescribeImagesCommand({ ImageIds: [found.amiId] }))).Images?.[0];
      expect(image?.Name).toMatch(/^al2023-ami-2023\..*-x86_64$/);
      expect(image?.Name).not.toContain('minimal');
    });
  },
  { resetBeforeEach: false },
);

describe('the worker AMI', () => {
  it('is the newest Amazon Linux 2023 image that is not the minimal flavour', async () => {
    const client = createEc2Client({ region: TEST_REGION, credentials: TEST_CREDENTIALS });
    const send = vi.spyOn(client, 'send').mockImplementation(async () => ({
      Images: [
        { ImageId: 'ami-00000000000000001', Name: 'al2023-ami-2023.5.1-x86_64', CreationDate: '2025-01-01' },
        {
          ImageId: 'ami-00000000000000002',
          Name: 'al2023-ami-minimal-2023.6.2-x86_64',
          CreationDate: '2025-03-01',
        },
        { ImageId: 'ami-00000000000000003', Name: 'al2023-ami-2023.6.1-x86_64', CreationDate: '2025-02-01' },
        { Name: 'no id', CreationDate: '2026-01-01' },
      ],
    }));
    expect(await newestAmazonLinuxAmi(client)).toBe('ami-00000000000000003');
    const [command] = send.mock.calls[0] as unknown as [DescribeImagesCommand];
    expect(command.input).toMatchObject({ Owners: ['amazon'] });
  });

  it('is asked for (--ami) when the region has none', async () => {
    const client = createEc2Client({ region: TEST_REGION, credentials: TEST_CREDENTIALS });
    vi.spyOn(client, 'send').mockImplementation(async () => ({ Images: [] }));
    const e = await problemOf(discoverEc2Settings(client, { region: TEST_REGION }));
    expect(e.source).toBe('ec2.amiId');
    expect(e.problems).toEqual(['not set, and no Amazon Linux 2023 AMI was found in the region: set --ami']);
  });
});
