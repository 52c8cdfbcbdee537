import {
  CreateSubnetCommand,
  CreateVpcCommand,
  DescribeAvailabilityZonesCommand,
  DescribeImagesCommand,
  RegisterImageCommand,
  type EC2Client,
} from '@aws-sdk/client-ec2';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ValidationError } from '../../../src/core/validation.js';
import {
  availableZones,
  discoverEc2Settings,
  type Ec2DiscoveryRequest,
  newestAmazonLinuxAmi,
} from '../../../src/cloud/aws/discovery.js';
import { createEc2Client } from '../../../src/cloud/aws/ec2-api.js';
import {
  describeWithMoto,
  findMotoServer,
  startMotoServer,
  TEST_CREDENTIALS,
  TEST_REGION,
  type MotoServer,
} from '../../helpers/moto.js';

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

    it('refuses an AMI EC2 does not have, naming it, before any launch could fail with it', async () => {
      const e = await problemOf(
        discoverEc2Settings(client, { region: TEST_REGION, amiId: 'ami-0123456789abcdef0' }),
      );
      expect(e.source).toBe('ec2.amiId');
      expect(e.problems).toEqual([expect.stringMatching(/^ami-0123456789abcdef0: /)]);
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

/**
 * An image as moto_server's MOTO_AMIS_PATH lists it: moto gives every one of them the owner alias `amazon`, and its
 * regions hold exactly these instead of its own list.
 */
interface MotoImage {
  readonly ami_id: string;
  readonly name: string;
  readonly architecture: 'x86_64' | 'arm64';
  readonly creation_date: string;
  readonly state: 'available' | 'pending';
  readonly owner_id: string;
  readonly public: true;
  readonly root_device_type: 'ebs';
  readonly virtualization_type: 'hvm';
}

const image = (
  id: string,
  name: string,
  created: string,
  extra: Partial<Pick<MotoImage, 'architecture' | 'state'>> = {},
): MotoImage => ({
  ami_id: id,
  name,
  architecture: 'x86_64',
  creation_date: `${created}T00:00:00.000Z`,
  state: 'available',
  owner_id: '137112412989',
  public: true,
  root_device_type: 'ebs',
  virtualization_type: 'hvm',
  ...extra,
});

/** Amazon Linux 2023 x86_64 images a worker may boot; the second is the newer. */
const FOR_WORKERS = [
  image('ami-0a000000000000001', 'al2023-ami-2023.5.20250101.0-kernel-6.1-x86_64', '2025-01-01'),
  image('ami-0a000000000000002', 'al2023-ami-2023.6.20250201.0-kernel-6.1-x86_64', '2025-02-01'),
];

/** Images of Amazon a worker must not boot, each newer than those it may. */
const NOT_FOR_WORKERS = [
  // The minimal flavour lacks what the worker bootstrap uses: named as Amazon names it, and named to fit the pattern.
  image('ami-0b000000000000001', 'al2023-ami-minimal-2023.6.20250301.0-kernel-6.1-x86_64', '2025-03-01'),
  image('ami-0b000000000000002', 'al2023-ami-2023.6.20250302.0-minimal-kernel-6.1-x86_64', '2025-03-02'),
  image('ami-0b000000000000003', 'al2023-ami-2023.6.20250305.0-kernel-6.1-arm64', '2025-03-05', {
    architecture: 'arm64',
  }),
  image('ami-0b000000000000004', 'al2023-ami-2023.7.20250401.0-kernel-6.1-x86_64', '2025-04-01', {
    state: 'pending',
  }),
  image('ami-0b000000000000005', 'amzn2-ami-kernel-5.10-hvm-2.0.20250501.0-x86_64-gp2', '2025-05-01'),
  // Named for x86_64, built for arm64: the architecture decides, not the name.
  image('ami-0b000000000000006', 'al2023-ami-2023.8.20250601.0-kernel-6.1-x86_64', '2025-06-01', {
    architecture: 'arm64',
  }),
];

const amiScratch = mkdtempSync(join(tmpdir(), 'fleetwise-amis-'));
afterAll(() => rmSync(amiScratch, { recursive: true, force: true }));
let amiLists = 0;

/**
 * A moto_server of its own whose regions hold exactly `images` of Amazon's. moto rewrites the dates of the list as it
 * loads it for the first region, so only that region answers: use one region, and never reset it.
 */
async function motoWithImages(images: readonly MotoImage[]): Promise<MotoServer> {
  const binary = findMotoServer();
  if (binary === undefined)
    throw new Error(
      "moto_server not found on PATH (set MOTO_SERVER_BIN, or install it: pip install 'moto[server]'); the worker AMI tests need it",
    );
  const path = join(amiScratch, `amis-${(amiLists += 1)}.json`);
  writeFileSync(path, JSON.stringify(images));
  return startMotoServer(binary, { MOTO_AMIS_PATH: path });
}

/** An EC2 client of `moto`, and an image registered in it by this account: not Amazon's, and the newest of all. */
async function clientWithOwnImage(moto: MotoServer): Promise<{ client: EC2Client; own: string }> {
  const client = createEc2Client({
    endpoint: moto.endpoint,
    region: TEST_REGION,
    credentials: TEST_CREDENTIALS,
    maxAttempts: 1,
  });
  const registered = await client.send(
    new RegisterImageCommand({ Name: 'al2023-ami-2023.9.20991231.0-kernel-6.1-x86_64' }),
  );
  return { client, own: registered.ImageId ?? '' };
}

describe('the worker AMI, against moto', () => {
  // Two servers, one region each: one with images a worker may boot among those it may not, one with none it may.
  let some: MotoServer | undefined;
  let none: MotoServer | undefined;
  beforeAll(async () => {
    const started = await Promise.allSettled([
      motoWithImages([...FOR_WORKERS, ...NOT_FOR_WORKERS]),
      motoWithImages(NOT_FOR_WORKERS),
    ]);
    [some, none] = started.map((s) => (s.status === 'fulfilled' ? s.value : undefined));
    for (const s of started) if (s.status === 'rejected') throw s.reason;
  });
  afterAll(async () => {
    await Promise.all([some?.stop(), none?.stop()]);
  });
  const running = (moto: MotoServer | undefined): MotoServer => {
    if (moto === undefined) throw new Error('moto_server is not running');
    return moto;
  };

  it('is the newest Amazon Linux 2023 x86_64 image of Amazon that is available and not the minimal flavour', async () => {
    const { client, own } = await clientWithOwnImage(running(some));
    // Every image is there to be found, each one passed over newer than the one to take.
    const all = [...FOR_WORKERS, ...NOT_FOR_WORKERS];
    const listed = await client.send(
      new DescribeImagesCommand({ ImageIds: [...all.map((i) => i.ami_id), own] }),
    );
    const described = new Map((listed.Images ?? []).map((i) => [i.ImageId, i]));
    for (const i of all)
      expect(described.get(i.ami_id)).toMatchObject({
        Name: i.name,
        Architecture: i.architecture,
        State: i.state,
        CreationDate: i.creation_date,
        ImageOwnerAlias: 'amazon',
      });
    expect(described.get(own)).toMatchObject({ State: 'available', OwnerId: '123456789012' });
    expect(described.get(own)?.ImageOwnerAlias).toBeUndefined();
    expect((described.get(own)?.CreationDate ?? '') > '2025-05-01').toBe(true);
    expect(await newestAmazonLinuxAmi(client)).toBe('ami-0a000000000000002');
  });

  it('is asked for (--ami) when the region has none a worker may boot', async () => {
    const { client } = await clientWithOwnImage(running(none));
    expect(await newestAmazonLinuxAmi(client)).toBeUndefined();
    const e = await problemOf(discoverEc2Settings(client, { region: TEST_REGION }));
    expect(e.source).toBe('ec2.amiId');
    expect(e.problems).toEqual(['not set, and no Amazon Linux 2023 AMI was found in the region: set --ami']);
  });
});

describe('the worker AMI, of an answer moto cannot give', () => {
  it('passes over an image listed without an id, having asked for exactly the images a worker may boot', async () => {
    // EC2 gives every image its id and moto cannot list one without, but the SDK's types allow it.
    const client = createEc2Client({ region: TEST_REGION, credentials: TEST_CREDENTIALS });
    const send = vi.spyOn(client, 'send').mockImplementation(async () => ({
      Images: [
        { ImageId: 'ami-0a000000000000002', Name: 'al2023-ami-2023.6.1-x86_64', CreationDate: '2025-02-01' },
        { Name: 'al2023-ami-2023.7.1-x86_64', CreationDate: '2026-01-01' },
      ],
    }));
    expect(await newestAmazonLinuxAmi(client)).toBe('ami-0a000000000000002');
    expect(send).toHaveBeenCalledTimes(1);
    const [command] = send.mock.calls[0] as unknown as [DescribeImagesCommand];
    expect(command).toBeInstanceOf(DescribeImagesCommand);
    expect(command.input).toEqual({
      Owners: ['amazon'],
      Filters: [
        { Name: 'name', Values: ['al2023-ami-2023.*-x86_64'] },
        { Name: 'state', Values: ['available'] },
        { Name: 'architecture', Values: ['x86_64'] },
      ],
    });
  });
});
