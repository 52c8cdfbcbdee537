import { curveOf } from './latency-curves.js';
import type {
  CommunicationPattern,
  InstancePlacement,
  LatencyDomain,
  LatencySensitivity,
  MeasuredRtt,
} from './network.js';

/**
 * The latency model the scheduler and the simulator share (research digest §10.2): an instance pair's latency domain
 * from where the instances are, a round trip per domain until measured, the round trip that bounds a job (its
 * pattern), its relative performance P_job, and what its traffic across zones costs. Pure functions over plain data.
 */

/** Round trip per latency domain in µs. */
export type DomainRtts = Readonly<Record<LatencyDomain, number>>;

/**
 * The digest's placeholders (§10.2: loopback/bridge 20 µs, cluster placement group 50 µs, zone 150 µs, across zones
 * 800 µs). They stand until measured round trips replace them, and should be calibrated on the account and region.
 */
export const DEFAULT_DOMAIN_RTT_MICROSECONDS: DomainRtts = {
  'same-instance': 20,
  'placement-group': 50,
  zone: 150,
  'cross-zone': 800,
};

/** An instance as the latency model needs it: its id and where it is. */
export interface PlacedInstance {
  readonly id: string;
  readonly placement?: InstancePlacement | undefined;
}

/**
 * The domain of a pair: same id; the same placement group (a group lies in one zone); the same known zone; else
 * across zones, which is also the assumption when a zone is not known (the conservative default).
 */
export function latencyDomain(a: PlacedInstance, b: PlacedInstance): LatencyDomain {
  if (a.id === b.id) return 'same-instance';
  const pa = a.placement;
  const pb = b.placement;
  if (pa?.placementGroup !== undefined && pa.placementGroup === pb?.placementGroup) return 'placement-group';
  if (pa?.zone !== undefined && pa.zone === pb?.zone) return 'zone';
  return 'cross-zone';
}

/**
 * Round trips between instances as the scheduler estimates them: the largest measurement of the pair, either
 * direction (each is already its worker's maximum over the window: NoMora's ECMP conservatism, digest §2), else the
 * default of the pair's domain. Each worker reports its own direction at its own heartbeat, so the latest report of a
 * pair would flip with the order of heartbeats; the latest of each direction stands for it, then the larger counts.
 */
export class RttEstimator {
  private readonly measured = new Map<string, number>();

  constructor(
    measurements: readonly MeasuredRtt[] = [],
    readonly defaults: DomainRtts = DEFAULT_DOMAIN_RTT_MICROSECONDS,
  ) {
    const latest = new Map<string, MeasuredRtt>();
    for (const m of measurements) {
      if (m.fromInstanceId === m.toInstanceId) continue;
      const direction = `${m.fromInstanceId}\u0000${m.toInstanceId}`;
      const seen = latest.get(direction);
      if (seen === undefined || m.atSeconds > seen.atSeconds) latest.set(direction, m);
      else if (m.atSeconds === seen.atSeconds && m.maxMicroseconds > seen.maxMicroseconds)
        latest.set(direction, m);
    }
    for (const m of latest.values()) {
      const key = pairKey(m.fromInstanceId, m.toInstanceId);
      this.measured.set(key, Math.max(this.measured.get(key) ?? 0, m.maxMicroseconds));
    }
  }

  /** The measured round trip of a pair, if any. */
  measuredBetween(a: string, b: string): number | undefined {
    return a === b ? undefined : this.measured.get(pairKey(a, b));
  }

  get hasMeasurements(): boolean {
    return this.measured.size > 0;
  }

  /** Estimated round trip in µs between two instances. */
  between(a: PlacedInstance, b: PlacedInstance): number {
    if (a.id === b.id) return this.defaults['same-instance'];
    return this.measured.get(pairKey(a.id, b.id)) ?? this.defaults[latencyDomain(a, b)];
  }
}

export function pairKey(a: string, b: string): string {
  return a < b ? `${a}\u0000${b}` : `${b}\u0000${a}`;
}

/**
 * The round trip that bounds a job (digest §10.2): `star`, the worst from the root's instance to another task's;
 * `all-to-all`, the worst over pairs of tasks. Tasks sharing an instance talk over its loopback (`rtt(x, x)`).
 * `instances` lists each task's instance in the job's task order; undefined for a job of one task (nothing to talk to).
 */
export function boundingRtt<I>(
  pattern: CommunicationPattern,
  rootIndex: number,
  instances: readonly I[],
  rtt: (a: I, b: I) => number,
): number | undefined {
  if (instances.length < 2) return undefined;
  let worst = 0;
  if (pattern === 'star') {
    const root = instances[rootIndex] as I;
    instances.forEach((inst, i) => {
      if (i !== rootIndex) worst = Math.max(worst, rtt(root, inst));
    });
    return worst;
  }
  // Distinct instances suffice: a pair of tasks on the same two instances has the same round trip.
  const distinct = [...new Set(instances)];
  if (distinct.length === 1) return rtt(distinct[0] as I, distinct[0] as I);
  for (let i = 0; i < distinct.length; i++)
    for (let j = i + 1; j < distinct.length; j++)
      worst = Math.max(worst, rtt(distinct[i] as I, distinct[j] as I));
  return worst;
}

/** P_job: the job's curve at its bounding round trip; 1 for a job of one task. */
export function jobPerformance<I>(
  sensitivity: LatencySensitivity,
  pattern: CommunicationPattern,
  rootIndex: number,
  instances: readonly I[],
  rtt: (a: I, b: I) => number,
): number {
  if (sensitivity === 'none' || instances.length < 2) return 1;
  const worst = boundingRtt(pattern, rootIndex, instances, rtt);
  return worst === undefined ? 1 : curveOf(sensitivity).at(worst);
}

/**
 * Share of a job's traffic that crosses zones: `star`, the non-root tasks in another zone than the root's; `all-to-all`,
 * the pairs of tasks in different zones. `sameZone` tells whether two instances share a zone (latencyDomain: a zone not
 * known counts as another zone, so billing is never underestimated).
 */
export function crossZoneShare<I>(
  pattern: CommunicationPattern,
  rootIndex: number,
  instances: readonly I[],
  sameZone: (a: I, b: I) => boolean,
): number {
  const n = instances.length;
  if (n < 2) return 0;
  const apart = (a: I, b: I): boolean => a !== b && !sameZone(a, b);
  let crossing = 0;
  if (pattern === 'star') {
    const root = instances[rootIndex] as I;
    instances.forEach((inst, i) => {
      if (i !== rootIndex && apart(root, inst)) crossing += 1;
    });
    return crossing / (n - 1);
  }
  for (let i = 0; i < n; i++)
    for (let j = i + 1; j < n; j++) if (apart(instances[i] as I, instances[j] as I)) crossing += 1;
  return crossing / ((n * (n - 1)) / 2);
}

/**
 * $/hour of a job's traffic across zones: each GiB that crosses is billed leaving one zone and entering the other
 * (AWS: "$0.01/GB in each direction"), so twice the per-direction price.
 */
export function crossZoneCostPerHour(gibPerHour: number, share: number, pricePerGiBEachWay: number): number {
  return gibPerHour * share * 2 * pricePerGiBEachWay;
}
