import { taskShareOf } from '../scheduler/expected-start.js';
import type { InstanceType } from '../core/catalog.js';
import { demandOn } from '../core/resources.js';
import { jobRate, type SimInstance, type SimTask } from './entities.js';
import { FREE_INTERRUPTED_SPOT_SECONDS } from '../core/spot.js';

/**
 * Where a run's instance dollars went. Every billed second of an instance is split by what its capacity was doing:
 * each task on it takes its share of the instance's $/h (its dominant share of the capacity, as barrier-idle cost
 * counts it; scaled down when the shares add up past 1), and the rest is idle room.
 */
export const COST_PARTS = [
  /** Tasks of progressing jobs, at the rate they progress (the job's normalized throughput). */
  'working',
  /**
   * Tasks of progressing jobs, for the throughput co-location took from them (1 − that rate; what network latency
   * takes from latency-sensitive jobs stays in `working`).
   */
  'slowdown',
  /** Tasks running while their job does not progress yet: its init delay, or siblings not yet running (gang). */
  'starting',
  /** Tasks fetching or building their image and restoring a checkpoint before they run. */
  'preparing',
  /** Tasks checkpointing and uploading to move or stop. */
  'checkpointing',
  /** Billed while not yet able to run a task (worker starting, registering) or while shutting down. */
  'bootAndShutdown',
  /** Room no task held. */
  'idle',
] as const;
export type CostPart = (typeof COST_PARTS)[number];

/** Dollars per part; they add up to the instances' bill (the run's total cost less traffic across zones). */
export type CostBreakdown = Readonly<Record<CostPart, number>>;

/** The task's dominant share of an instance of `type` (as barrier-idle cost counts it). */
function shareOn(task: SimTask, type: InstanceType): number {
  const d = demandOn(task.spec.demand, type.family);
  if (d === undefined) throw new Error(`task ${task.id} cannot run on family ${type.family}`);
  return taskShareOf(d, type.capacity);
}

function partOf(task: SimTask): CostPart | 'progressing' {
  switch (task.state) {
    case 'launching':
      return 'preparing';
    case 'running':
      return task.job.active ? 'progressing' : 'starting';
    case 'killing':
    case 'uploading':
      return 'checkpointing';
    default:
      return 'idle';
  }
}

function zeros(): Record<CostPart, number> {
  return Object.fromEntries(COST_PARTS.map((part) => [part, 0])) as Record<CostPart, number>;
}

/** A spot instance's dollars while EC2 may still reclaim it free, and the seconds billed so far. */
interface Provisional {
  seconds: number;
  readonly dollars: Record<CostPart, number>;
}

export class CostLedger {
  /** Scratch: one instance's share of its capacity per part (reused: this runs at every step of the clock). */
  private readonly shares = zeros();
  private readonly dollars = zeros();
  /**
   * Spot instances in their first billed hour: AWS charges nothing for one EC2 reclaims then (core/spot.ts
   * `FREE_INTERRUPTED_SPOT_SECONDS`), so their dollars are kept apart, in the breakdown until `forgive` takes them out,
   * and joined to the rest once the hour is over. One its owner ends within the hour stays here, counted.
   */
  private readonly provisional = new Map<object, Provisional>();

  /**
   * Charge `seconds` of one billed instance of `type` at `pricePerHour`, in the state it held all that while: `up`
   * (its worker registered, so it can run tasks) with `occupants` holding its capacity. Both runtimes call it for each
   * instance they bill, as their clock moves; `spotInstance` names a spot instance (any object standing for it), whose
   * dollars of its first hour `forgive` can take back.
   */
  accrue(
    type: InstanceType,
    pricePerHour: number,
    up: boolean,
    occupants: Iterable<SimTask>,
    seconds: number,
    spotInstance?: object,
  ): void {
    if (seconds <= 0) return;
    if (spotInstance === undefined) {
      this.charge(this.dollars, type, pricePerHour, up, occupants, seconds);
      return;
    }
    let kept = this.provisional.get(spotInstance);
    if (kept === undefined) {
      kept = { seconds: 0, dollars: zeros() };
      this.provisional.set(spotInstance, kept);
    }
    this.charge(kept.dollars, type, pricePerHour, up, occupants, seconds);
    kept.seconds += seconds;
    // Billed an hour, it was launched over an hour ago: a reclaim now is charged.
    if (kept.seconds < FREE_INTERRUPTED_SPOT_SECONDS) return;
    for (const part of COST_PARTS) this.dollars[part] += kept.dollars[part];
    this.provisional.delete(spotInstance);
  }

  /**
   * EC2 reclaimed the spot instance in its first hour: AWS charges nothing for it, so none of its dollars stay in the
   * breakdown (FleetMeter's `billedNothing` takes them out of the total). Nothing changes for one billed an hour.
   */
  forgive(spotInstance: object): void {
    this.provisional.delete(spotInstance);
  }

  /** Add `seconds` of the instance to `into`, split by what its capacity was doing. */
  private charge(
    into: Record<CostPart, number>,
    type: InstanceType,
    pricePerHour: number,
    up: boolean,
    occupants: Iterable<SimTask>,
    seconds: number,
  ): void {
    const dollars = (pricePerHour * seconds) / 3600;
    if (!up) {
      into.bootAndShutdown += dollars;
      return;
    }
    // One pass: each part's share of the capacity, then the instance's dollars split by them (the shares scaled down
    // when they add up past 1, the rest idle).
    const shares = this.shares;
    for (const part of COST_PARTS) shares[part] = 0;
    let held = 0;
    for (const task of occupants) {
      const share = shareOn(task, type);
      held += share;
      const part = partOf(task);
      if (part !== 'progressing') {
        shares[part] += share;
        continue;
      }
      // The job's co-location rate, as progress.ts runs it (its slowest task's; a synchronous job runs at its pace).
      const rate = Math.min(1, Math.max(0, jobRate(task.job)));
      shares.working += share * rate;
      shares.slowdown += share * (1 - rate);
    }
    shares.idle += Math.max(0, 1 - held);
    const scale = dollars / Math.max(1, held);
    for (const part of COST_PARTS) into[part] += shares[part] * scale;
  }

  /** The engine's instances: those billed among `instances`, up once registered (lifecycle `running`). */
  accrueInstances(instances: Iterable<SimInstance>, seconds: number): void {
    for (const inst of instances)
      if (inst.billedFromSeconds !== undefined)
        this.accrue(
          inst.type,
          inst.pricePerHour,
          inst.lifecycle === 'running',
          inst.occupants,
          seconds,
          inst.market === 'spot' ? inst : undefined,
        );
  }

  breakdown(): CostBreakdown {
    const total = { ...this.dollars };
    for (const kept of this.provisional.values())
      for (const part of COST_PARTS) total[part] += kept.dollars[part];
    return total;
  }
}
