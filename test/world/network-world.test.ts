import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ValidationError, describeIssues, parseWith } from '../../src/core/validation.js';
import {
  checkSpotZones,
  defaultNetworkConfig,
  networkConfigSchema,
  resolveNetworkConfig,
} from '../../src/world/network-config.js';
import { NetworkWorld } from '../../src/world/network-world.js';

const config = defaultNetworkConfig('us-east-1');
const inst = (id: string, zone: string, placementGroup?: string) => ({
  id,
  placement: placementGroup === undefined ? { zone } : { zone, placementGroup },
});

describe('the network ground truth', () => {
  it('names three zones after the region and draws a zone for a launch without one', () => {
    expect(config.zones).toEqual(['us-east-1a', 'us-east-1b', 'us-east-1c']);
    const world = new NetworkWorld(config, 3, 0.01);
    const zones = new Set(Array.from({ length: 60 }, (_, i) => world.place(`i-${i}`, undefined).zone));
    expect(zones).toEqual(new Set(config.zones));
    expect(world.place('i-x', { zone: 'us-east-1b' })).toEqual({ zone: 'us-east-1b' });
  });

  it('keeps every instance in its own zones: a zone asked that it lacks is drawn as if none were asked', () => {
    const two = resolveNetworkConfig(
      networkConfigSchema.parse({ zones: ['us-east-1a', 'us-east-1c'] }),
      'us-east-1',
    );
    const world = new NetworkWorld(two, 3, 0.01);
    expect(world.settledZone({ zone: 'us-east-1b' })).toBeUndefined();
    for (let i = 0; i < 20; i++) {
      expect(two.zones).toContain(world.place(`i-${i}`, { zone: 'us-east-1b' }).zone);
      expect(world.place(`j-${i}`, { zone: 'us-east-1b' })).toEqual(world.place(`j-${i}`, undefined));
    }
    // A group asked in a zone the network lacks settles in one it has, and keeps it.
    const grouped = world.place('g-1', { zone: 'us-east-1b', placementGroup: 'g' });
    expect(two.zones).toContain(grouped.zone);
    expect(world.settledZone({ zone: 'us-east-1b', placementGroup: 'g' })).toBe(grouped.zone);
    expect(world.place('i-c', { zone: 'us-east-1c' })).toEqual({ zone: 'us-east-1c' });
  });

  it('keeps a placement group in the zone of its first instance', () => {
    const world = new NetworkWorld(config, 3, 0.01);
    const first = world.place('i-1', { placementGroup: 'g' });
    for (let i = 2; i < 10; i++) expect(world.place(`i-${i}`, { placementGroup: 'g' })).toEqual(first);
  });

  it('tells where a launch will land before it is placed, when nothing is left to draw', () => {
    const world = new NetworkWorld(config, 3, 0.01);
    expect(world.settledZone(undefined)).toBeUndefined();
    expect(world.settledZone({ placementGroup: 'g' })).toBeUndefined();
    expect(world.settledZone({ zone: 'us-east-1c' })).toBe('us-east-1c');
    const first = world.place('i-1', { placementGroup: 'g', zone: 'us-east-1b' });
    // The group's zone wins over the one asked, as place() has it.
    expect(world.settledZone({ placementGroup: 'g', zone: 'us-east-1c' })).toBe(first.zone);
    expect(world.place('i-2', { placementGroup: 'g', zone: 'us-east-1c' }).zone).toBe(first.zone);
  });

  it('noise per domain: U[0.5, 1] within a placement group, U[0.8, 1.2] beyond; the loopback is constant', () => {
    const world = new NetworkWorld(config, 7, 0.01);
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 10_000_000 }), (t) => {
        const pg = world.rtt(inst('a', 'z1', 'g'), inst('b', 'z1', 'g'), t);
        expect(pg).toBeGreaterThanOrEqual(25);
        expect(pg).toBeLessThanOrEqual(50);
        const zone = world.rtt(inst('a', 'z1'), inst('b', 'z1'), t);
        expect(zone).toBeGreaterThanOrEqual(120);
        expect(zone).toBeLessThanOrEqual(180);
        const cross = world.rtt(inst('a', 'z1'), inst('b', 'z2'), t);
        expect(cross).toBeGreaterThanOrEqual(640);
        expect(cross).toBeLessThanOrEqual(960);
        expect(world.rtt(inst('a', 'z1'), inst('a', 'z1'), t)).toBe(20);
      }),
    );
  });

  it('is a function of the pair and the time slot: constant within a slot, the same whatever was asked before', () => {
    const a = new NetworkWorld(config, 7, 0.01);
    const b = new NetworkWorld(config, 7, 0.01);
    const x = inst('x', 'z1');
    const y = inst('y', 'z2');
    b.rtt(inst('p', 'z1'), inst('q', 'z1'), 999);
    expect(a.rtt(x, y, 120)).toBe(b.rtt(y, x, 179.5));
    expect(a.rtt(x, y, 120)).not.toBe(a.rtt(x, y, 180));
    // A worker's window maximum covers the slots the window overlaps.
    expect(a.measuredMax(x, y, 180)).toBe(Math.max(a.rtt(x, y, 120), a.rtt(x, y, 180)));
  });

  it('congestion episodes multiply an instance’s round trips by their factor for their duration', () => {
    const stormy = resolveNetworkConfig(
      networkConfigSchema.parse({
        noise: { withinPlacementGroup: [1, 1], betweenDomains: [1, 1] },
        episodes: { perInstancePerDay: 24, durationMinutes: [5, 30], factor: [2, 3] },
      }),
      'r',
    );
    const world = new NetworkWorld(stormy, 5, 0.01);
    const factors = new Set<number>();
    let congested = 0;
    for (let t = 0; t < 5 * 86_400; t += 60) {
      const f = world.rtt(inst('a', 'z1'), inst('b', 'z1'), t) / 150;
      factors.add(Math.round(f * 1000) / 1000);
      if (f > 1) {
        congested += 1;
        expect(f).toBeGreaterThanOrEqual(2);
        expect(f).toBeLessThanOrEqual(3);
      }
    }
    // Two instances, one episode an hour each, 5–30 min long: a sizeable share of the time is congested.
    expect(congested / (5 * 1440)).toBeGreaterThan(0.2);
    expect(congested / (5 * 1440)).toBeLessThan(0.8);
    expect(new NetworkWorld(stormy, 5, 0.01).varies).toBe(true);
    expect(
      new NetworkWorld(
        resolveNetworkConfig(
          networkConfigSchema.parse({ noise: { withinPlacementGroup: [1, 1], betweenDomains: [1, 1] } }),
          'r',
        ),
        5,
        0.01,
      ).varies,
    ).toBe(false);
  });

  it('rejects a bad config naming the field', () => {
    const bad = (value: unknown) => {
      try {
        parseWith(networkConfigSchema, value, 'net.yaml');
      } catch (e) {
        if (e instanceof ValidationError) return e.problems.join('; ');
      }
      return 'accepted';
    };
    expect(bad({ zones: 0 })).toMatch(/^zones: at least 1/);
    expect(bad({ noise: { betweenDomains: [1.2, 0.8] } })).toMatch(
      /noise\.betweenDomains: low must not exceed high/,
    );
    expect(bad({ episodes: { factor: [0.5, 2] } })).toMatch(/episodes\.factor\.0/);
    expect(bad({ domainRttMicroseconds: { zone: -1 } })).toMatch(
      /domainRttMicroseconds\.zone: must be ≥ 0 µs/,
    );
    expect(bad({ nosie: {} })).toMatch(/nosie/);
    // The simulation steps at every noise interval: one of a millisecond would never finish.
    expect(bad({ noise: { intervalSeconds: 0.001 } })).toMatch(/^noise\.intervalSeconds: must be ≥ 1 s/);
    expect(bad({ noise: { intervalSeconds: 0 } })).toMatch(/^noise\.intervalSeconds: must be ≥ 1 s/);
    expect(bad({ noise: { intervalSeconds: 1 } })).toBe('accepted');
    // The generated jobs' traffic has a job spec's own bound.
    expect(bad({ generatedGibPerHour: 1e300 })).toBe('generatedGibPerHour: at most 1000000 GiB per hour');
    expect(bad({ generatedGibPerHour: 1_000_001 })).toBe('generatedGibPerHour: at most 1000000 GiB per hour');
    expect(bad({ generatedGibPerHour: 1_000_000 })).toBe('accepted');
  });

  it('refuses round trips that shrink with distance, naming the farther domain', () => {
    const bad = (value: unknown) => {
      const result = networkConfigSchema.safeParse(value);
      return result.success ? 'accepted' : describeIssues(result.error).join('; ');
    };
    expect(
      bad({
        domainRttMicroseconds: { 'same-instance': 900, 'placement-group': 800, zone: 500, 'cross-zone': 20 },
      }),
    ).toBe(
      "domainRttMicroseconds.placement-group: 800 µs is below same-instance's 900 µs: round trips must not shrink " +
        'with distance (same-instance ≤ placement-group ≤ zone ≤ cross-zone); ' +
        "domainRttMicroseconds.zone: 500 µs is below placement-group's 800 µs: round trips must not shrink with " +
        'distance (same-instance ≤ placement-group ≤ zone ≤ cross-zone); ' +
        "domainRttMicroseconds.cross-zone: 20 µs is below zone's 500 µs: round trips must not shrink with distance " +
        '(same-instance ≤ placement-group ≤ zone ≤ cross-zone)',
    );
    // Against the defaults of the domains not given (zone 150 µs).
    expect(bad({ domainRttMicroseconds: { 'cross-zone': 100 } })).toMatch(
      /^domainRttMicroseconds\.cross-zone: 100 µs is below zone's 150 µs/,
    );
    // Equal round trips are a network without the distinction, not an inverted one.
    expect(
      bad({ domainRttMicroseconds: { 'same-instance': 0, 'placement-group': 0, zone: 0, 'cross-zone': 0 } }),
    ).toBe('accepted');
    expect(bad({})).toBe('accepted');
  });

  it('refuses noise factors of 0 and noise that lets round trips shrink with distance, naming the noise', () => {
    const problems = (value: unknown) => {
      const result = networkConfigSchema.safeParse(value);
      return result.success ? [] : describeIssues(result.error);
    };
    const RULE =
      "noisy round trips must not shrink with distance either (a domain's round trip × its noise's high ≤ the next " +
      "farther domain's × its noise's low; domains given equal round trips count as one)";
    // A placement-group pair up to 500 µs apart, a zone pair as near as 120 µs.
    expect(problems({ noise: { withinPlacementGroup: [8, 10] } })).toEqual([
      "noise.withinPlacementGroup: placement-group round trips reach 500 µs (50 µs × withinPlacementGroup's high " +
        "10), above zone's lowest, 120 µs (150 µs × betweenDomains' low 0.8): " +
        RULE,
    ]);
    expect(problems({ noise: { withinPlacementGroup: [0.2, 1] } })).toEqual([
      "noise.withinPlacementGroup: same-instance round trips reach 20 µs, above placement-group's lowest, 10 µs " +
        "(50 µs × withinPlacementGroup's low 0.2): " +
        RULE,
    ]);
    expect(problems({ noise: { betweenDomains: [0.1, 10] } })).toEqual([
      "noise.withinPlacementGroup: placement-group round trips reach 50 µs (50 µs × withinPlacementGroup's high 1), " +
        "above zone's lowest, 15 µs (150 µs × betweenDomains' low 0.1): " +
        RULE,
      "noise.betweenDomains: zone round trips reach 1500 µs (150 µs × betweenDomains' high 10), above cross-zone's " +
        "lowest, 80 µs (800 µs × betweenDomains' low 0.1): " +
        RULE,
    ]);
    // A factor of 0 makes round trips 0 µs.
    expect(problems({ noise: { withinPlacementGroup: [0, 0], betweenDomains: [0, 1] } })).toEqual([
      'noise.withinPlacementGroup.0: must be > 0 (a factor of 0 makes round trips 0 µs)',
      'noise.withinPlacementGroup.1: must be > 0 (a factor of 0 makes round trips 0 µs)',
      'noise.betweenDomains.0: must be > 0 (a factor of 0 makes round trips 0 µs)',
    ]);
    // Base values out of order are told once, by the round trips.
    expect(problems({ domainRttMicroseconds: { 'cross-zone': 100 } })).toHaveLength(1);
    // The defaults, a noiseless network of equal round trips, and noise that keeps the order are accepted.
    expect(problems({})).toEqual([]);
    expect(
      problems({
        domainRttMicroseconds: { 'same-instance': 100, 'placement-group': 100, zone: 100, 'cross-zone': 100 },
        noise: { withinPlacementGroup: [1, 1], betweenDomains: [1, 1] },
      }),
    ).toEqual([]);
    expect(problems({ noise: { withinPlacementGroup: [0.4, 2.4], betweenDomains: [0.8, 4] } })).toEqual([]);
  });

  it('takes domains given equal round trips as alike under any noise, and keeps the order past them', () => {
    const problems = (value: unknown) => {
      const result = networkConfigSchema.safeParse(value);
      return result.success ? [] : describeIssues(result.error);
    };
    // Same-instance and placement-group alike at 50 µs: a placement-group pair as near as 25 µs under the default
    // noise is no inversion, and neither are a zone and cross-zone alike at 800 µs.
    expect(problems({ domainRttMicroseconds: { 'same-instance': 50, 'placement-group': 50 } })).toEqual([]);
    expect(problems({ domainRttMicroseconds: { zone: 800, 'cross-zone': 800 } })).toEqual([]);
    expect(
      problems({
        domainRttMicroseconds: { 'same-instance': 50, 'placement-group': 50, zone: 800, 'cross-zone': 800 },
      }),
    ).toEqual([]);
    // Near below far with noise that makes them cross is still refused: 20 µs against a placement group at 30 × 0.5.
    expect(problems({ domainRttMicroseconds: { 'placement-group': 30 } })).toEqual([
      "noise.withinPlacementGroup: same-instance round trips reach 20 µs, above placement-group's lowest, 15 µs " +
        "(30 µs × withinPlacementGroup's low 0.5): noisy round trips must not shrink with distance either (a " +
        "domain's round trip × its noise's high ≤ the next farther domain's × its noise's low; domains given equal " +
        'round trips count as one)',
    ]);
    // Past two domains alike, each is held below the next longer one: a same-instance pair (50 µs, no noise) may not
    // outlast a zone pair (60 µs × 0.8), though the placement group's noise (high 0.8) keeps it below.
    expect(
      problems({
        domainRttMicroseconds: { 'same-instance': 50, 'placement-group': 50, zone: 60 },
        noise: { withinPlacementGroup: [0.5, 0.8] },
      }),
    ).toEqual([
      "noise.betweenDomains: same-instance round trips reach 50 µs, above zone's lowest, 48 µs (60 µs × " +
        "betweenDomains' low 0.8): noisy round trips must not shrink with distance either (a domain's round trip × " +
        "its noise's high ≤ the next farther domain's × its noise's low; domains given equal round trips count as " +
        'one)',
    ]);
  });

  it('refuses zones named outside the catalog’s region, naming each', () => {
    const resolve = (zones: readonly string[]) =>
      resolveNetworkConfig(networkConfigSchema.parse({ zones }), 'us-east-1');
    const error = (() => {
      try {
        resolve(['us-east-1a', 'mars-1a', 'us-east-1-bos-1a', 'us-east-10a']);
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(error).toBeInstanceOf(ValidationError);
    expect((error as ValidationError).message).toBe(
      '--latency-config: zones.1: "mars-1a" is not a zone of the catalog\'s region us-east-1; ' +
        'zones.3: "us-east-10a" is not a zone of the catalog\'s region us-east-1',
    );
    // The region's availability zones and Local Zones are its own; zones given as a count are named after it.
    expect(resolve(['us-east-1a', 'us-east-1-bos-1a']).zones).toEqual(['us-east-1a', 'us-east-1-bos-1a']);
    expect(resolveNetworkConfig(networkConfigSchema.parse({ zones: 2 }), 'eu-west-3').zones).toEqual([
      'eu-west-3a',
      'eu-west-3b',
    ]);
  });
});

describe("the network's zones and the catalog's spot pools", () => {
  const market = {
    snapshotDate: '2026-01-01',
    source: 'test',
    offerings: ['us-east-1a', 'us-east-1b', 'us-east-1c'].map((zone) => ({
      typeName: 'p3.2xlarge',
      zone,
      pricePerHour: 1,
      interruption: '<5%' as const,
    })),
  };
  const zones = (names: readonly string[]) =>
    resolveNetworkConfig(networkConfigSchema.parse({ zones: names }), 'us-east-1');
  const problem = (run: () => void): string | undefined => {
    try {
      run();
    } catch (e) {
      if (e instanceof ValidationError) return e.message;
      throw e;
    }
    return undefined;
  };

  it('refuses spot on a network none of whose zones has a pool, naming both', () => {
    expect(problem(() => checkSpotZones(zones(['us-east-1d', 'us-east-1e']), market, true))).toBe(
      "--latency-config: zones: us-east-1d, us-east-1e have no spot pool (the catalog's spot pools are in " +
        'us-east-1a, us-east-1b, us-east-1c): with --spot on, no run could buy spot; name a zone with one',
    );
    const defaults = resolveNetworkConfig(networkConfigSchema.parse({}), 'us-east-1');
    const elsewhere = { ...market, offerings: market.offerings.map((o) => ({ ...o, zone: 'us-east-1f' })) };
    expect(problem(() => checkSpotZones(defaults, elsewhere, false))).toBe(
      "--spot: on: the simulated network's default zones us-east-1a, us-east-1b, us-east-1c have no spot pool " +
        "(the catalog's spot pools are in us-east-1f): give --latency-config zones that have one",
    );
  });

  it('accepts a network sharing a zone with the pools, spot off, or a catalog without pools', () => {
    expect(problem(() => checkSpotZones(zones(['us-east-1c', 'us-east-1d']), market, true))).toBeUndefined();
    expect(problem(() => checkSpotZones(zones(['us-east-1d']), undefined, true))).toBeUndefined();
    expect(
      problem(() => checkSpotZones(zones(['us-east-1d']), { ...market, offerings: [] }, true)),
    ).toBeUndefined();
  });
});
