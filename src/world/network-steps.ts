import { isLatencySensitive } from '../core/latency-curves.js';
import { refreshNetwork } from './progress.js';
import { RANK_EFFECT, type WorldState } from './world-state.js';

/**
 * The simulated network's part of the event loop: ticks that re-evaluate the jobs whose round trips vary, and the
 * traffic across zones metered from step to step.
 */
export class NetworkSteps {
  /** Latency-sensitive jobs' round trips vary (noise or episodes): ticks re-evaluate them every noise interval. */
  private readonly ticks: boolean;
  private tickPending = false;

  constructor(
    private readonly state: WorldState,
    /** Traffic across zones is metered for the cumulative cost series (runs that report the network). */
    private readonly metersTraffic: boolean,
  ) {
    const network = state.network;
    this.ticks =
      network !== undefined &&
      network.varies &&
      state.jobs.some(
        (j) =>
          j.tasks.length > 1 &&
          j.spec.network !== undefined &&
          isLatencySensitive(j.spec.network.sensitivity),
      );
  }

  /** Round trips change at the start of every noise interval: re-evaluate the jobs they slow down. */
  onTick(): void {
    this.tickPending = false;
    refreshNetwork(this.state);
    this.scheduleTick();
  }

  /** The next tick, at the next noise interval's start, while jobs are live (arrivals start it again). */
  scheduleTick(): void {
    const network = this.state.network;
    if (!this.ticks || this.tickPending || network === undefined || this.state.liveJobs.size === 0) return;
    this.tickPending = true;
    const at = network.slotStart(this.state.now) + network.config.noiseIntervalSeconds;
    this.state.queue.push({ kind: 'network-tick', timeSeconds: at, rank: RANK_EFFECT });
  }

  /**
   * The traffic across zones' rate from now until the next step: that of the jobs progressing (integrateProgress
   * bills a job's traffic while it has throughput).
   */
  observeCrossZone(): void {
    if (!this.metersTraffic) return;
    let perHour = 0;
    for (const job of this.state.liveJobs.values())
      if (job.throughput > 0) perHour += job.crossZoneCostPerHour;
    this.state.meter.setTrafficPerHour(perHour);
  }
}
