import { taskShareOf } from '../scheduler/expected-start.js';
import type { InstanceType } from '../core/catalog.js';
import { demandOn } from '../core/resources.js';
import { jobRate, type SimInstance, type SimTask } from './entities.js';

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

export class CostLedger {
  /** Scratch: one instance's share of its capacity per part (reused: this runs at every step of the clock). */
  private readonly shares = zeros();
  private readonly dollars = zeros();

  /**
   * Charge `seconds` of one billed instance of `type` at `pricePerHour`, in the state it held all that while: `up`
   * (its worker registered, so it can run tasks) with `occupants` holding its capacity. Both runtimes call it for each
   * instance they bill, as their clock moves.
   */
  accrue(
    type: InstanceType,
    pricePerHour: number,
    up: boolean,
    occupants: Iterable<SimTask>,
    seconds: number,
  ): void {
    if (seconds <= 0) return;
    const dollars = (pricePerHour * seconds) / 3600;
    if (!up) {
      this.dollars.bootAndShutdown += dollars;
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
    for (const part of COST_PARTS) this.dollars[part] += shares[part] * scale;
  }

  /** The engine's instances: those billed among `instances`, up once registered (lifecycle `running`). */
  accrueInstances(instances: Iterable<SimInstance>, seconds: number): void {
    for (const inst of instances)
      if (inst.billedFromSeconds !== undefined)
        this.accrue(inst.type, inst.pricePerHour, inst.lifecycle === 'running', inst.occupants, seconds);
  }

  breakdown(): CostBreakdown {
    return { ...this.dollars };
  }
}
