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

/** The paper's four fitted curves (digest §3.2). */
export const LATENCY_PRESETS = ['memcached', 'strads', 'spark', 'tensorflow'] as const;
export type LatencyPreset = (typeof LATENCY_PRESETS)[number];

/** A `[latencyMicroseconds, relativePerformance]` point of a user's own curve. */
export type LatencyPoint = readonly [number, number];

/**
 * How a job's performance falls with the round trip between its tasks: one of the paper's curves, `none` (the job
 * does not care: relative performance 1 everywhere), or a user table of points.
 */
export type LatencySensitivity = 'none' | LatencyPreset | readonly LatencyPoint[];

/**
 * Which round trips bound the job: `star`, the root's to every other task (NoMora's model: a server with its clients,
 * a parameter server with its workers); `all-to-all`, the worst pair of tasks (e.g. ring all-reduce).
 */
export type CommunicationPattern = 'star' | 'all-to-all';

/** A job's network declaration as specs and traces write it: the root is named by its task name. */
export interface NetworkDeclaration {
  readonly sensitivity: LatencySensitivity;
  readonly pattern: CommunicationPattern;
  /** The root task's name; default the job's first task. */
  readonly rootTask?: string | undefined;
  /** GiB per hour the job's tasks exchange (what crosses zones is billed); 0 when unknown. */
  readonly gibPerHour: number;
}

/** A job's network declaration as the scheduler sees it: the root is a task id of the snapshot. */
export interface JobNetwork {
  readonly sensitivity: LatencySensitivity;
  readonly pattern: CommunicationPattern;
  /** The root task's id; default the job's first task. */
  readonly rootTaskId?: string | undefined;
  readonly gibPerHour: number;
}
