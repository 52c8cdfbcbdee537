import type { InstanceType } from '../core/catalog.js';
import type { Resources } from '../core/resources.js';
import { perHourToPerSecond } from '../core/units.js';
import { SeriesRecorder } from './series.js';
import type { RunSeries, RunUtilization } from './run-result.js';

/**
 * Billing and the run's time series. Instances are billed per second at their hourly price from
 * instantiate-complete to terminate-complete, with no minimum and no rounding (research digest §6 "Cost"), except a
 * spot instance EC2 reclaims in its first hour, which AWS charges nothing (core/spot.ts
 * `FREE_INTERRUPTED_SPOT_SECONDS`): it accrues in the cumulative cost while it runs, as any, and what it accrued leaves
 * it at the reclaim (the bill as known then, as the controller's month-to-date report counts it).
 */
export class FleetMeter {
  /** Σ price × billed seconds of instances already terminated: the run's total once all are gone. */
  private closedCost = 0;
  /** Everything billed up to `accruedTo` (terminated and running instances), for the series. */
  private accruedCost = 0;
  private accruedTo = 0;
  private costPerHourNow = 0;
  /**
   * Traffic across zones, $/hour from the last step on, and what it accrued: a part of the run's bill the cumulative
   * cost series carries (`costSoFar` stays the instances').
   */
  private trafficPerHour = 0;
  private trafficCost = 0;
  private peak = 0;
  private billed = 0;
  private migrations = 0;
  /** Instance-seconds billed in all, and on spot (closed instances only: the run's totals once all are gone). */
  private instanceSeconds = 0;
  private spotInstanceSeconds = 0;
  private readonly capacity: [number, number, number] = [0, 0, 0];
  private readonly allocated: [number, number, number] = [0, 0, 0];
  private readonly recorder = new SeriesRecorder();
  /**
   * ∫ allocated dt and ∫ capacity dt per dimension over the whole run, each sample's values held until the next: the
   * utilization of every sample, where the series keeps only a downsampled few for the charts.
   */
  private readonly usedIntegral: [number, number, number] = [0, 0, 0];
  private readonly provisionedIntegral: [number, number, number] = [0, 0, 0];
  /** When the last sample was taken; its values are `allocated` and `capacity` as they were then. */
  private lastSampleAt: number | undefined;
  private readonly sampledAllocated: [number, number, number] = [0, 0, 0];
  private readonly sampledCapacity: [number, number, number] = [0, 0, 0];

  /** Accrue the cost of the billed fleet up to `t`. */
  advanceTo(t: number): void {
    this.accruedCost += perHourToPerSecond(this.costPerHourNow) * (t - this.accruedTo);
    this.trafficCost += perHourToPerSecond(this.trafficPerHour) * (t - this.accruedTo);
    this.accruedTo = t;
  }

  /** Traffic across zones costs this much per hour from now until the next call (runs that report the network). */
  setTrafficPerHour(perHour: number): void {
    this.trafficPerHour = perHour;
  }

  /** Bill an instance of `type` at `pricePerHour` (its market's price). */
  startBilling(type: InstanceType, pricePerHour: number): void {
    this.billed += 1;
    this.costPerHourNow += pricePerHour;
    this.addTo(this.capacity, type.capacity, 1);
  }

  /**
   * An instance's billing stops after `billedSeconds` at `pricePerHour`. `billedNothing`: AWS charges nothing for it
   * (a spot instance EC2 reclaimed in its first hour): the cumulative cost gives back what it accrued, and its
   * seconds still count as run on spot.
   */
  stopBilling(
    type: InstanceType,
    pricePerHour: number,
    billedSeconds: number,
    spot: boolean,
    billedNothing = false,
  ): void {
    const dollars = perHourToPerSecond(pricePerHour) * billedSeconds;
    // Clamped: the steps it accrued in may add up to a hair less than its whole.
    if (billedNothing) this.accruedCost = Math.max(0, this.accruedCost - dollars);
    else this.closedCost += dollars;
    this.instanceSeconds += billedSeconds;
    if (spot) this.spotInstanceSeconds += billedSeconds;
    this.billed -= 1;
    this.costPerHourNow -= pricePerHour;
    if (this.billed === 0) this.costPerHourNow = 0; // no drift from adding and subtracting prices
    this.addTo(this.capacity, type.capacity, -1);
  }

  /** A task starts (+1) or stops (−1) holding `demand` of some instance's capacity. */
  allocate(demand: Resources, sign: 1 | -1): void {
    this.addTo(this.allocated, demand, sign);
  }

  countMigration(): void {
    this.migrations += 1;
  }

  get billedInstances(): number {
    return this.billed;
  }

  get totalCost(): number {
    return this.closedCost;
  }

  get costSoFar(): number {
    return this.accruedCost;
  }

  /** Share of the instance-hours billed on spot (0 before any instance was billed). */
  get spotShare(): number {
    return this.instanceSeconds > 0 ? this.spotInstanceSeconds / this.instanceSeconds : 0;
  }

  get peakCostPerHour(): number {
    return this.peak;
  }

  /** Record the state at `t` if it changed since the last sample (or always, when forced). */
  sample(t: number, force: boolean): void {
    // Every sample, one per time step: kept in place, not allocated.
    const dt = this.lastSampleAt === undefined ? 0 : t - this.lastSampleAt;
    for (let k = 0; k < 3; k++) {
      if (dt > 0) {
        this.usedIntegral[k] = (this.usedIntegral[k] as number) + (this.sampledAllocated[k] as number) * dt;
        this.provisionedIntegral[k] =
          (this.provisionedIntegral[k] as number) + (this.sampledCapacity[k] as number) * dt;
      }
      this.sampledAllocated[k] = this.allocated[k] as number;
      this.sampledCapacity[k] = this.capacity[k] as number;
    }
    this.lastSampleAt = t;
    // The peak is of the rates the fleet held, as sampled at the end of each instant: an instance billed from the
    // second another's billing ends is not paid for alongside it, whichever event the instant handled first.
    this.peak = Math.max(this.peak, this.costPerHourNow);
    this.recorder.record(
      {
        timeSeconds: t,
        cumulativeCost: this.accruedCost + this.trafficCost,
        costPerHour: this.costPerHourNow,
        runningInstances: this.billed,
        allocatedGpus: this.allocated[0],
        allocatedVcpus: this.allocated[1],
        allocatedMemoryGiB: this.allocated[2],
        capacityGpus: this.capacity[0],
        capacityVcpus: this.capacity[1],
        capacityMemoryGiB: this.capacity[2],
        migrations: this.migrations,
      },
      force,
    );
  }

  /** Time-weighted allocated ÷ provisioned GPUs, vCPUs and memory over every sample; null where nothing was. */
  utilization(): RunUtilization {
    const ratio = (k: number): number | null =>
      (this.provisionedIntegral[k] as number) > 0
        ? (this.usedIntegral[k] as number) / (this.provisionedIntegral[k] as number)
        : null;
    return { gpus: ratio(0), vcpus: ratio(1), memoryGiB: ratio(2) };
  }

  series(maxPoints: number): RunSeries {
    return this.recorder.result(maxPoints);
  }

  private addTo(target: [number, number, number], r: Resources, sign: 1 | -1): void {
    target[0] += sign * r[0];
    target[1] += sign * r[1];
    target[2] += sign * r[2];
  }
}
