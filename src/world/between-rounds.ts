import type { Catalog } from '../core/catalog.js';
import type { Resources } from '../core/resources.js';
import type { Admission, QueueDecision } from '../queue/admission.js';
import { orderQueue } from '../queue/ordering.js';
import {
  capHoldsJobsBack,
  placeBetweenRounds,
  type PaidInstance,
  type WaitingJob,
} from '../round/between-rounds.js';
import type { StartTaskAction } from '../scheduler/actions.js';
import { PriceBook } from '../scheduler/reservation-price.js';
import type { CommandIssuer } from './commands.js';
import { remainingIterations, taskDemandOn, type SimJob } from './entities.js';
import type { WorldState } from './world-state.js';

/**
 * The engine's side of placement between rounds (round/between-rounds.ts): at an arrival or a completion, waiting
 * jobs in the queue's order are placed on capacity already paid for, and their starts issued like a plan's.
 */
export class BetweenRoundsPlacer {
  private readonly prices: PriceBook;
  /** What the last round's admission found (round/between-rounds.ts `capHoldsJobsBack`). */
  private capHoldsJobsBack = false;

  constructor(
    private readonly state: WorldState,
    private readonly commands: CommandIssuer,
    private readonly admission: Admission,
    catalog: Catalog,
    private readonly bind: boolean,
    private readonly expectedRate?: (key: string, others: readonly string[]) => number,
  ) {
    this.prices = new PriceBook(catalog);
  }

  /** What a round's admission decided: whether it left jobs waiting for the next. */
  noteRound(queue: QueueDecision): void {
    this.capHoldsJobsBack = capHoldsJobsBack(queue.result.queued);
  }

  /** Place what fits now; returns how many jobs were placed. */
  place(): number {
    if (!this.capHoldsJobsBack) return 0;
    const now = this.state.now;
    const instances = this.paidInstances();
    if (instances.length === 0) return 0;
    const waiting = [...this.state.liveJobs.values()].filter(isWaiting);
    if (waiting.length === 0) return 0;
    const byId = new Map(waiting.map((j) => [j.spec.id, j]));
    const perTask = (j: SimJob): number => remainingIterations(j) / j.spec.fullThroughput;
    const classes = this.admission.config.classes;
    const ordered = orderQueue(
      classes.length === 1 ? (classes[0] as (typeof classes)[0]).ordering : 'fifo',
      waiting.map((j) => ({
        id: j.spec.id,
        arrivalSeconds: j.spec.arrivalSeconds,
        remainingWorkSeconds: perTask(j) * j.tasks.length,
        job: j,
      })),
      now,
      this.admission.config.ordering,
    );
    const jobs: WaitingJob[] = ordered.map((o) => ({
      id: o.id,
      tasks: o.job.tasks.map((t) => ({
        id: t.id,
        demand: t.spec.demand,
        reservationPricePerHour: this.prices.minType(t.spec.demand)?.costPerHour,
        key: t.key,
      })),
      taskSeconds: perTask(o.job),
    }));
    const placed = placeBetweenRounds({
      nowSeconds: now,
      jobs,
      instances,
      bind: this.bind,
      launchDelaySeconds: (job) => this.launchDelayOf(byId.get(job.id) as SimJob),
      launchCostPerHour: (job) =>
        job.tasks.reduce((s, t) => s + (this.prices.minType(t.demand)?.costPerHour ?? 0), 0),
      expectedRate: this.expectedRate,
      capHoldsJobsBack: this.capHoldsJobsBack,
    });
    const actions: StartTaskAction[] = [];
    for (const p of placed) {
      const job = byId.get(p.jobId) as SimJob;
      this.state.log('placed-between-rounds', {
        jobId: job.spec.id,
        ...(p.bindChoice === undefined ? {} : { bindChoice: p.bindChoice }),
      });
      for (const pl of p.placements)
        actions.push({
          kind: 'start-task',
          jobId: p.jobId,
          taskId: pl.taskId,
          instanceId: pl.instanceId,
          instanceIsNew: false,
          afterStopOf: [],
          capacityFrom: [],
        });
    }
    if (actions.length > 0) this.commands.apply(actions);
    return placed.length;
  }

  /** Acquisition + setup of a job's reservation-price instance (what a launch made now would take). */
  private launchDelayOf(job: SimJob): number {
    const t = this.prices.minType((job.tasks[0] as SimJob['tasks'][0]).spec.demand);
    if (t === undefined) return 0;
    const d = t.delays;
    return d.instantiateSeconds + d.workerStartSeconds + d.workerRegisterSeconds;
  }

  /** Instances in the plan with room left after their committed tasks and occupants. */
  private paidInstances(): PaidInstance[] {
    const out: PaidInstance[] = [];
    for (const inst of this.state.assignable.values()) {
      if (inst.lifecycle === 'terminating' || inst.lifecycle === 'terminated') continue;
      const ready = inst.lifecycle === 'running' ? this.state.now : inst.readyAtSeconds;
      if (ready === undefined) continue; // a launch held back by a cap: not paid for yet
      const taken = new Set([...inst.committed, ...inst.occupants]);
      let free: Resources = inst.type.capacity;
      for (const t of taken) {
        const d = taskDemandOn(t, inst);
        free = [free[0] - d[0], free[1] - d[1], free[2] - d[2]];
      }
      if (free[1] <= 0 || free[2] <= 0) continue;
      out.push({
        id: inst.id,
        family: inst.type.family,
        capacity: inst.type.capacity,
        free,
        readyAtSeconds: ready,
        costPerHour: inst.type.costPerHour,
        tasks: [...taken].map((t) => ({
          key: t.key,
          reservationPricePerHour: this.prices.minType(t.spec.demand)?.costPerHour ?? 0,
        })),
      });
    }
    return out;
  }
}

/** Waiting in the queue: arrived (or sent back), nothing committed, every task stopped or never started. */
function isWaiting(job: SimJob): boolean {
  return (
    job.status === 'queued' &&
    job.tasks.every((t) => t.committed === undefined && (t.state === 'queued' || t.state === 'stopped'))
  );
}
