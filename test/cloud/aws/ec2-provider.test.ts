import {
  CreateSecurityGroupCommand,
  CreateSubnetCommand,
  CreateVpcCommand,
  DescribeInstanceAttributeCommand,
  DescribeInstancesCommand,
  EC2Client,
  EC2ServiceException,
  type Instance,
  type RunInstancesCommandInput,
} from '@aws-sdk/client-ec2';
import { beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { Rng } from '../../../src/core/random.js';
import { ValidationError } from '../../../src/core/validation.js';
import { createEc2Client, ec2ApiFromClient, type Ec2Api } from '../../../src/cloud/aws/ec2-api.js';
import { toCloudInstance, transitionTime } from '../../../src/cloud/aws/describe-instances.js';
import { Ec2Provider } from '../../../src/cloud/aws/ec2-provider.js';
import type { Ec2ProviderConfig } from '../../../src/cloud/aws/ec2-provider-config.js';
import { zoneClientToken } from '../../../src/cloud/aws/launch-idempotency.js';
import { ec2PlacementGroupName } from '../../../src/cloud/aws/placement-groups.js';
import {
  InsufficientCapacityError,
  QuotaExceededError,
  TAG_CLUSTER,
  TAG_PLACEMENT_GROUP,
  ThrottlingError,
  type LaunchRequest,
} from '../../../src/cloud/provider.js';
import { describeWithMoto, TEST_REGION } from '../../helpers/moto.js';
import { withPlacementGroups, type PlacementGroupStandIn } from '../../helpers/placement-groups.js';
import { cloudProviderContract } from '../provider-contract.js';

/** An AMI moto ships with. */
const AMI = 'ami-12c6146b';
const ZONES = ['us-east-1a', 'us-east-1b', 'us-east-1c'] as const;
const WORKER_TOKEN = 'worker-secret-0123456789';

/** An error as the SDK raises it for an EC2 error response. */
function ec2Error(code: string, httpStatusCode = 400): EC2ServiceException {
  return new EC2ServiceException({
    name: code,
    $fault: httpStatusCode >= 500 ? 'server' : 'client',
    $metadata: { httpStatusCode },
    message: `${code} (injected by the test)`,
  });
}

interface Infra {
  readonly subnetByZone: Record<string, string>;
  readonly securityGroupId: string;
}

/** A VPC with one subnet per zone, a security group and an instance profile, as infra/ would create them. */
async function createInfra(client: EC2Client, endpoint: string): Promise<Infra> {
  const vpc = await client.send(new CreateVpcCommand({ CidrBlock: '10.0.0.0/16' }));
  const vpcId = vpc.Vpc?.VpcId ?? '';
  const subnetByZone: Record<string, string> = {};
  for (const [i, zone] of ZONES.entries()) {
    const subnet = await client.send(
      new CreateSubnetCommand({ VpcId: vpcId, CidrBlock: `10.0.${i}.0/24`, AvailabilityZone: zone }),
    );
    subnetByZone[zone] = subnet.Subnet?.SubnetId ?? '';
  }
  const sg = await client.send(
    new CreateSecurityGroupCommand({ VpcId: vpcId, GroupName: 'fleetwise-workers', Description: 'workers' }),
  );
  // No IAM client is installed: moto's IAM speaks the query protocol, and it does not check signatures.
  const iam = await fetch(`${endpoint}/`, {
    method: 'POST',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      authorization:
        'AWS4-HMAC-SHA256 Credential=testing/20250101/us-east-1/iam/aws4_request, SignedHeaders=host, Signature=0',
    },
    body: 'Action=CreateInstanceProfile&InstanceProfileName=fleetwise-worker&Version=2010-05-08',
  });
  expect(iam.status).toBe(200);
  return { subnetByZone, securityGroupId: sg.GroupId ?? '' };
}

function configFor(infra: Infra, extra: Partial<Ec2ProviderConfig> = {}): Ec2ProviderConfig {
  return {
    region: TEST_REGION,
    amiId: AMI,
    placements: ZONES.map((zone) => ({ availabilityZone: zone, subnetId: infra.subnetByZone[zone] })),
    securityGroupIds: [infra.securityGroupId],
    instanceProfile: 'fleetwise-worker',
    worker: {
      controllerUrl: 'http://10.0.0.5:8080',
      workerToken: WORKER_TOKEN,
      packageSpec: 'fleetwise@0.1.0',
    },
    ...extra,
  };
}

/** Tests share one moto state (it is slow to rebuild) and keep apart by using a cluster name of their own. */
let cluster = 'alpha';
let clusterCounter = 0;

function request(overrides: Partial<LaunchRequest> = {}): LaunchRequest {
  return {
    typeName: 'c7i.large',
    idempotencyToken: 'launch-0001',
    clusterName: cluster,
    planId: 'plan-7',
    instanceKey: 'slot-3',
    ...overrides,
  };
}

/** The moto-backed API with a hook in front of RunInstances, DescribeInstances and CreatePlacementGroup, and a log of calls. */
function interceptedApi(
  real: Ec2Api,
  hooks: {
    beforeRun?: (input: RunInstancesCommandInput, call: number) => void;
    beforeDescribe?: (call: number) => void;
    beforeCreateGroup?: () => void;
  },
): Ec2Api & { runInputs: RunInstancesCommandInput[]; describeCalls: number } {
  const runInputs: RunInstancesCommandInput[] = [];
  const api = {
    runInputs,
    describeCalls: 0,
    runInstances: async (input: RunInstancesCommandInput) => {
      runInputs.push(input);
      hooks.beforeRun?.(input, runInputs.length);
      return real.runInstances(input);
    },
    describeInstances: async (input: Parameters<Ec2Api['describeInstances']>[0]) => {
      api.describeCalls++;
      hooks.beforeDescribe?.(api.describeCalls);
      return real.describeInstances(input);
    },
    terminateInstances: (input: Parameters<Ec2Api['terminateInstances']>[0]) =>
      real.terminateInstances(input),
    describeInstanceTypes: (input: Parameters<Ec2Api['describeInstanceTypes']>[0]) =>
      real.describeInstanceTypes(input),
    createPlacementGroup: async (input: Parameters<Ec2Api['createPlacementGroup']>[0]) => {
      hooks.beforeCreateGroup?.();
      return real.createPlacementGroup(input);
    },
    describePlacementGroups: (input: Parameters<Ec2Api['describePlacementGroups']>[0]) =>
      real.describePlacementGroups(input),
    deletePlacementGroup: (input: Parameters<Ec2Api['deletePlacementGroup']>[0]) =>
      real.deletePlacementGroup(input),
  };
  return api;
}

describeWithMoto(
  'Ec2Provider against moto',
  (moto) => {
    const client = (): EC2Client => createEc2Client(moto.clientOptions);
    // moto's EC2, with placement groups kept by the stand-in (moto does not implement them; see the helper).
    let ec2: PlacementGroupStandIn;
    const realApi = (): Ec2Api => ec2;
    const noSleep = async (): Promise<void> => {};
    let infra: Infra;

    beforeAll(async () => {
      ec2 = withPlacementGroups(ec2ApiFromClient(client()));
      infra = await createInfra(client(), moto.endpoint);
    });
    beforeEach(() => {
      cluster = `alpha-${++clusterCounter}`;
    });

    // The contract's tests use cluster names of their own, so they share this file's moto state too.
    describe('the CloudProvider contract', () => {
      cloudProviderContract({
        open: () => ({
          provider: new Ec2Provider(configFor(infra), { api: realApi() }),
          reopen: () => new Ec2Provider(configFor(infra), { api: realApi() }),
        }),
        typeNames: ['c7i.large', 'r7i.large'],
        zones: ZONES,
        unknownInstanceId: 'i-0123456789abcdef0',
      });
    });

    async function describeRaw(instanceId: string): Promise<Instance> {
      const out = await client().send(new DescribeInstancesCommand({ InstanceIds: [instanceId] }));
      const instance = out.Reservations?.[0]?.Instances?.[0];
      if (instance === undefined) throw new Error(`no instance ${instanceId}`);
      return instance;
    }

    it('launches one tagged instance in the preferred zone with the configured subnet, groups, profile and user data', async () => {
      const provider = new Ec2Provider(configFor(infra), { api: realApi() });
      const result = await provider.launch(
        request({ availabilityZones: ['us-east-1b'], tags: { team: 'ml-research' } }),
      );
      expect(result.reusedExisting).toBe(false);
      expect(result.availabilityZone).toBe('us-east-1b');
      expect(result.instanceIds).toHaveLength(1);

      const instance = await describeRaw(result.instanceIds[0] ?? '');
      expect(instance.InstanceType).toBe('c7i.large');
      expect(instance.ImageId).toBe(AMI);
      expect(instance.SubnetId).toBe(infra.subnetByZone['us-east-1b']);
      expect(instance.SecurityGroups?.map((g) => g.GroupId)).toEqual([infra.securityGroupId]);
      expect(instance.IamInstanceProfile?.Arn).toMatch(/:instance-profile\/fleetwise-worker$/);
      // IMDSv2 only, one hop: a task's container behind the engine's bridge cannot read the worker's credentials.
      expect(instance.MetadataOptions).toMatchObject({
        HttpTokens: 'required',
        HttpPutResponseHopLimit: 1,
        HttpEndpoint: 'enabled',
      });
      const tags = Object.fromEntries((instance.Tags ?? []).map((t) => [t.Key, t.Value]));
      expect(tags).toEqual({
        Name: `fleetwise-${cluster}-slot-3`,
        team: 'ml-research',
        'fleetwise:cluster': cluster,
        'fleetwise:plan': 'plan-7',
        'fleetwise:instance-key': 'slot-3',
        'fleetwise:launch-token': 'launch-0001',
      });

      const attribute = await client().send(
        new DescribeInstanceAttributeCommand({ InstanceId: instance.InstanceId, Attribute: 'userData' }),
      );
      const script = Buffer.from(attribute.UserData?.Value ?? '', 'base64').toString('utf8');
      expect(script.startsWith('#!/bin/bash')).toBe(true);
      expect(script).toContain("CONTROLLER_URL='http://10.0.0.5:8080'");
      expect(script).toContain(`WORKER_TOKEN='${WORKER_TOKEN}'`);
      expect(script).toContain("FLEETWISE_PACKAGE='fleetwise@0.1.0'");
      // The systemd unit expands these from /etc/fleetwise/worker.env (escaped in the template's heredoc); the token
      // reaches the worker as FLEETWISE_WORKER_TOKEN from that file, not on its command line.
      expect(script).toContain(
        'worker --executor docker --controller \\${CONTROLLER_URL} --instance-id \\${INSTANCE_ID}',
      );
      expect(script).toContain('FLEETWISE_WORKER_TOKEN=${WORKER_TOKEN}');
      expect(script).not.toMatch(/\{\{[A-Z_]+\}\}/);
    });

    it('returns the same instance for a retried launch with the same token, even from a restarted controller', async () => {
      const first = await new Ec2Provider(configFor(infra), { api: realApi() }).launch(request());
      const api = interceptedApi(realApi(), {});
      const restarted = new Ec2Provider(configFor(infra), { api });
      const retried = await restarted.launch(request());
      expect(retried).toEqual({
        instanceIds: first.instanceIds,
        availabilityZone: first.availabilityZone,
        reusedExisting: true,
      });
      expect(api.runInputs).toHaveLength(0); // found by its launch-token tag: RunInstances never called

      const other = await restarted.launch(
        request({ idempotencyToken: 'launch-0002', instanceKey: 'slot-4' }),
      );
      expect(other.reusedExisting).toBe(false);
      expect(other.instanceIds[0]).not.toBe(first.instanceIds[0]);
      expect((await restarted.list(cluster)).map((i) => i.instanceId).sort()).toEqual(
        [...first.instanceIds, ...other.instanceIds].sort(),
      );
    });

    it("looks for an earlier launch's ClientTokens among its own cluster's instances only, and still finds them", async () => {
      const others = new Ec2Provider(configFor(infra, { listPageSize: 5 }), { api: realApi() });
      for (let i = 0; i < 12; i++)
        await others.launch(
          request({ clusterName: `${cluster}-other`, idempotencyToken: `o-${i}`, instanceKey: `k-${i}` }),
        );
      const api = interceptedApi(realApi(), {});
      const provider = new Ec2Provider(configFor(infra, { listPageSize: 5 }), { api });
      const fresh = await provider.launch(request());
      expect(fresh.reusedExisting).toBe(false);
      // The launch-token look and the ClientToken look, one page each: not every page of the account's c7i.large.
      expect(api.describeCalls).toBe(2);

      // The ClientToken look still finds this cluster's instance when the launch-token look misses it.
      const missingTagLook = interceptedApi(realApi(), {});
      const real = missingTagLook.describeInstances;
      missingTagLook.describeInstances = async (input) => {
        missingTagLook.describeCalls++;
        return missingTagLook.describeCalls === 1 ? { Reservations: [], $metadata: {} } : real(input);
      };
      const again = await new Ec2Provider(configFor(infra, { listPageSize: 5 }), {
        api: missingTagLook,
      }).launch(request());
      expect(again).toMatchObject({ instanceIds: fresh.instanceIds, reusedExisting: true });
      expect(missingTagLook.runInputs).toHaveLength(0);
    });

    it('sends a ClientToken per cluster and zone: stable for a retry in the same zone, different across zones and clusters', async () => {
      const api = interceptedApi(realApi(), {
        beforeRun: (input) => {
          if (input.SubnetId === infra.subnetByZone['us-east-1a'])
            throw ec2Error('InsufficientInstanceCapacity', 500);
        },
      });
      await new Ec2Provider(configFor(infra), { api }).launch(request());
      const tokens = api.runInputs.map((i) => i.ClientToken);
      expect(tokens).toEqual([
        zoneClientToken(cluster, 'launch-0001', 'us-east-1a'),
        zoneClientToken(cluster, 'launch-0001', 'us-east-1b'),
      ]);
      expect(tokens[0]).toMatch(/^[0-9a-f]{64}$/);
      expect(tokens[0]).not.toBe(tokens[1]);
      expect(zoneClientToken(cluster, 'launch-0001', 'us-east-1a')).toBe(tokens[0]);
      // EC2 scopes ClientToken to the account: another cluster's launch with the same token must not get this one.
      await new Ec2Provider(configFor(infra), { api }).launch(request({ clusterName: `${cluster}-beta` }));
      expect(api.runInputs.at(-1)?.ClientToken).toBe(
        zoneClientToken(`${cluster}-beta`, 'launch-0001', 'us-east-1b'),
      );
      expect(api.runInputs.at(-1)?.ClientToken).not.toBe(tokens[1]);
    });

    it('lists a cluster by its tag across pages, oldest first, and leaves other clusters out', async () => {
      const api = interceptedApi(realApi(), {});
      const provider = new Ec2Provider(configFor(infra, { listPageSize: 5 }), { api });
      const launched: string[] = [];
      for (let i = 0; i < 7; i++) {
        const r = await provider.launch(
          request({
            idempotencyToken: `tok-${i}`,
            instanceKey: `slot-${i}`,
            typeName: i % 2 === 0 ? 'c7i.large' : 'r7i.large',
          }),
        );
        launched.push(...r.instanceIds);
      }
      await provider.launch(request({ clusterName: `${cluster}-beta`, idempotencyToken: 'tok-beta' }));

      api.describeCalls = 0;
      const listed = await provider.list(cluster);
      expect(api.describeCalls).toBe(2); // 7 instances in pages of 5
      expect(listed.map((i) => i.instanceId).sort()).toEqual([...launched].sort());
      expect(listed.every((i) => i.state === 'running' && i.tags['fleetwise:cluster'] === cluster)).toBe(
        true,
      );
      expect(listed.filter((i) => i.typeName === 'r7i.large')).toHaveLength(3);
      expect(listed.map((i) => i.availabilityZone)).toEqual(Array(7).fill('us-east-1a'));
      expect(listed.every((i) => i.launchTime instanceof Date && i.privateIpAddress !== undefined)).toBe(
        true,
      );
      const keys = new Set(listed.map((i) => i.tags['fleetwise:instance-key']));
      expect(keys.size).toBe(7);
      expect((await provider.list(`${cluster}-beta`)).map((i) => i.tags['fleetwise:launch-token'])).toEqual([
        'tok-beta',
      ]);
      expect(await provider.list('nobody')).toEqual([]);
    });

    it('terminates instances, idempotently, and hides terminated ones from list unless asked', async () => {
      const provider = new Ec2Provider(configFor(infra), { api: realApi() });
      const ids: string[] = [];
      for (let i = 0; i < 3; i++)
        ids.push(
          ...(await provider.launch(request({ idempotencyToken: `t-${i}`, instanceKey: `k-${i}` })))
            .instanceIds,
        );
      const [a, b, c] = ids as [string, string, string];

      await provider.terminate([a, b, a]);
      expect((await provider.list(cluster)).map((i) => i.instanceId)).toEqual([c]);
      const all = await provider.list(cluster, { includeTerminated: true });
      expect(
        all
          .filter((i) => i.state === 'terminated')
          .map((i) => i.instanceId)
          .sort(),
      ).toEqual([a, b].sort());

      // A retried terminate, with an id EC2 has never heard of, still succeeds and still terminates c.
      await provider.terminate([a, 'i-0123456789abcdef0', c]);
      expect(await provider.list(cluster)).toEqual([]);
      await expect(provider.terminate(['not-an-id'])).rejects.toBeInstanceOf(ValidationError);
      await expect(provider.terminate([])).resolves.toBeUndefined();
    });

    it('moves to the next zone on InsufficientInstanceCapacity and remembers the refusal for the TTL', async () => {
      let nowMs = 1_000_000;
      const api = interceptedApi(realApi(), {
        beforeRun: (input) => {
          if (input.InstanceType === 'c7i.large' && input.SubnetId === infra.subnetByZone['us-east-1a'])
            throw ec2Error('InsufficientInstanceCapacity', 500);
        },
      });
      const provider = new Ec2Provider(configFor(infra, { capacityErrorTtlSeconds: 180 }), {
        api,
        nowMs: () => nowMs,
        sleep: noSleep,
      });
      const first = await provider.launch(request({ availabilityZones: ['us-east-1a'] }));
      expect(first.availabilityZone).toBe('us-east-1b');
      expect(api.runInputs.map((i) => i.SubnetId)).toEqual([
        infra.subnetByZone['us-east-1a'],
        infra.subnetByZone['us-east-1b'],
      ]);

      // Within the TTL, 1a is skipped without asking EC2.
      nowMs += 179_000;
      api.runInputs.length = 0;
      const second = await provider.launch(
        request({ idempotencyToken: 'launch-0002', availabilityZones: ['us-east-1a'] }),
      );
      expect(second.availabilityZone).toBe('us-east-1b');
      expect(api.runInputs).toHaveLength(1);

      // Another type is not affected by c7i.large's refusal.
      const other = await provider.launch(
        request({ typeName: 'r7i.large', idempotencyToken: 'r-1', availabilityZones: ['us-east-1a'] }),
      );
      expect(other.availabilityZone).toBe('us-east-1a');
      api.runInputs.length = 0;

      // After the TTL, 1a is tried again.
      nowMs += 2_000;
      await provider.launch(request({ idempotencyToken: 'launch-0003', availabilityZones: ['us-east-1a'] }));
      expect(api.runInputs.map((i) => i.SubnetId)).toEqual([
        infra.subnetByZone['us-east-1a'],
        infra.subnetByZone['us-east-1b'],
      ]);
    });

    it('raises InsufficientCapacityError when every zone refuses, then fails fast while the refusals are remembered', async () => {
      const api = interceptedApi(realApi(), {
        beforeRun: (input) => {
          if (input.InstanceType === 'p3.8xlarge') throw ec2Error('InsufficientInstanceCapacity', 500);
        },
      });
      const provider = new Ec2Provider(configFor(infra), { api, sleep: noSleep });
      const error = await provider
        .launch(request({ typeName: 'p3.8xlarge', availabilityZones: ['us-east-1c'] }))
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(InsufficientCapacityError);
      expect((error as InsufficientCapacityError).typeName).toBe('p3.8xlarge');
      expect((error as InsufficientCapacityError).zonesTried).toEqual([
        'us-east-1c',
        'us-east-1a',
        'us-east-1b',
      ]);
      expect((error as InsufficientCapacityError).zonesSkipped).toEqual([]);
      expect(provider.isCapacityConstrained('p3.8xlarge')).toBe(true);
      expect(provider.isCapacityConstrained('p3.2xlarge')).toBe(false);

      api.runInputs.length = 0;
      const again = await provider
        .launch(request({ typeName: 'p3.8xlarge', idempotencyToken: 'again' }))
        .catch((e: unknown) => e);
      expect(again).toBeInstanceOf(InsufficientCapacityError);
      expect((again as InsufficientCapacityError).zonesTried).toEqual([]);
      expect((again as InsufficientCapacityError).zonesSkipped).toEqual([
        'us-east-1a',
        'us-east-1b',
        'us-east-1c',
      ]);
      expect(api.runInputs).toHaveLength(0);

      // The caller's fallback, the next-cheapest type, launches.
      const fallback = await provider.launch(
        request({ typeName: 'p3.2xlarge', idempotencyToken: 'fallback' }),
      );
      expect(fallback.instanceIds).toHaveLength(1);
      expect((await provider.list(cluster)).map((i) => i.typeName)).toEqual(['p3.2xlarge']);
    });

    it('surfaces quota errors as QuotaExceededError without trying other zones', async () => {
      const api = interceptedApi(realApi(), {
        beforeRun: () => {
          throw ec2Error('VcpuLimitExceeded');
        },
      });
      const provider = new Ec2Provider(configFor(infra), { api, sleep: noSleep });
      const refused = provider.launch(request());
      await expect(refused).rejects.toBeInstanceOf(QuotaExceededError);
      // The on-demand quota, not the spot one: the controller remembers the refusal per quota group and market.
      await expect(refused).rejects.toMatchObject({ code: 'VcpuLimitExceeded', market: 'on-demand' });
      expect(api.runInputs).toHaveLength(1);
    });

    it('backs off exponentially on RequestLimitExceeded and then succeeds', async () => {
      const sleeps: number[] = [];
      const api = interceptedApi(realApi(), {
        beforeRun: (_input, call) => {
          if (call <= 3) throw ec2Error('RequestLimitExceeded', 503);
        },
      });
      const provider = new Ec2Provider(
        configFor(infra, { throttling: { maxAttempts: 5, baseDelayMs: 100, maxDelayMs: 1000 } }),
        {
          api,
          sleep: async (ms) => {
            sleeps.push(ms);
          },
          rng: new Rng(3),
        },
      );
      const result = await provider.launch(request());
      expect(result.instanceIds).toHaveLength(1);
      expect(api.runInputs).toHaveLength(4);
      expect(new Set(api.runInputs.map((i) => i.ClientToken)).size).toBe(1); // the same request, retried
      expect(sleeps).toHaveLength(3);
      // Equal jitter: retry n waits within [cap/2, cap], cap = 100 ms · 2^(n-1).
      sleeps.forEach((ms, i) => {
        const cap = 100 * 2 ** i;
        expect(ms).toBeGreaterThanOrEqual(cap / 2);
        expect(ms).toBeLessThanOrEqual(cap);
      });
      expect((await provider.list(cluster)).length).toBe(1);
    });

    it('gives up with a ThrottlingError after the bounded number of attempts (list and launch)', async () => {
      const sleeps: number[] = [];
      const api = interceptedApi(realApi(), {
        beforeDescribe: () => {
          throw ec2Error('RequestLimitExceeded', 503);
        },
      });
      const provider = new Ec2Provider(
        configFor(infra, { throttling: { maxAttempts: 4, baseDelayMs: 400, maxDelayMs: 1000 } }),
        {
          api,
          sleep: async (ms) => {
            sleeps.push(ms);
          },
        },
      );
      const error = await provider.list(cluster).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ThrottlingError);
      expect((error as ThrottlingError).attempts).toBe(4);
      expect((error as ThrottlingError).code).toBe('RequestLimitExceeded');
      expect(api.describeCalls).toBe(4);
      expect(sleeps).toHaveLength(3);
      expect(Math.max(...sleeps)).toBeLessThanOrEqual(1000); // capped at maxDelayMs
      expect(sleeps[2]).toBeGreaterThanOrEqual(500);

      // The launch's pre-check is throttled too: no instance is launched blind.
      await expect(provider.launch(request())).rejects.toBeInstanceOf(ThrottlingError);
      expect(api.runInputs).toHaveLength(0);
    });

    it('uses Placement.AvailabilityZone when a zone has no subnet (default VPC)', async () => {
      const provider = new Ec2Provider(
        {
          region: TEST_REGION,
          amiId: AMI,
          placements: [{ availabilityZone: 'us-east-1d' }, { availabilityZone: 'us-east-1e' }],
        },
        { api: realApi() },
      );
      const result = await provider.launch(request({ availabilityZones: ['us-east-1e', 'us-west-2a'] }));
      expect(result.availabilityZone).toBe('us-east-1e');
      const instance = await describeRaw(result.instanceIds[0] ?? '');
      expect(instance.Placement?.AvailabilityZone).toBe('us-east-1e');
    });

    describe('cluster placement groups', () => {
      const groupName = (group: string): string => ec2PlacementGroupName(cluster, group);
      const tagsOf = (name: string): Record<string, string | undefined> =>
        Object.fromEntries((ec2.groups.get(name)?.tags ?? []).map((t) => [t.Key ?? '', t.Value]));

      it('creates the group once (strategy cluster, tagged with the cluster), launches into it in the preferred zone, reuses it', async () => {
        const api = interceptedApi(realApi(), {});
        const provider = new Ec2Provider(configFor(infra), { api });
        const creates = (): number =>
          ec2.groupCalls.filter((c) => c === `Create ${groupName('job-7')}`).length;
        const first = await provider.launch(
          request({ placementGroup: 'job-7', availabilityZones: ['us-east-1b'] }),
        );
        expect(first).toMatchObject({
          availabilityZone: 'us-east-1b',
          placementGroup: 'job-7',
          reusedExisting: false,
        });
        expect(first.placementFallback).toBeUndefined();
        expect(ec2.groups.get(groupName('job-7'))?.strategy).toBe('cluster');
        expect(tagsOf(groupName('job-7'))).toEqual({
          [TAG_CLUSTER]: cluster,
          [TAG_PLACEMENT_GROUP]: 'job-7',
        });
        expect(api.runInputs[0]?.Placement).toEqual({ GroupName: groupName('job-7') });
        expect(api.runInputs[0]?.SubnetId).toBe(infra.subnetByZone['us-east-1b']);
        const id = first.instanceIds[0] ?? '';
        expect(ec2.groups.get(groupName('job-7'))?.members.has(id)).toBe(true);
        // Recorded on the instance, so a restarted controller reads it back from the cloud.
        const raw = await describeRaw(id);
        expect(raw.Tags).toContainEqual({ Key: TAG_PLACEMENT_GROUP, Value: 'job-7' });
        expect(raw.Placement?.AvailabilityZone).toBe('us-east-1b');
        expect((await provider.list(cluster))[0]).toMatchObject({
          placementGroup: 'job-7',
          availabilityZone: 'us-east-1b',
        });
        expect(creates()).toBe(1);

        // The next instance of the job: same group, no second CreatePlacementGroup from this provider.
        await provider.launch(
          request({
            idempotencyToken: 'launch-0002',
            placementGroup: 'job-7',
            availabilityZones: ['us-east-1b'],
          }),
        );
        expect(creates()).toBe(1);
        // A restarted controller's provider creates again, is told Duplicate, and launches into the existing group.
        const restarted = new Ec2Provider(configFor(infra), { api: realApi() });
        const third = await restarted.launch(
          request({
            idempotencyToken: 'launch-0003',
            placementGroup: 'job-7',
            availabilityZones: ['us-east-1b'],
          }),
        );
        expect(third.placementGroup).toBe('job-7');
        expect(creates()).toBe(2);
        expect(ec2.groups.get(groupName('job-7'))?.members.size).toBe(3);
        // A retried launch answers with the placement the instance really got.
        expect(await restarted.launch(request({ placementGroup: 'job-7' }))).toMatchObject({
          instanceIds: first.instanceIds,
          placementGroup: 'job-7',
          reusedExisting: true,
        });
      });

      it('sends AvailabilityZone and GroupName together when the zone has no subnet (default VPC)', async () => {
        const api = interceptedApi(realApi(), {});
        const provider = new Ec2Provider(
          {
            region: TEST_REGION,
            amiId: AMI,
            placements: [{ availabilityZone: 'us-east-1d' }, { availabilityZone: 'us-east-1e' }],
          },
          { api },
        );
        const result = await provider.launch(
          request({ placementGroup: 'g', availabilityZones: ['us-east-1e'] }),
        );
        expect(result).toMatchObject({ availabilityZone: 'us-east-1e', placementGroup: 'g' });
        expect(api.runInputs[0]?.Placement).toEqual({
          AvailabilityZone: 'us-east-1e',
          GroupName: groupName('g'),
        });
        expect(api.runInputs[0]?.SubnetId).toBeUndefined();
      });

      it('on InsufficientInstanceCapacity in the group, launches without it in the same zone, and does not blame the zone', async () => {
        const api = interceptedApi(realApi(), {});
        const provider = new Ec2Provider(configFor(infra), { api, sleep: noSleep });
        ec2.full.add(groupName('crowded'));
        const result = await provider.launch(
          request({ placementGroup: 'crowded', availabilityZones: ['us-east-1c'] }),
        );
        expect(result.availabilityZone).toBe('us-east-1c');
        expect(result.placementGroup).toBeUndefined();
        expect(result.placementFallback).toMatch(/crowded.*us-east-1c.*InsufficientInstanceCapacity/);
        expect(api.runInputs.map((i) => [i.SubnetId, i.Placement?.GroupName])).toEqual([
          [infra.subnetByZone['us-east-1c'], groupName('crowded')],
          [infra.subnetByZone['us-east-1c'], undefined],
        ]);
        // Two attempts in one zone need two ClientTokens (EC2 refuses a token reused with other parameters).
        expect(api.runInputs[0]?.ClientToken).not.toBe(api.runInputs[1]?.ClientToken);
        const instance = (await provider.list(cluster))[0];
        expect(instance?.placementGroup).toBeUndefined();
        expect(instance?.tags[TAG_PLACEMENT_GROUP]).toBeUndefined();
        // The group was full, not the zone: the zone stays usable for this type.
        expect(provider.isCapacityConstrained('c7i.large')).toBe(false);
        api.runInputs.length = 0;
        await provider.launch(request({ idempotencyToken: 'plain', availabilityZones: ['us-east-1c'] }));
        expect(api.runInputs.map((i) => i.SubnetId)).toEqual([infra.subnetByZone['us-east-1c']]);
        ec2.full.delete(groupName('crowded'));
      });

      it('then elsewhere: the zone refusing the type too, the next zone takes it, without the group', async () => {
        const api = interceptedApi(realApi(), {
          beforeRun: (input) => {
            if (
              input.SubnetId === infra.subnetByZone['us-east-1b'] &&
              input.Placement?.GroupName === undefined
            )
              throw ec2Error('InsufficientInstanceCapacity', 500);
          },
        });
        ec2.full.add(groupName('busy'));
        const provider = new Ec2Provider(configFor(infra), { api, sleep: noSleep });
        const result = await provider.launch(
          request({ placementGroup: 'busy', availabilityZones: ['us-east-1b'] }),
        );
        expect(result).toMatchObject({ availabilityZone: 'us-east-1a', placementGroup: undefined });
        expect(api.runInputs.map((i) => [i.SubnetId, i.Placement?.GroupName])).toEqual([
          [infra.subnetByZone['us-east-1b'], groupName('busy')],
          [infra.subnetByZone['us-east-1b'], undefined],
          [infra.subnetByZone['us-east-1a'], undefined],
        ]);
        // This time the zone itself refused: remembered as for any launch.
        api.runInputs.length = 0;
        await provider.launch(request({ idempotencyToken: 'next', availabilityZones: ['us-east-1b'] }));
        expect(api.runInputs.map((i) => i.SubnetId)).toEqual([infra.subnetByZone['us-east-1a']]);
        ec2.full.delete(groupName('busy'));
      });

      it('launches without the group when it cannot be created, saying why', async () => {
        const api = interceptedApi(realApi(), {
          beforeCreateGroup: () => {
            throw ec2Error('UnauthorizedOperation', 403);
          },
        });
        const provider = new Ec2Provider(configFor(infra), { api, sleep: noSleep });
        const result = await provider.launch(request({ placementGroup: 'denied' }));
        expect(result.instanceIds).toHaveLength(1);
        expect(result.placementGroup).toBeUndefined();
        expect(result.placementFallback).toMatch(/CreatePlacementGroup.*UnauthorizedOperation/);
        expect(api.runInputs.every((i) => i.Placement?.GroupName === undefined)).toBe(true);
      });

      it("deletes the groups the cluster no longer uses, keeps those asked for or still in use, never another cluster's", async () => {
        const provider = new Ec2Provider(configFor(infra), { api: realApi() });
        const [a] = (await provider.launch(request({ idempotencyToken: 'a', placementGroup: 'pg-a' })))
          .instanceIds;
        const [b] = (await provider.launch(request({ idempotencyToken: 'b', placementGroup: 'pg-b' })))
          .instanceIds;
        await provider.launch(request({ idempotencyToken: 'k', placementGroup: 'pg-kept' }));
        const other = `${cluster}-other`;
        await provider.launch(request({ clusterName: other, idempotencyToken: 'o', placementGroup: 'pg-a' }));

        await provider.terminate([a ?? '']);
        // pg-b still has a running instance (EC2: InUse), pg-kept is asked to stay: only pg-a goes.
        expect(await provider.deletePlacementGroups(cluster, new Set(['pg-kept']))).toEqual(['pg-a']);
        expect(ec2.groups.has(groupName('pg-a'))).toBe(false);
        expect(ec2.groups.has(groupName('pg-b'))).toBe(true);
        expect(ec2.groups.has(ec2PlacementGroupName(other, 'pg-a'))).toBe(true);

        await provider.terminate([b ?? '']);
        expect(await provider.deletePlacementGroups(cluster, new Set(['pg-kept']))).toEqual(['pg-b']);
        expect(await provider.deletePlacementGroups(cluster, new Set(['pg-kept']))).toEqual([]);
        // A group deleted under a provider that knew it: the next launch creates it again.
        const again = await provider.launch(request({ idempotencyToken: 'a2', placementGroup: 'pg-a' }));
        expect(again.placementGroup).toBe('pg-a');
        expect(ec2.groups.get(groupName('pg-a'))?.members.size).toBe(1);
      });

      it('keeps group names within EC2 limits and apart between clusters', () => {
        expect(ec2PlacementGroupName('bars', 'job-7')).toBe('fleetwise-4-bars-job-7');
        expect(ec2PlacementGroupName('bars', 'job-7')).not.toBe(ec2PlacementGroupName('foo', 'job-7'));
        expect(ec2PlacementGroupName('a-b', 'c')).not.toBe(ec2PlacementGroupName('a', 'b-c'));
        const long = ec2PlacementGroupName('c'.repeat(128), 'g'.repeat(128));
        expect(long.length).toBeLessThanOrEqual(255);
        expect(long).not.toBe(ec2PlacementGroupName('c'.repeat(128), `${'g'.repeat(127)}h`));
      });
    });
  },
  { resetBeforeEach: false },
);

describe('transitionTime (StateTransitionReason)', () => {
  it('reads when an instance was stopped or terminated, and nothing from a reason without a time', () => {
    expect(transitionTime('User initiated (2026-12-05 02:00:00 GMT)')).toEqual(
      new Date('2026-12-05T02:00:00Z'),
    );
    expect(transitionTime('Service initiated (2026-01-31 23:59:59 GMT)')).toEqual(
      new Date('2026-01-31T23:59:59Z'),
    );
    expect(transitionTime('Server.SpotInstanceTermination: Spot instance termination')).toBeUndefined();
    expect(transitionTime('User initiated (2026-13-45 99:00:00 GMT)')).toBeUndefined();
    expect(transitionTime('')).toBeUndefined();
    expect(transitionTime(undefined)).toBeUndefined();
  });
});

describe('toCloudInstance (DescribeInstances)', () => {
  const listed = (state: 'running' | 'terminated' | 'stopped', code?: string) =>
    toCloudInstance(
      {
        InstanceId: 'i-1',
        InstanceType: 'c7i.xlarge',
        InstanceLifecycle: 'spot',
        State: { Name: state },
        StateTransitionReason: state === 'running' ? '' : 'User initiated (2026-12-05 02:00:00 GMT)',
        ...(code === undefined ? {} : { StateReason: { Code: code, Message: code } }),
      },
      '123456789012',
    );

  it('says whether EC2 ended a spot instance as an interruption or someone else did, from StateReason', () => {
    expect(listed('terminated', 'Server.SpotInstanceTermination')?.endedBySpotInterruption).toBe(true);
    expect(listed('stopped', 'Server.SpotInstanceShutdown')?.endedBySpotInterruption).toBe(true);
    // Terminated by a person or other automation (what moto answers for TerminateInstances): charged as any.
    expect(listed('terminated', 'Client.UserInitiatedShutdown')?.endedBySpotInterruption).toBe(false);
    expect(listed('terminated')?.endedBySpotInterruption).toBeUndefined();
    expect(listed('running', 'pending')?.endedBySpotInterruption).toBeUndefined();
    expect(listed('terminated', 'Server.SpotInstanceTermination')?.endedAt).toEqual(
      new Date('2026-12-05T02:00:00Z'),
    );
  });
});
