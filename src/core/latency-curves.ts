import type { LatencyPoint, LatencyPreset, LatencySensitivity } from './network.js';

/**
 * Relative application performance as a function of network latency (NoMora, research digest §3): the paper's four
 * fitted curves, `none`, or a user's table, evaluated the way the paper's scheduler does (§3.3): on a 10 µs grid, a
 * latency rounded to the nearest grid point (halves up), and a latency beyond the curve's range given the smallest
 * performance the curve defines. The curves were fitted against latency injected in both directions, so they are
 * read with a measured round trip (digest §9: no calibration baseline subtracted, the conservative choice).
 */

/** The paper's grid (§3.3: "discretised in steps of 10 µs"). */
export const LATENCY_GRID_MICROSECONDS = 10;
/** The paper's curves are defined on 0–1000 µs (§3.1: 1–500 µs injected per direction). */
export const PRESET_RANGE_MICROSECONDS = 1000;

/** NoMora's preference thresholds (§5.2, the best evaluated setting): machine ≤ 105, domain (rack) ≤ 110. */
export const DEFAULT_MACHINE_THRESHOLD = 105;
export const DEFAULT_DOMAIN_THRESHOLD = 110;

/** The fitted equations 2–5 (digest §3.2): 1 below a threshold, a polynomial above it. */
const EQUATIONS: Readonly<Record<LatencyPreset, (x: number) => number>> = {
  memcached: (x) => (x < 40 ? 1 : 1.067 - 3.093e-3 * x + 4.084e-6 * x ** 2 - 1.898e-9 * x ** 3),
  strads: (x) => (x < 20 ? 1 : 1.009 - 2.095e-3 * x + 2.571e-6 * x ** 2 - 1.232e-9 * x ** 3),
  spark: (x) => (x < 200 ? 1 : -1.161e-4 * x + 1.0199),
  tensorflow: (x) => (x < 40 ? 1 : 1.005 - 5.146e-4 * x + 5.837e-7 * x ** 2 - 3.46e-10 * x ** 3),
};

/** The grid point a latency is read at: nearest multiple of 10 µs, halves up (45 → 50, 44 → 40), never below 0. */
export function gridPoint(latencyMicroseconds: number): number {
  const x = Math.max(0, latencyMicroseconds);
  return Math.floor(x / LATENCY_GRID_MICROSECONDS + 0.5) * LATENCY_GRID_MICROSECONDS;
}

/**
 * NoMora's arc cost of a performance (§5.2 reconstructed, digest §9): round(100 / p), so p = 1 costs 100 and
 * p = 0.1 costs 1000.
 */
export function placementCost(performance: number): number {
  return Math.round(100 / performance);
}

/** A curve tabulated on the grid (the paper's per-job hash table). */
export class LatencyCurve {
  /** Performance at grid point i·10 µs. */
  private readonly table: readonly number[];
  /** The smallest performance the curve defines (the out-of-range value). */
  readonly minimum: number;

  private constructor(table: readonly number[]) {
    this.table = table;
    this.minimum = Math.min(...table);
  }

  /** The paper's curve, tabulated on 0–1000 µs. */
  static preset(name: LatencyPreset): LatencyCurve {
    const f = EQUATIONS[name];
    const n = PRESET_RANGE_MICROSECONDS / LATENCY_GRID_MICROSECONDS;
    return new LatencyCurve(Array.from({ length: n + 1 }, (_, i) => f(i * LATENCY_GRID_MICROSECONDS)));
  }

  /**
   * A user's table of `[latencyMicroseconds, relativePerformance]` points (increasing latencies), tabulated from 0 to
   * its last point's latency: linear between points, the first point's value before it.
   */
  static fromPoints(points: readonly LatencyPoint[]): LatencyCurve {
    if (points.length === 0) throw new Error('a latency table needs at least one point');
    const last = points[points.length - 1] as LatencyPoint;
    const n = Math.ceil(last[0] / LATENCY_GRID_MICROSECONDS);
    const table: number[] = [];
    for (let i = 0; i <= n; i++) table.push(interpolate(points, i * LATENCY_GRID_MICROSECONDS));
    return new LatencyCurve(table);
  }

  /** `none`: performance 1 at every latency. */
  static flat(): LatencyCurve {
    return new LatencyCurve([1]);
  }

  /** Relative performance at a latency (µs): its grid point's value, or the minimum beyond the curve's range. */
  at(latencyMicroseconds: number): number {
    const i = gridPoint(latencyMicroseconds) / LATENCY_GRID_MICROSECONDS;
    return this.table[i] ?? this.minimum;
  }

  /** NoMora's arc cost at a latency: round(100 / p). */
  costAt(latencyMicroseconds: number): number {
    return placementCost(this.at(latencyMicroseconds));
  }

  /** Largest grid latency whose cost is within `threshold` (the reach of a preference threshold), or undefined. */
  reach(threshold: number): number | undefined {
    let best: number | undefined;
    this.table.forEach((p, i) => {
      if (placementCost(p) <= threshold) best = i * LATENCY_GRID_MICROSECONDS;
    });
    return best;
  }
}

function interpolate(points: readonly LatencyPoint[], x: number): number {
  const first = points[0] as LatencyPoint;
  if (x <= first[0]) return first[1];
  for (let k = 1; k < points.length; k++) {
    const [x1, y1] = points[k] as LatencyPoint;
    if (x <= x1) {
      const [x0, y0] = points[k - 1] as LatencyPoint;
      return y0 + ((y1 - y0) * (x - x0)) / (x1 - x0);
    }
  }
  return (points[points.length - 1] as LatencyPoint)[1];
}

const presets = new Map<LatencyPreset, LatencyCurve>();
const tables = new WeakMap<readonly LatencyPoint[], LatencyCurve>();

/** The curve of a sensitivity, built once per preset or table object (rounds ask for it again and again). */
export function curveOf(sensitivity: LatencySensitivity): LatencyCurve {
  if (sensitivity === 'none') return FLAT;
  if (typeof sensitivity === 'string') {
    let curve = presets.get(sensitivity);
    if (curve === undefined) {
      curve = LatencyCurve.preset(sensitivity);
      presets.set(sensitivity, curve);
    }
    return curve;
  }
  let curve = tables.get(sensitivity);
  if (curve === undefined) {
    curve = LatencyCurve.fromPoints(sensitivity);
    tables.set(sensitivity, curve);
  }
  return curve;
}

const FLAT = LatencyCurve.flat();

/** Whether performance depends on latency at all (`none` and flat tables do not). */
export function isLatencySensitive(sensitivity: LatencySensitivity): boolean {
  return curveOf(sensitivity).minimum < 1;
}
