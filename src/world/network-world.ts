import { latencyDomain, pairKey, type PlacedInstance } from '../core/latency-model.js';
import type { InstancePlacement } from '../core/network.js';
import { hashUnit, Rng } from '../core/random.js';
import type { NetworkConfig } from './network-config.js';

/**
 * The simulator's hidden truth about the network (research digest §10.5): an instance pair's round trip is its
 * domain's base value times NoMora's noise (§6.1: U[0.8, 1.2] between domains, U[0.5, 1] within a placement group),
 * drawn anew every noise interval, times the worst congestion episode of either instance. Round trips are constant
 * within a noise interval, so a job's throughput stays piecewise constant and its progress is integrated exactly.
 * Every value depends only on the seed, the pair and the time slot (a hash, not a stream), so the truth is the same
 * whatever asks for it first. Schedulers never see it, only the windows' maxima workers would measure.
 */
export class NetworkWorld {
  private readonly episodes = new Map<string, InstanceEpisodes>();
  /** Zone of each placement group that has had an instance (a cluster placement group lies in one zone). */
  private readonly groupZones = new Map<string, string>();

  constructor(
    readonly config: NetworkConfig,
    private readonly seed: number,
    /** $ per GiB crossing zones, each direction (the catalog's). */
    readonly crossZonePricePerGiB: number,
  ) {}

  /**
   * Where a new instance lands: in its placement group's zone if the group has one, else in the zone asked for, else
   * (no preference, as EC2 does without a subnet) in a zone drawn for it. A zone the network does not have is not
   * honoured (drawn instead, as if none were asked): the simulated region is the network's zones, for every
   * scheduler alike, so none runs or buys spot where the others cannot.
   */
  place(instanceId: string, asked: InstancePlacement | undefined): InstancePlacement {
    const group = asked?.placementGroup;
    const zone =
      this.settledZone(asked) ??
      (this.config.zones[
        Math.floor(hashUnit(this.seed, 'zone', instanceId) * this.config.zones.length)
      ] as string);
    if (group !== undefined && !this.groupZones.has(group)) this.groupZones.set(group, zone);
    return group === undefined ? { zone } : { zone, placementGroup: group };
  }

  /**
   * The zone a launch asked at `asked` lands in whatever is drawn: its placement group's once the group has one, else
   * the zone asked for when the network has it; undefined when it would be drawn. A spot launch is priced at this
   * zone's pool, so it must be known before `place`.
   */
  settledZone(asked: InstancePlacement | undefined): string | undefined {
    const group = asked?.placementGroup;
    const zone = asked?.zone;
    return (
      (group === undefined ? undefined : this.groupZones.get(group)) ??
      (zone !== undefined && this.config.zones.includes(zone) ? zone : undefined)
    );
  }

  /** Remember where an instance is (a world imported for a prediction). */
  adopt(placement: InstancePlacement | undefined): void {
    const group = placement?.placementGroup;
    if (group !== undefined && placement?.zone !== undefined && !this.groupZones.has(group))
      this.groupZones.set(group, placement.zone);
  }

  /** The start of the noise interval holding `t`: round trips are constant within it. */
  slotStart(t: number): number {
    const i = this.config.noiseIntervalSeconds;
    return Math.floor(t / i + 1e-9) * i;
  }

  /** The true round trip (µs) between two instances at time `t`. */
  rtt(a: PlacedInstance, b: PlacedInstance, t: number): number {
    const domain = latencyDomain(a, b);
    const base = this.config.domainRtts[domain];
    if (domain === 'same-instance') return base;
    const slot = Math.floor(t / this.config.noiseIntervalSeconds + 1e-9);
    const [lo, hi] =
      domain === 'placement-group' ? this.config.withinGroupNoise : this.config.betweenDomainsNoise;
    const noise = lo + (hi - lo) * hashUnit(this.seed, 'noise', pairKey(a.id, b.id), slot);
    const at = slot * this.config.noiseIntervalSeconds;
    return base * noise * Math.max(this.congestion(a.id, at), this.congestion(b.id, at));
  }

  /** What a worker measures: the maximum round trip over the window ending at `now` (NoMora: the maximum, ECMP). */
  measuredMax(a: PlacedInstance, b: PlacedInstance, now: number): number {
    const interval = this.config.noiseIntervalSeconds;
    const from = Math.max(0, now - this.config.measurementWindowSeconds);
    let worst = this.rtt(a, b, now);
    // Earlier slots that overlap the window (a slot [t, t + interval) overlaps it when t + interval > from).
    for (let t = this.slotStart(now) - interval; t + interval > from && t >= 0; t -= interval)
      worst = Math.max(worst, this.rtt(a, b, t));
    return worst;
  }

  /** Whether congestion episodes can happen at all (ticks are needed only for noise or episodes). */
  get varies(): boolean {
    const [lo1, hi1] = this.config.withinGroupNoise;
    const [lo2, hi2] = this.config.betweenDomainsNoise;
    return lo1 !== hi1 || lo2 !== hi2 || this.config.episodesPerInstancePerDay > 0;
  }

  /** The congestion factor of an instance at `t` (1 outside its episodes). */
  private congestion(instanceId: string, t: number): number {
    if (this.config.episodesPerInstancePerDay <= 0) return 1;
    let e = this.episodes.get(instanceId);
    if (e === undefined) {
      e = new InstanceEpisodes(new Rng(Math.floor(hashUnit(this.seed, 'episodes', instanceId) * 4294967296)));
      this.episodes.set(instanceId, e);
    }
    return e.factorAt(t, this.config);
  }
}

interface Episode {
  readonly start: number;
  readonly end: number;
  readonly factor: number;
}

/** One instance's congestion episodes, drawn lazily in time order from its own stream. */
class InstanceEpisodes {
  private readonly list: Episode[] = [];
  private nextStart = -1;

  constructor(private readonly rng: Rng) {}

  factorAt(t: number, config: NetworkConfig): number {
    const meanGap = 86_400 / config.episodesPerInstancePerDay;
    if (this.nextStart < 0) this.nextStart = this.rng.exponential(meanGap);
    const [d0, d1] = config.episodeSeconds;
    const [f0, f1] = config.episodeFactor;
    while (this.nextStart <= t) {
      const start: number = this.nextStart;
      this.list.push({ start, end: start + this.rng.uniform(d0, d1), factor: this.rng.uniform(f0, f1) });
      this.nextStart = start + this.rng.exponential(meanGap);
    }
    let factor = 1;
    for (let i = this.list.length - 1; i >= 0; i--) {
      const e = this.list[i] as Episode;
      if (e.start + d1 < t) break; // it and every earlier one ended before t
      if (e.start <= t && t < e.end) factor = Math.max(factor, e.factor);
    }
    return factor;
  }
}
