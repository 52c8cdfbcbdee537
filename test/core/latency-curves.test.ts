import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  curveOf,
  DEFAULT_DOMAIN_THRESHOLD,
  DEFAULT_MACHINE_THRESHOLD,
  gridPoint,
  isLatencySensitive,
  LatencyCurve,
  placementCost,
} from '../../src/core/latency-curves.js';
import { LATENCY_PRESETS } from '../../src/core/network.js';

/** The research digest's hand-checkable cases (nomora-latency-placement.md §11). */
describe('NoMora curves', () => {
  it('T1: the fitted functions at the digest values', () => {
    const m = curveOf('memcached');
    expect(m.at(30)).toBe(1);
    expect(m.at(40)).toBeCloseTo(0.9497, 4);
    expect(m.at(100)).toBeCloseTo(0.7966, 4);
    expect(m.at(400)).toBeCloseTo(0.3618, 4);
    expect(m.at(1000)).toBeCloseTo(0.16, 4);
    expect(curveOf('strads').at(20)).toBeCloseTo(0.9681, 4);
    expect(curveOf('spark').at(200)).toBeCloseTo(0.99668, 5);
    expect(curveOf('tensorflow').at(120)).toBeCloseTo(0.9511, 4);
  });

  it('matches the digest table row by row (§3.2)', () => {
    const xs = [20, 30, 40, 50, 100, 150, 200, 300, 400, 500, 700, 1000];
    const rows: Record<string, number[]> = {
      memcached: [1, 1, 0.9497, 0.9223, 0.7966, 0.6885, 0.5966, 0.4554, 0.3618, 0.3043, 0.252, 0.16],
      strads: [0.9681, 0.9484, 0.9292, 0.9105, 0.824, 0.7484, 0.683, 0.5786, 0.5035, 0.4502, 0.3797, 0.253],
      spark: [1, 1, 1, 1, 1, 1, 0.9967, 0.9851, 0.9735, 0.9618, 0.9386, 0.9038],
      tensorflow: [1, 1, 0.9853, 0.9807, 0.959, 0.9398, 0.9227, 0.8938, 0.8704, 0.8504, 0.8121, 0.7281],
    };
    for (const [name, values] of Object.entries(rows))
      xs.forEach((x, i) => expect(curveOf(name as 'memcached').at(x)).toBeCloseTo(values[i] as number, 4));
  });

  it('T2: lookup on the 10 µs grid (halves up), cost round(100/p), out of range → the minimum', () => {
    const m = curveOf('memcached');
    const cases: [number, number, number, number][] = [
      // latency, grid point, p, cost
      [5, 10, 1, 100],
      [38, 40, 0.9497, 105],
      [44, 40, 0.9497, 105],
      [45, 50, 0.9223, 108],
      [120, 120, 0.7514, 133],
      [300, 300, 0.4554, 220],
      [400, 400, 0.3618, 276],
      [1000, 1000, 0.16, 625],
      [1500, 1500, 0.16, 625],
    ];
    for (const [latency, grid, p, cost] of cases) {
      expect(gridPoint(latency)).toBe(grid);
      expect(m.at(latency)).toBeCloseTo(p, 4);
      expect(m.costAt(latency)).toBe(cost);
    }
    // The digest's table puts 5 µs in bucket 0; halves up it is 10: either way p = 1 and the cost 100.
    expect(m.at(0)).toBe(1);
    expect(placementCost(1)).toBe(100);
    expect(placementCost(0.1)).toBe(1000);
  });

  it('T3: the largest latency each threshold admits (cost ≤ p_m = 105, ≤ p_r = 110)', () => {
    const reach = (name: (typeof LATENCY_PRESETS)[number]) => [
      curveOf(name).reach(DEFAULT_MACHINE_THRESHOLD),
      curveOf(name).reach(DEFAULT_DOMAIN_THRESHOLD),
    ];
    expect(reach('memcached')).toEqual([40, 50]);
    expect(reach('strads')).toEqual([30, 50]);
    expect(reach('tensorflow')).toEqual([120, 250]);
    expect(reach('spark')).toEqual([620, 980]);
    // With cost ≤ 115 (NoMora's other setting): memcached 70, STRADS 70, TensorFlow 420.
    expect([
      curveOf('memcached').reach(115),
      curveOf('strads').reach(115),
      curveOf('tensorflow').reach(115),
    ]).toEqual([70, 70, 420]);
  });

  it('every preset is non-increasing on its grid and within [its minimum, 1] beyond it', () => {
    for (const name of LATENCY_PRESETS) {
      const c = curveOf(name);
      for (let x = 10; x <= 1000; x += 10) expect(c.at(x)).toBeLessThanOrEqual(c.at(x - 10) + 1e-12);
      expect(c.at(5000)).toBe(c.minimum);
    }
  });

  it('a user table: linear between points, its first value before it, its minimum beyond it', () => {
    const c = LatencyCurve.fromPoints([
      [50, 1],
      [150, 0.5],
      [250, 0.6],
    ]);
    expect(c.at(0)).toBe(1);
    expect(c.at(100)).toBeCloseTo(0.75, 12);
    expect(c.at(200)).toBeCloseTo(0.55, 12);
    expect(c.at(250)).toBeCloseTo(0.6, 12);
    // Beyond the table: the smallest value the curve defines, not the last one (the paper's rule).
    expect(c.at(260)).toBeCloseTo(0.5, 12);
    expect(isLatencySensitive([[0, 1]])).toBe(false);
    expect(
      isLatencySensitive([
        [0, 1],
        [100, 0.99],
      ]),
    ).toBe(true);
    expect(isLatencySensitive('none')).toBe(false);
    expect(isLatencySensitive('spark')).toBe(true);
  });

  it('property: any table is read within its own value range, at its grid points', () => {
    const table = fc
      .uniqueArray(fc.integer({ min: 0, max: 3000 }), { minLength: 1, maxLength: 12 })
      .chain((xs) =>
        fc.tuple(
          fc.constant([...xs].sort((a, b) => a - b)),
          fc.array(fc.double({ min: 0.01, max: 1, noNaN: true }), {
            minLength: xs.length,
            maxLength: xs.length,
          }),
        ),
      );
    fc.assert(
      fc.property(table, fc.double({ min: -10, max: 10_000, noNaN: true }), ([xs, ps], latency) => {
        const points = xs.map((x, i) => [x, ps[i] as number] as const);
        const c = LatencyCurve.fromPoints(points);
        const p = c.at(latency);
        expect(p).toBeGreaterThanOrEqual(Math.min(...ps) - 1e-12);
        expect(p).toBeLessThanOrEqual(Math.max(...ps) + 1e-12);
        expect(c.at(latency)).toBe(c.at(gridPoint(latency)));
      }),
    );
  });
});
