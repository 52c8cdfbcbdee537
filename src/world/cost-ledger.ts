import { taskShareOf } from '../scheduler/expected-start.js';
import { taskDemandOn, type SimInstance, type SimTask } from './entities.js';

/**
 * Where a run's instance dollars went. Every billed second of an instance is split by what its capacity was doing:
 * each task on it takes its share of the instance's $/h (its dominant share of the capacity, as barrier-idle cost
 * counts it; scaled down when the shares add up past 1), and the rest is idle room.
 */
export const COST_PARTS = [
  /** Tasks of progressing jobs, at the rate they progress (the job's normalized throughput). */
  'working',
  /** Tasks of progressing jobs, for the throughput co-location took from them (1 − that rate). */
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

/** A progressing job's normalized throughput: its slowest running task's (a synchronous job runs at its pace). */
function jobRate(task: SimTask): number {
  let rate = 1;
  for (const t of task.job.tasks) if (t.state === 'running') rate = Math.min(rate, t.rate);
  return Math.max(0, rate);
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

export class CostLedger {
  private readonly dollars = Object.fromEntries(COST_PARTS.map((part) => [part, 0])) as Record<
    CostPart,
    number
  >;

  /** Charge `seconds` of the billed instances among `instances`, in the state they held all that while. */
  accrue(instances: Iterable<SimInstance>, seconds: number): void {
    if (seconds <= 0) return;
    for (const inst of instances) {
      if (inst.billedFromSeconds === undefined) continue;
      const dollars = (inst.pricePerHour * seconds) / 3600;
      if (inst.lifecycle !== 'running') {
        this.dollars.bootAndShutdown += dollars;
        continue;
      }
      let held = 0;
      for (const task of inst.occupants) held += taskShareOf(taskDemandOn(task, inst), inst.type.capacity);
      const scale = held > 1 ? dollars / held : dollars;
      for (const task of inst.occupants) {
        const share = taskShareOf(taskDemandOn(task, inst), inst.type.capacity) * scale;
        const part = partOf(task);
        if (part !== 'progressing') {
          this.dollars[part] += share;
          continue;
        }
        const rate = Math.min(1, jobRate(task));
        this.dollars.working += share * rate;
        this.dollars.slowdown += share * (1 - rate);
      }
      if (held < 1) this.dollars.idle += dollars * (1 - held);
    }
  }

  breakdown(): CostBreakdown {
    return { ...this.dollars };
  }
}
