import { describe, expect, it } from 'vitest';
import { FencedCloudProvider } from '../../src/controller/ha/fenced-provider.js';
import { FakeCloud } from './controller-fixtures.js';

/** The cloud behind the lease passes every call on while the lease is held, and none after. */

describe('the fenced cloud provider', () => {
  it('passes placement-group cleanup on while leading, and fences it like every cloud call', async () => {
    const cloud = new FakeCloud();
    let leading = true;
    const fenced = new FencedCloudProvider(cloud, {
      assertLeading: () => {
        if (!leading) throw new Error('lease lost');
      },
    });
    // Without it, a controller on a shared state never deleted a group (the cleanup asks whether it may).
    expect(fenced.deletePlacementGroups).toBeDefined();
    await fenced.launch({
      typeName: 'c7i.xlarge',
      idempotencyToken: 't-1',
      clusterName: 'test',
      planId: 'p',
      instanceKey: 'k',
      placementGroup: 'test-pg-1',
    });
    await cloud.terminate(cloud.live().map((i) => i.id));
    expect(await fenced.deletePlacementGroups?.('test', new Set())).toEqual(['test-pg-1']);
    leading = false;
    await expect(fenced.deletePlacementGroups?.('test', new Set())).rejects.toThrow('lease lost');
    expect(cloud.groupCleanups).toHaveLength(1);
  });
});

describe('the fenced cloud provider, capacity memory', () => {
  it('asks the cloud about the market the caller asked about, not on-demand only', () => {
    const asked: [string, string | undefined][] = [];
    const cloud = Object.assign(new FakeCloud(), {
      isCapacityConstrained: (typeName: string, market?: string) => {
        asked.push([typeName, market]);
        return market === 'spot';
      },
    });
    const fenced = new FencedCloudProvider(cloud, { assertLeading: () => undefined });
    expect(fenced.isCapacityConstrained?.('c7i.xlarge', 'spot')).toBe(true);
    expect(fenced.isCapacityConstrained?.('c7i.xlarge')).toBe(false);
    expect(asked).toEqual([
      ['c7i.xlarge', 'spot'],
      ['c7i.xlarge', undefined],
    ]);
  });
});
