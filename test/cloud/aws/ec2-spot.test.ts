import {
  DescribeInstancesCommand,
  EC2ServiceException,
  type RunInstancesCommandInput,
} from '@aws-sdk/client-ec2';
import { beforeEach, expect, it } from 'vitest';
import { createEc2Client, ec2ApiFromClient, type Ec2Api } from '../../../src/cloud/aws/ec2-api.js';
import { Ec2Provider } from '../../../src/cloud/aws/ec2-provider.js';
import { zoneClientToken } from '../../../src/cloud/aws/launch-idempotency.js';
import {
  CloudProviderError,
  InsufficientCapacityError,
  TAG_LAUNCH_TOKEN,
  type LaunchRequest,
} from '../../../src/cloud/provider.js';
import type { Catalog } from '../../../src/core/catalog.js';
import { ManualClock } from '../../../src/controller/clock.js';
import { MARKET_FALLBACK_EVENT } from '../../../src/controller/instance-market.js';
import { launchIntentKey } from '../../../src/controller/state-store.js';
import { describeWithMoto, TEST_REGION } from '../../helpers/moto.js';
import { catalog, jobSpec, rig as controllerRig } from '../../controller/controller-fixtures.js';

/**
 * Spot launches against moto_server: RunInstances with spot market options gives a spot instance (EC2's own
 * InstanceLifecycle says so); spot capacity errors are remembered per (type, zone, market) apart from on-demand ones;
 * a spot launch with no spot capacity anywhere falls back to on demand and says why (unless the request forbids it);
 * an interrupted offering is avoided. moto has no capacity errors: the test injects EC2's error responses in front of the real RunInstances.
 */
const ZONES = ['us-east-1a', 'us-east-1b'] as const;

function ec2Error(code: string, message = `${code} (injected by the test)`): EC2ServiceException {
  return new EC2ServiceException({
    name: code,
    $fault: 'server',
    $metadata: { httpStatusCode: 500 },
    message,
  });
}

const isSpot = (input: RunInstancesCommandInput): boolean =>
  input.InstanceMarketOptions?.MarketType === 'spot';

describeWithMoto(
  'spot launches (EC2 on moto)',
  (moto) => {
    let cluster = 'spot-0';
    let n = 0;
    beforeEach(() => {
      cluster = `spot-${++n}`;
    });

    /** The provider over moto, refusing spot RunInstances in the zones `refuseSpotIn` names; the inputs it sent. */
    function rig(
      refuseSpotIn: readonly string[] = [],
      refuse: (input: RunInstancesCommandInput) => string | Error | undefined = () => undefined,
      options: { hideLaunchTokenTag?: boolean } = {},
    ): {
      provider: Ec2Provider;
      runs: RunInstancesCommandInput[];
    } {
      const real = ec2ApiFromClient(createEc2Client(moto.clientOptions));
      const runs: RunInstancesCommandInput[] = [];
      const api: Ec2Api = {
        ...real,
        runInstances: async (input) => {
          runs.push(input);
          if (isSpot(input) && refuseSpotIn.includes(input.Placement?.AvailabilityZone ?? ''))
            throw ec2Error('InsufficientInstanceCapacity');
          const code = refuse(input);
          if (code !== undefined) throw typeof code === 'string' ? ec2Error(code) : code;
          return real.runInstances(input);
        },
        // DescribeInstances is eventually consistent: a just-launched instance may be missing from the tag look.
        describeInstances: (input) =>
          options.hideLaunchTokenTag === true &&
          (input.Filters ?? []).some((f) => f.Name === `tag:${TAG_LAUNCH_TOKEN}`)
            ? Promise.resolve({ Reservations: [], $metadata: {} })
            : real.describeInstances(input),
      };
      const provider = new Ec2Provider(
        {
          region: TEST_REGION,
          amiId: 'ami-12c6146b',
          placements: ZONES.map((availabilityZone) => ({ availabilityZone })),
          throttling: { maxAttempts: 2, baseDelayMs: 1, maxDelayMs: 1 },
        },
        { api, sleep: async () => {} },
      );
      return { provider, runs };
    }

    const request = (overrides: Partial<LaunchRequest> = {}): LaunchRequest => ({
      typeName: 'c7i.large',
      idempotencyToken: `launch-${n}`,
      clusterName: cluster,
      planId: 'plan-1',
      instanceKey: 'slot-1',
      market: 'spot',
      ...overrides,
    });

    it('launches a one-time spot instance that EC2 describes as spot, and lists it as spot', async () => {
      const { provider, runs } = rig();
      const result = await provider.launch(request());
      expect(result).toMatchObject({ market: 'spot', availabilityZone: 'us-east-1a', reusedExisting: false });
      expect(result.marketFallback).toBeUndefined();
      expect(runs[0]?.InstanceMarketOptions).toEqual({
        MarketType: 'spot',
        SpotOptions: { SpotInstanceType: 'one-time', InstanceInterruptionBehavior: 'terminate' },
      });
      expect(runs[0]?.ClientToken).toBe(
        zoneClientToken(cluster, `launch-${n}`, 'us-east-1a', undefined, 'spot'),
      );
      expect(runs[0]?.ClientToken).not.toBe(zoneClientToken(cluster, `launch-${n}`, 'us-east-1a'));
      const ec2 = createEc2Client(moto.clientOptions);
      const described = await ec2.send(
        new DescribeInstancesCommand({ InstanceIds: [...result.instanceIds] }),
      );
      expect(described.Reservations?.[0]?.Instances?.[0]?.InstanceLifecycle).toBe('spot');
      expect((await provider.list(cluster)).map((i) => i.market)).toEqual(['spot']);
      // A retried launch finds it, still spot.
      expect(await provider.launch(request())).toMatchObject({ reusedExisting: true, market: 'spot' });
      // An on-demand launch stays on demand: no market options.
      const onDemand = await provider.launch(
        request({ market: 'on-demand', idempotencyToken: 'od', instanceKey: 'od' }),
      );
      expect(onDemand.market).toBeUndefined();
      expect(runs.at(-1)?.InstanceMarketOptions).toBeUndefined();
    });

    it('remembers a spot refusal per (type, zone, market): the next spot launch skips the zone, on demand does not', async () => {
      const { provider, runs } = rig(['us-east-1a']);
      const first = await provider.launch(request());
      expect(first).toMatchObject({ market: 'spot', availabilityZone: 'us-east-1b' });
      expect(runs.map((r) => [r.Placement?.AvailabilityZone, isSpot(r)])).toEqual([
        ['us-east-1a', true],
        ['us-east-1b', true],
      ]);
      runs.length = 0;
      await provider.launch(request({ idempotencyToken: 'second', instanceKey: 'slot-2' }));
      expect(runs.map((r) => [r.Placement?.AvailabilityZone, isSpot(r)])).toEqual([['us-east-1b', true]]);
      runs.length = 0;
      const od = await provider.launch(
        request({ market: 'on-demand', idempotencyToken: 'od', instanceKey: 'od' }),
      );
      expect(od.availabilityZone).toBe('us-east-1a'); // the spot refusal says nothing of on-demand capacity
      expect(provider.isCapacityConstrained('c7i.large')).toBe(false);
    });

    it('falls back to on demand when no zone has spot capacity, and says why', async () => {
      const { provider, runs } = rig([...ZONES]);
      const result = await provider.launch(request());
      expect(result.market).toBeUndefined();
      expect(result.marketFallback).toMatch(
        /^no spot capacity: insufficient capacity for c7i\.large: refused in us-east-1a, us-east-1b$/,
      );
      expect(runs.map((r) => [r.Placement?.AvailabilityZone, isSpot(r)])).toEqual([
        ['us-east-1a', true],
        ['us-east-1b', true],
        ['us-east-1a', false],
      ]);
      const [instance] = await provider.list(cluster);
      expect(instance?.market).toBe('on-demand');
      // Within the cache's window the next spot launch asks for no spot capacity at all.
      runs.length = 0;
      const next = await provider.launch(request({ idempotencyToken: 'next', instanceKey: 'slot-2' }));
      expect(next.marketFallback).toMatch(/recently refused in us-east-1a, us-east-1b/);
      expect(runs.every((r) => !isSpot(r))).toBe(true);
    });

    it('does not fall back to on demand when the request does not allow it: the spot capacity error is thrown', async () => {
      const { provider, runs } = rig([...ZONES]);
      const refused = provider.launch(request({ onDemandFallback: false }));
      await expect(refused).rejects.toThrow(InsufficientCapacityError);
      await expect(refused).rejects.toThrow(/refused in us-east-1a, us-east-1b/);
      expect(runs.map((r) => [r.Placement?.AvailabilityZone, isSpot(r)])).toEqual([
        ['us-east-1a', true],
        ['us-east-1b', true],
      ]);
      expect(await provider.list(cluster)).toEqual([]);
      // On demand is not refused: the same type bought on demand (asked for so) launches.
      const od = await provider.launch(
        request({ market: 'on-demand', idempotencyToken: 'od', instanceKey: 'od', onDemandFallback: false }),
      );
      expect(od.market).toBeUndefined();
    });

    const spotUnauthorized = ec2Error(
      'UnauthorizedOperation',
      'You are not authorized to perform this operation on resource spot-instances-request/*',
    );
    for (const code of [
      'UnauthorizedOperation',
      'AuthFailure.ServiceLinkedRoleCreationNotPermitted',
      'MaxSpotInstanceCountExceeded',
    ])
      it(`falls back to on demand at once when spot is refused for the whole account (${code}), and remembers it`, async () => {
        const { provider, runs } = rig([], (input) =>
          isSpot(input) ? (code === 'UnauthorizedOperation' ? spotUnauthorized : code) : undefined,
        );
        const result = await provider.launch(request());
        expect(result.market).toBeUndefined();
        expect(result.marketFallback).toContain(`us-east-1a (${code}: spot is refused for the account)`);
        // One spot attempt, no other spot zone, then on demand.
        expect(runs.map((r) => [r.Placement?.AvailabilityZone, isSpot(r)])).toEqual([
          ['us-east-1a', true],
          ['us-east-1a', false],
        ]);
        // Any type, any zone: no spot asked for while it is remembered.
        runs.length = 0;
        const other = await provider.launch(
          request({ typeName: 'r7i.large', idempotencyToken: `r7i-${code}`, instanceKey: 'r7i' }),
        );
        expect(other.marketFallback).toBeDefined();
        expect(runs.every((r) => !isSpot(r))).toBe(true);
      });

    it('a zone whose subnet has no free address left is skipped: the launch goes to the next zone', async () => {
      const { provider, runs } = rig([], (input) =>
        input.Placement?.AvailabilityZone === 'us-east-1a' ? 'InsufficientFreeAddressesInSubnet' : undefined,
      );
      const result = await provider.launch(request({ market: 'on-demand' }));
      expect(result.availabilityZone).toBe('us-east-1b');
      expect(runs.map((r) => r.Placement?.AvailabilityZone)).toEqual(['us-east-1a', 'us-east-1b']);
      // A full subnet is full for every type and market: the zone is not asked again for a while.
      runs.length = 0;
      const other = await provider.launch(
        request({ typeName: 'm7i.large', idempotencyToken: 'm7i', instanceKey: 'm7i', market: 'spot' }),
      );
      expect(other).toMatchObject({ availabilityZone: 'us-east-1b', market: 'spot' });
      expect(runs.map((r) => r.Placement?.AvailabilityZone)).toEqual(['us-east-1b']);
    });

    it('says a type is capacity constrained in the market asked about', async () => {
      const { provider } = rig([...ZONES]);
      await provider.launch(request()); // spot refused everywhere, launched on demand
      expect(provider.isCapacityConstrained('c7i.large', 'spot')).toBe(true);
      expect(provider.isCapacityConstrained('c7i.large', 'on-demand')).toBe(false);
      expect(provider.isCapacityConstrained('c7i.large')).toBe(false);
    });

    it('an UnauthorizedOperation not naming spot is tried on demand once; spot is remembered only when that works', async () => {
      // Spot alone refused: the launch runs on demand and says why; spot is then left alone for a while.
      const spotOnly = rig([], (input) => (isSpot(input) ? 'UnauthorizedOperation' : undefined));
      const result = await spotOnly.provider.launch(request());
      expect(result.market).toBeUndefined();
      expect(result.marketFallback).toMatch(/^spot launches are not authorized \(.*UnauthorizedOperation/);
      expect(spotOnly.runs.map((r) => [r.Placement?.AvailabilityZone, isSpot(r)])).toEqual([
        ['us-east-1a', true],
        ['us-east-1a', false],
      ]);
      expect(spotOnly.provider.isCapacityConstrained('r7i.large', 'spot')).toBe(true);

      // Refused on demand too (say, iam:PassRole for the instance profile): an authorization error, not a capacity
      // one, and spot is not turned off for other launches.
      const everything = rig([], () => 'UnauthorizedOperation');
      const refused = everything.provider.launch(request({ idempotencyToken: 'all', instanceKey: 'all' }));
      await expect(refused).rejects.toThrow(CloudProviderError);
      await expect(refused).rejects.not.toThrow(InsufficientCapacityError);
      await expect(refused).rejects.toMatchObject({ code: 'UnauthorizedOperation' });
      expect(everything.provider.isCapacityConstrained('c7i.large', 'spot')).toBe(false);

      // No on-demand fallback allowed: the authorization error itself, spot not remembered either.
      const noFallback = rig([], (input) => (isSpot(input) ? 'UnauthorizedOperation' : undefined));
      const capped = noFallback.provider.launch(
        request({ idempotencyToken: 'capped', instanceKey: 'capped', onDemandFallback: false }),
      );
      await expect(capped).rejects.not.toThrow(InsufficientCapacityError);
      await expect(capped).rejects.toMatchObject({ code: 'UnauthorizedOperation' });
      expect(noFallback.runs).toHaveLength(1);
      expect(noFallback.provider.isCapacityConstrained('c7i.large', 'spot')).toBe(false);
    });

    it("tries spot only in the zones the request allows (as the caller's caps limit it), on demand anywhere", async () => {
      const { provider, runs } = rig();
      const result = await provider.launch(request({ spotZones: ['us-east-1b'] }));
      expect(result).toMatchObject({ market: 'spot', availabilityZone: 'us-east-1b' });
      expect(runs.map((r) => [r.Placement?.AvailabilityZone, isSpot(r)])).toEqual([['us-east-1b', true]]);
      // No allowed zone with spot room: on demand (as the request allows), in the preferred zone.
      runs.length = 0;
      const onDemand = await provider.launch(
        request({ idempotencyToken: 'none', instanceKey: 'none', spotZones: [] }),
      );
      expect(onDemand).toMatchObject({ availabilityZone: 'us-east-1a' });
      expect(onDemand.market).toBeUndefined();
      expect(runs.map((r) => [r.Placement?.AvailabilityZone, isSpot(r)])).toEqual([['us-east-1a', false]]);
    });

    it("a spot launch none of whose allowed zones is the provider's asks EC2 for no spot, and says so", async () => {
      const { provider, runs } = rig();
      const result = await provider.launch(request({ spotZones: ['us-east-1d'] }));
      expect(result.market).toBeUndefined();
      expect(result.marketFallback).toBe(
        'no spot pool of c7i.large in the allowed zones: spot is allowed in us-east-1d, instances go to ' +
          'us-east-1a, us-east-1b',
      );
      expect(runs.map((r) => [r.Placement?.AvailabilityZone, isSpot(r)])).toEqual([['us-east-1a', false]]);
      // Not a capacity refusal: nothing is remembered against the type's spot capacity.
      expect(provider.isCapacityConstrained('c7i.large', 'spot')).toBe(false);

      // On demand not allowed: an error saying so, with no EC2 capacity code, still a capacity error to the caller
      // (which moves on to another type).
      runs.length = 0;
      const refused = provider.launch(
        request({
          idempotencyToken: 'capped',
          instanceKey: 'capped',
          spotZones: [],
          onDemandFallback: false,
        }),
      );
      await expect(refused).rejects.toBeInstanceOf(InsufficientCapacityError);
      await expect(refused).rejects.toMatchObject({
        name: 'NoSpotPoolError',
        code: 'NoSpotPool',
        message:
          'no spot pool of c7i.large in the allowed zones: spot is allowed in no zone, instances go to ' +
          'us-east-1a, us-east-1b; buying it on demand instead is not allowed for this launch',
      });
      expect(runs).toEqual([]);
      expect(await provider.list(cluster)).toHaveLength(1);
    });

    it('a spot launch falling back to a type with no spot pool in its zones buys that type on demand', async () => {
      // Spot pools of c7i.large only: the next type that fits, c7i.xlarge, has none.
      const spot = catalog.spot as NonNullable<Catalog['spot']>;
      const onlyLarge: Catalog = {
        ...catalog,
        spot: { ...spot, offerings: spot.offerings.filter((o) => o.typeName === 'c7i.large') },
      };
      // c7i.large has no room at all, on spot or on demand.
      const { provider, runs } = rig([], (input) =>
        input.InstanceType === 'c7i.large' ? 'InsufficientInstanceCapacity' : undefined,
      );
      const clock = new ManualClock(Math.floor(Date.now() / 1000));
      const { store, controller } = controllerRig(
        { clusterName: cluster },
        {
          clock,
          catalog: onlyLarge,
          provider,
          spotMarket: true,
          schedulerRecipe: { kind: 'eva', options: { spot: true } },
        },
      );
      const job = controller.submit(
        { ...jobSpec('spot', { c7i: [0, 2, 4] }), spot: 'preferred' },
        'research',
      );
      await controller.recover();
      await controller.runRound('submitted');
      expect(runs.filter((r) => r.InstanceType === 'c7i.large' && isSpot(r)).length).toBeGreaterThan(0);
      const host = store.getInstance(store.getTask(`${job.id}.0`)?.instanceId ?? '');
      expect(host).toMatchObject({ typeName: 'c7i.xlarge' });
      expect(host?.cloudId).toBeDefined();
      // Bought on demand as planned, not a spot launch EC2 was never asked for that fell back.
      const launch = store.getIntentByKey(launchIntentKey(host?.id ?? ''));
      expect(launch?.kind === 'launch' ? launch.payload.market : 'no launch').toBeUndefined();
      expect(store.listEvents({ instanceId: host?.id ?? '', kind: MARKET_FALLBACK_EVENT })).toEqual([]);
      expect(runs.filter((r) => r.InstanceType === 'c7i.xlarge').map(isSpot)).toEqual([false]);
    });

    it('a retry from a restarted provider finds the instance by any ClientToken the launch could have used', async () => {
      // Spot refused in zone a, the instance launched on spot in zone b; then the provider restarts (its capacity
      // memory gone) and the tag look misses the instance: the retry must not start over in zone a.
      const first = rig(['us-east-1a']);
      const launched = await first.provider.launch(request());
      expect(launched).toMatchObject({ market: 'spot', availabilityZone: 'us-east-1b' });
      const restarted = rig([], () => undefined, { hideLaunchTokenTag: true });
      const retried = await restarted.provider.launch(request());
      expect(retried).toMatchObject({
        reusedExisting: true,
        instanceIds: launched.instanceIds,
        market: 'spot',
      });
      expect(restarted.runs).toEqual([]);
      // Another launch of the same cluster, type and zones is not taken for it.
      const other = await restarted.provider.launch(
        request({ idempotencyToken: 'other', instanceKey: 'other' }),
      );
      expect(other.reusedExisting).toBe(false);
      expect(other.instanceIds).not.toEqual(launched.instanceIds);
    });

    it('an interrupted offering is avoided for spot launches in that zone', async () => {
      const { provider, runs } = rig();
      provider.markOfferingUnavailable('c7i.large', 'us-east-1a', 'spot');
      const result = await provider.launch(request({ availabilityZones: ['us-east-1a'] }));
      expect(result).toMatchObject({ market: 'spot', availabilityZone: 'us-east-1b' });
      expect(runs).toHaveLength(1);
      // Another type, and on demand, are unaffected.
      const other = await provider.launch(
        request({
          typeName: 'r7i.large',
          idempotencyToken: 'r7i',
          instanceKey: 'r7i',
          availabilityZones: ['us-east-1a'],
        }),
      );
      expect(other.availabilityZone).toBe('us-east-1a');
    });

    it('an on-demand launch with no capacity anywhere still fails as before', async () => {
      const real = ec2ApiFromClient(createEc2Client(moto.clientOptions));
      const provider = new Ec2Provider(
        {
          region: TEST_REGION,
          amiId: 'ami-12c6146b',
          placements: ZONES.map((availabilityZone) => ({ availabilityZone })),
        },
        {
          api: {
            ...real,
            runInstances: () => Promise.reject(ec2Error('InsufficientInstanceCapacity')),
          },
          sleep: async () => {},
        },
      );
      await expect(provider.launch(request({ market: 'on-demand' }))).rejects.toBeInstanceOf(
        InsufficientCapacityError,
      );
      await expect(provider.launch(request({ idempotencyToken: 'spot-too' }))).rejects.toBeInstanceOf(
        InsufficientCapacityError,
      );
    });
  },
  { resetBeforeEach: false },
);
