import { describe, expect, it } from 'vitest';
import {
  InsufficientCapacityError,
  TAG_CLUSTER,
  TAG_LAUNCH_TOKEN,
  type LaunchRequest,
} from '../../../src/cloud/provider.js';
import { createSimulatedCloud } from '../../../src/sim/controller-runtime/simulated-cloud.js';
import { testCatalog, testSpotMarket } from '../sim-fixtures.js';
import { cloudProviderContract } from '../../cloud/provider-contract.js';

// small.x: instantiate 10 s, worker start 20 s, register 30 s, terminate 5 s, $3.6/h.
function request(token: string, overrides: Partial<LaunchRequest> = {}): LaunchRequest {
  return {
    typeName: 'small.x',
    idempotencyToken: token,
    clusterName: 'c1',
    planId: 'round-1',
    instanceKey: `key-${token}`,
    ...overrides,
  };
}

describe('SimulatedCloud (CloudProvider)', () => {
  it('launches idempotently by token: the same token finds the same instance', async () => {
    const { cloud } = createSimulatedCloud({ catalog: testCatalog() });
    const first = await cloud.launch(request('t-1'));
    expect(first.reusedExisting).toBe(false);
    expect(first.instanceIds).toHaveLength(1);
    const again = await cloud.launch(request('t-1'));
    expect(again).toEqual({ ...first, reusedExisting: true });
    const other = await cloud.launch(request('t-2'));
    expect(other.instanceIds[0]).not.toBe(first.instanceIds[0]);
    expect(cloud.launchCount).toBe(2);
  });

  it('lists by cluster tag, with the launch token and the catalog delays', async () => {
    const { cloud, advance } = createSimulatedCloud({ catalog: testCatalog() });
    const a = (await cloud.launch(request('a'))).instanceIds[0] as string;
    await cloud.launch(request('b', { clusterName: 'other' }));
    const listed = await cloud.list('c1');
    expect(listed.map((i) => i.instanceId)).toEqual([a]);
    expect(listed[0]?.tags[TAG_CLUSTER]).toBe('c1');
    expect(listed[0]?.tags[TAG_LAUNCH_TOKEN]).toBe('a');
    expect(listed[0]?.state).toBe('pending');
    advance(9);
    expect((await cloud.list('c1'))[0]?.state).toBe('pending');
    advance(1);
    expect((await cloud.list('c1'))[0]?.state).toBe('running');
    expect(cloud.get(a)?.registered).toBe(false);
    advance(49); // 59 s: worker started at 30, registers at 60
    expect(cloud.get(a)?.registered).toBe(false);
    advance(1);
    expect(cloud.get(a)?.registered).toBe(true);
  });

  it('terminates after the terminate delay, bills from instantiate to terminate, ignores unknown ids', async () => {
    const billed: number[] = [];
    const { cloud, advance } = createSimulatedCloud({
      catalog: testCatalog(),
      hooks: { billingStopped: (_i, seconds) => billed.push(seconds) },
    });
    const id = (await cloud.launch(request('a'))).instanceIds[0] as string;
    advance(100);
    await cloud.terminate([id, 'i-unknown']);
    expect((await cloud.list('c1'))[0]?.state).toBe('shutting-down');
    advance(4);
    expect(await cloud.list('c1')).toHaveLength(1);
    advance(1);
    expect(await cloud.list('c1')).toHaveLength(0);
    expect((await cloud.list('c1', { includeTerminated: true }))[0]?.state).toBe('terminated');
    expect(billed).toEqual([95]); // running from 10 s to 105 s
    await cloud.terminate([id]); // a retried terminate succeeds
    expect(cloud.liveCount).toBe(0);
  });

  it('never bills an instance terminated before it came up (or bills until the terminate completes)', async () => {
    const billed: number[] = [];
    const { cloud, advance } = createSimulatedCloud({
      catalog: testCatalog(),
      hooks: { billingStopped: (_i, seconds) => billed.push(seconds) },
    });
    const id = (await cloud.launch(request('a'))).instanceIds[0] as string;
    advance(8);
    await cloud.terminate([id]); // done at 13 s, after it came up at 10 s: billed 3 s, no worker
    advance(100);
    expect(billed).toEqual([3]);
    expect(cloud.get(id)?.registered).toBe(false);
  });

  it('refuses configured types with InsufficientCapacityError and says they are constrained', async () => {
    const { cloud } = createSimulatedCloud({ catalog: testCatalog(), refusedTypes: ['big.x'] });
    await expect(cloud.launch(request('a', { typeName: 'big.x' }))).rejects.toBeInstanceOf(
      InsufficientCapacityError,
    );
    expect(cloud.isCapacityConstrained('big.x')).toBe(true);
    expect(cloud.isCapacityConstrained('small.x')).toBe(false);
    await expect(cloud.launch(request('b'))).resolves.toMatchObject({ reusedExisting: false });
    cloud.setRefused('big.x', false);
    await expect(cloud.launch(request('c', { typeName: 'big.x' }))).resolves.toMatchObject({
      reusedExisting: false,
    });
  });

  it('places in the preferred zone it has, and launches outside a full placement group in that zone', async () => {
    const { cloud } = createSimulatedCloud({
      catalog: testCatalog(),
      availabilityZones: ['z-a', 'z-b'],
      fullPlacementGroups: ['full'],
    });
    expect(await cloud.launch(request('a', { availabilityZones: ['z-x', 'z-b'] }))).toMatchObject({
      availabilityZone: 'z-b',
      placementGroup: undefined,
    });
    const refused = await cloud.launch(request('b', { availabilityZones: ['z-b'], placementGroup: 'full' }));
    expect(refused).toMatchObject({ availabilityZone: 'z-b', placementGroup: undefined });
    expect(refused.placementFallback).toMatch(/full/);
    const granted = await cloud.launch(request('c', { placementGroup: 'roomy' }));
    expect(granted).toMatchObject({ availabilityZone: 'z-a', placementGroup: 'roomy' });
    expect((await cloud.list('c1')).map((i) => [i.availabilityZone, i.placementGroup])).toEqual([
      ['z-b', undefined],
      ['z-b', undefined],
      ['z-a', 'roomy'],
    ]);
  });

  it('rejects malformed requests and unknown types', async () => {
    const { cloud } = createSimulatedCloud({ catalog: testCatalog() });
    await expect(cloud.launch(request('has space'))).rejects.toThrow();
    await expect(cloud.launch(request('a', { typeName: 'huge.x' }))).rejects.toThrow(/unknown instance type/);
  });
});

describe('SimulatedCloud: spot market', () => {
  // small.x on demand $3.6/h; spot $1.2/h in z-a (>20% a month), $0.9/h in z-b (<5%).
  const spotCatalog = {
    ...testCatalog(),
    spot: testSpotMarket(
      { typeName: 'small.x', zone: 'z-a', pricePerHour: 1.2, interruption: '>20%' },
      { typeName: 'small.x', zone: 'z-b', pricePerHour: 0.9, interruption: '<5%' },
    ),
  };
  const spotCloud = (spot = true, billed: [string, number][] = []) =>
    createSimulatedCloud({
      catalog: spotCatalog,
      availabilityZones: ['z-a', 'z-b'],
      spot,
      hooks: { billingStopped: (i, seconds) => billed.push([i.market, (i.pricePerHour * seconds) / 3600]) },
    });
  const spotRequest = (token: string, zone: string): LaunchRequest =>
    request(token, { market: 'spot', availabilityZones: [zone] });

  it('buys spot in the pool asked for, at its price, and lists it as spot', async () => {
    const { cloud } = spotCloud();
    const result = await cloud.launch(spotRequest('a', 'z-a'));
    expect(result).toMatchObject({ market: 'spot', availabilityZone: 'z-a', reusedExisting: false });
    expect(result.marketFallback).toBeUndefined();
    const id = result.instanceIds[0] as string;
    expect(cloud.get(id)).toMatchObject({ market: 'spot', pricePerHour: 1.2 });
    expect((await cloud.list('c1'))[0]?.market).toBe('spot');
    // Found again by its token, still spot; an on-demand launch is billed at the list price.
    expect(await cloud.launch(spotRequest('a', 'z-a'))).toMatchObject({
      market: 'spot',
      reusedExisting: true,
    });
    const od = await cloud.launch(request('od'));
    expect(od.market).toBeUndefined();
    expect(cloud.get(od.instanceIds[0] as string)).toMatchObject({ market: 'on-demand', pricePerHour: 3.6 });
  });

  it('skips a pool marked unavailable for the cache window, then falls back to on demand and says why', async () => {
    const { cloud, advance } = spotCloud();
    cloud.markOfferingUnavailable('small.x', 'z-a', 'spot');
    const moved = await cloud.launch(spotRequest('a', 'z-a'));
    expect(moved).toMatchObject({ market: 'spot', availabilityZone: 'z-b' });
    expect(cloud.get(moved.instanceIds[0] as string)?.pricePerHour).toBe(0.9);
    cloud.markOfferingUnavailable('small.x', 'z-b', 'spot');
    const fallback = await cloud.launch(spotRequest('b', 'z-a'));
    expect(fallback.market).toBeUndefined();
    expect(fallback.marketFallback).toMatch(/no spot capacity for small\.x/);
    expect(cloud.get(fallback.instanceIds[0] as string)).toMatchObject({
      market: 'on-demand',
      pricePerHour: 3.6,
    });
    advance(180); // the EC2 provider's capacity-error window has passed
    expect(await cloud.launch(spotRequest('c', 'z-a'))).toMatchObject({
      market: 'spot',
      availabilityZone: 'z-a',
    });
  });

  it('refuses a spot request with no spot capacity when it does not allow the on-demand fallback', async () => {
    const { cloud } = spotCloud();
    cloud.markOfferingUnavailable('small.x', 'z-a', 'spot');
    cloud.markOfferingUnavailable('small.x', 'z-b', 'spot');
    await expect(cloud.launch({ ...spotRequest('a', 'z-a'), onDemandFallback: false })).rejects.toThrow(
      InsufficientCapacityError,
    );
    expect(await cloud.list('c1')).toEqual([]);
    // A pool with room still sells spot to such a request.
    const { cloud: open } = spotCloud();
    expect(await open.launch({ ...spotRequest('b', 'z-a'), onDemandFallback: false })).toMatchObject({
      market: 'spot',
    });
  });

  it('with its spot market closed, a spot request is launched on demand', async () => {
    const { cloud } = spotCloud(false);
    const result = await cloud.launch(spotRequest('a', 'z-b'));
    expect(result.market).toBeUndefined();
    expect(result.marketFallback).toMatch(/^no spot capacity for [a-z0-9.]+ \(simulated\)$/);
    expect(cloud.get(result.instanceIds[0] as string)?.pricePerHour).toBe(3.6);
  });

  it('reclaim ends a spot instance at once, billed at its pool price until then', async () => {
    const billed: [string, number][] = [];
    const { cloud, advance } = spotCloud(true, billed);
    const a = (await cloud.launch(spotRequest('a', 'z-b'))).instanceIds[0] as string;
    const b = (await cloud.launch(spotRequest('b', 'z-b'))).instanceIds[0] as string;
    await cloud.launch(spotRequest('c', 'z-a'));
    advance(10 + 3600); // up at 10 s, then an hour
    expect(
      cloud.liveInPool({ typeName: 'small.x', zone: 'z-b', pricePerHour: 0.9, interruption: '<5%' }),
    ).toHaveLength(2);
    cloud.reclaim(a);
    expect(cloud.get(a)?.state).toBe('terminated');
    expect(cloud.get(a)?.registered).toBe(false);
    expect(billed).toEqual([['spot', 0.9]]);
    cloud.reclaim(a); // already gone: nothing more is billed
    cloud.reclaim('i-unknown');
    expect(billed).toHaveLength(1);
    expect((await cloud.list('c1')).map((i) => i.instanceId)).not.toContain(a);
    expect(
      cloud
        .liveInPool({ typeName: 'small.x', zone: 'z-b', pricePerHour: 0.9, interruption: '<5%' })
        .map((i) => i.instanceId),
    ).toEqual([b]);
  });
});

describe('SimulatedCloud: the CloudProvider contract every provider honours', () => {
  // The simulated cloud is the cloud itself: a restarted controller constructs a provider over the same state.
  const zones = ['us-east-1a', 'us-east-1b'];
  let harness = createSimulatedCloud({ catalog: testCatalog(), availabilityZones: zones });
  cloudProviderContract({
    open: () => {
      harness = createSimulatedCloud({ catalog: testCatalog(), availabilityZones: zones });
      return { provider: harness.cloud, reopen: () => harness.cloud };
    },
    typeNames: ['small.x', 'big.x'],
    zones,
    unknownInstanceId: 'sim-i-999999',
    // Instances run once instantiated (catalog delay) and are gone once the terminate delay has passed.
    waitRunning: async () => harness.advance(3600),
    waitTerminated: async () => harness.advance(3600),
  });
});
