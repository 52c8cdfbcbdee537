/**
 * Where instances sit on the network and what was measured between them: the shared vocabulary of latency-aware
 * placement (NoMora, research digest nomora-latency-placement.md §10). The scheduler places by these; the cloud
 * edge creates them (zones, cluster placement groups); workers measure round trips between instances.
 */

/** Latency domains, nearest first (digest §10.2): same instance, same cluster placement group, same zone, other zone. */
export type LatencyDomain = 'same-instance' | 'placement-group' | 'zone' | 'cross-zone';

/** Where an instance is (or, in a plan, is to be launched). Unset fields: not known / no preference. */
export interface InstancePlacement {
  readonly zone?: string | undefined;
  /** A cluster placement group (EC2 strategy `cluster`). */
  readonly placementGroup?: string | undefined;
}

/** Round trips measured by a worker from one instance to another over a window (NoMora uses the maximum: ECMP). */
export interface MeasuredRtt {
  readonly fromInstanceId: string;
  readonly toInstanceId: string;
  readonly maxMicroseconds: number;
  readonly p99Microseconds: number;
  /** When the window ended (the snapshot's clock, seconds). */
  readonly atSeconds: number;
}
