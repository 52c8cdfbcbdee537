import { describe, expect, it } from 'vitest';
import {
  crossZonePricePerGiB,
  DEFAULT_CROSS_ZONE_PRICE_PER_GIB,
  parseCatalog,
  catalogToFile,
} from '../../src/core/catalog.js';
import { curveOf } from '../../src/core/latency-curves.js';
import {
  boundingRtt,
  crossZoneCostPerHour,
  crossZoneShare,
  DEFAULT_DOMAIN_RTT_MICROSECONDS,
  jobPerformance,
  latencyDomain,
  RttEstimator,
  type PlacedInstance,
} from '../../src/core/latency-model.js';

const at = (id: string, zone?: string, placementGroup?: string): PlacedInstance => ({
  id,
  placement: { zone, placementGroup },
});

describe('latency domains and round trips', () => {
  it('a pair is in the nearest domain it shares; an unknown zone counts as another zone', () => {
    expect(latencyDomain(at('a', 'z1'), at('a', 'z1'))).toBe('same-instance');
    expect(latencyDomain(at('a', 'z1', 'g'), at('b', 'z1', 'g'))).toBe('placement-group');
    expect(latencyDomain(at('a', undefined, 'g'), at('b', undefined, 'g'))).toBe('placement-group');
    expect(latencyDomain(at('a', 'z1', 'g'), at('b', 'z1', 'h'))).toBe('zone');
    expect(latencyDomain(at('a', 'z1'), at('b', 'z2'))).toBe('cross-zone');
    expect(latencyDomain(at('a'), at('b'))).toBe('cross-zone');
    expect(latencyDomain({ id: 'a' }, at('b', 'z1'))).toBe('cross-zone');
  });

  it('the estimator takes the larger of the two directions of a pair, their maxima; else the domain default', () => {
    const e = new RttEstimator([
      { fromInstanceId: 'a', toInstanceId: 'b', maxMicroseconds: 900, p99Microseconds: 800, atSeconds: 10 },
      { fromInstanceId: 'b', toInstanceId: 'a', maxMicroseconds: 120, p99Microseconds: 100, atSeconds: 20 },
      { fromInstanceId: 'a', toInstanceId: 'c', maxMicroseconds: 60, p99Microseconds: 50, atSeconds: 20 },
      { fromInstanceId: 'c', toInstanceId: 'a', maxMicroseconds: 70, p99Microseconds: 50, atSeconds: 20 },
    ]);
    expect(e.between(at('a', 'z1'), at('b', 'z2'))).toBe(900);
    expect(e.between(at('c', 'z1'), at('a', 'z1'))).toBe(70);
    expect(e.between(at('b', 'z1'), at('c', 'z1'))).toBe(DEFAULT_DOMAIN_RTT_MICROSECONDS.zone);
    expect(e.between(at('a', 'z1'), at('a', 'z1'))).toBe(DEFAULT_DOMAIN_RTT_MICROSECONDS['same-instance']);
    expect(e.between(at('x', 'z1', 'g'), at('y', 'z1', 'g'))).toBe(50);
    expect(e.between(at('x', 'z1'), at('y', 'z2'))).toBe(800);
  });

  it('a pair does not flip with the order of heartbeats: each direction its latest, then the larger of the two', () => {
    const aToB = { fromInstanceId: 'a', toInstanceId: 'b', maxMicroseconds: 900, p99Microseconds: 800 };
    const bToA = { fromInstanceId: 'b', toInstanceId: 'a', maxMicroseconds: 30, p99Microseconds: 30 };
    // A reports at t=1000, B at 1001; then A again at 1010 (same figure): the estimate stays 900 throughout.
    for (const reports of [
      [
        { ...aToB, atSeconds: 1000 },
        { ...bToA, atSeconds: 1001 },
      ],
      [
        { ...bToA, atSeconds: 1001 },
        { ...aToB, atSeconds: 1010 },
      ],
    ])
      expect(new RttEstimator(reports).measuredBetween('b', 'a')).toBe(900);
    // A newer report of the same direction replaces the older one (the path recovered): then B's direction counts.
    const recovered = new RttEstimator([
      { ...aToB, atSeconds: 1000 },
      { ...bToA, atSeconds: 1001 },
      { ...aToB, maxMicroseconds: 20, atSeconds: 1010 },
    ]);
    expect(recovered.measuredBetween('a', 'b')).toBe(30);
  });

  it('star: the root to every other task; all-to-all: the worst pair; loopback for tasks sharing an instance', () => {
    const rtt: Record<string, number> = { 'a-b': 100, 'a-c': 300, 'b-c': 700 };
    const f = (x: string, y: string) => (x === y ? 20 : (rtt[[x, y].sort().join('-')] as number));
    expect(boundingRtt('star', 0, ['a', 'b', 'c', 'a'], f)).toBe(300);
    expect(boundingRtt('star', 1, ['a', 'b', 'c'], f)).toBe(700);
    expect(boundingRtt('all-to-all', 0, ['a', 'b', 'c'], f)).toBe(700);
    expect(boundingRtt('all-to-all', 0, ['a', 'a'], f)).toBe(20);
    expect(boundingRtt('star', 0, ['a', 'a', 'a'], f)).toBe(20);
    expect(boundingRtt('star', 0, ['a'], f)).toBeUndefined();
    expect(jobPerformance('memcached', 'star', 0, ['a', 'b', 'c'], f)).toBeCloseTo(
      curveOf('memcached').at(300),
      12,
    );
    expect(jobPerformance('memcached', 'star', 0, ['a'], f)).toBe(1);
    expect(jobPerformance('none', 'all-to-all', 0, ['a', 'b', 'c'], f)).toBe(1);
  });

  it('cross-zone traffic: the share that crosses, billed leaving one zone and entering the other', () => {
    const zone: Record<string, string> = { a: 'z1', b: 'z1', c: 'z2', d: 'z3' };
    const same = (x: string, y: string) => zone[x] === zone[y];
    expect(crossZoneShare('star', 0, ['a', 'b', 'c', 'd'], same)).toBeCloseTo(2 / 3, 12);
    expect(crossZoneShare('all-to-all', 0, ['a', 'b', 'c', 'd'], same)).toBeCloseTo(5 / 6, 12);
    expect(crossZoneShare('star', 0, ['a', 'b'], same)).toBe(0);
    // 30 GiB/h, two thirds crossing, $0.01/GiB each way: $0.40/h.
    expect(crossZoneCostPerHour(30, 2 / 3, 0.01)).toBeCloseTo(0.4, 12);
  });

  it("the catalog's cross-zone price defaults to AWS's $0.01 per GiB each way and round-trips through its file", () => {
    const file = {
      schemaVersion: 1,
      region: 'us-east-1',
      types: [
        {
          name: 'c7i.large',
          family: 'c7i',
          gpus: 0,
          vcpus: 2,
          memoryGiB: 4,
          costPerHour: 0.1,
          delays: {
            instantiateSeconds: 1,
            workerStartSeconds: 1,
            workerRegisterSeconds: 1,
            terminateSeconds: 1,
          },
        },
      ],
    };
    expect(crossZonePricePerGiB(parseCatalog(file))).toBe(DEFAULT_CROSS_ZONE_PRICE_PER_GIB);
    const priced = parseCatalog({ ...file, crossZonePricePerGiB: 0.02 });
    expect(crossZonePricePerGiB(priced)).toBe(0.02);
    expect(parseCatalog(catalogToFile(priced))).toEqual(priced);
    expect(() => parseCatalog({ ...file, crossZonePricePerGiB: -1 })).toThrow(/crossZonePricePerGiB/);
  });
});
