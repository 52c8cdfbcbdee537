import type { Catalog } from '../core/catalog.js';
import type { Admission, AdmissionInfo } from '../queue/admission.js';
import { placeWaitingJobs, type PaidInstanceFacts } from '../round/place-waiting.js';
import type { StartTaskAction } from '../scheduler/actions.js';
import { PriceBook } from '../scheduler/reservation-price.js';
import type { CommandIssuer } from './commands.js';
import { remainingIterations, type SimJob } from './entities.js';
import { buildSnapshot } from './scheduler-view.js';
import type { WorldState } from './world-state.js';

/**
 * The engine's side of placement between rounds (round/place-waiting.ts): at an arrival or a completion, the world's
 * waiting jobs and paid instances are read as facts, placed by the shared rule, and their starts issued like a plan's.
 */
export class BetweenRoundsPlacer {
  private readonly prices: PriceBook;
  /** What the last round's admission found (round/between-rounds.ts `capHoldsJobsBack`). */
  private capHoldsJobsBack = false;

  constructor(
    private readonly state: WorldState,
    private readonly commands: CommandIssuer,
    private readonly admission: Admission,
    private readonly jobInfo: AdmissionInfo,
    catalog: Catalog,
    private readonly bind: boolean,
    private readonly expectedRate?: (key: string, others: readonly string[]) => number,
  ) {
    this.prices = new PriceBook(catalog);
  }

  /** What a round's admission decided: whether it left jobs waiting for the caps (RoundOutcome.capHoldsJobsBack). */
  noteRound(capHoldsJobsBack: boolean): void {
    this.capHoldsJobsBack = capHoldsJobsBack;
  }

  /** Place what fits now; returns how many jobs were placed. */
  place(): number {
    if (!this.capHoldsJobsBack) return 0;
    const waiting = [...this.state.liveJobs.values()].filter(isWaiting);
    if (waiting.length === 0) return 0;
    // A job's bound on an interruption's delay is checked on the job as a round's snapshot has it.
    const scheduled = waiting.some((j) => j.spec.spotMaxDelaySeconds !== undefined)
      ? new Map(
          buildSnapshot(this.state.now, waiting, this.state.assignable.values()).jobs.map((s) => [s.id, s]),
        )
      : undefined;
    const placed = placeWaitingJobs({
      nowSeconds: this.state.now,
      jobs: waiting.map((j) => ({
        id: j.spec.id,
        taskSeconds: remainingIterations(j) / j.spec.fullThroughput,
        tasks: j.tasks.map((t) => ({ id: t.id, demand: t.spec.demand, key: t.key })),
        ...(j.spec.spot === 'never' ? { onDemandOnly: true } : {}),
        ...(j.spec.spotMaxDelaySeconds === undefined ? {} : { scheduled: scheduled?.get(j.spec.id) }),
      })),
      instances: this.paidInstances(),
      prices: this.prices,
      // Without the network: admission reads no round-trip times.
      admitted: () =>
        this.admission.admissibleNow(
          buildSnapshot(this.state.now, this.state.liveJobs.values(), this.state.assignable.values()),
          this.jobInfo,
        ),
      bind: this.bind,
      expectedRate: this.expectedRate,
      capHoldsJobsBack: this.capHoldsJobsBack,
    });
    const actions: StartTaskAction[] = [];
    for (const p of placed) {
      this.state.log('placed-between-rounds', {
        jobId: p.jobId,
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

  /** Instances in the plan, paid for or coming up, with the tasks committed to them and still on them. */
  private paidInstances(): PaidInstanceFacts[] {
    const out: PaidInstanceFacts[] = [];
    for (const inst of this.state.assignable.values()) {
      if (inst.lifecycle === 'terminating' || inst.lifecycle === 'terminated') continue;
      const ready = inst.lifecycle === 'running' ? this.state.now : inst.readyAtSeconds;
      if (ready === undefined) continue; // a launch held back by a cap: not paid for yet
      const taken = new Set([...inst.committed, ...inst.occupants]);
      out.push({
        id: inst.id,
        type: inst.type,
        readyAtSeconds: ready,
        tasks: [...taken].map((t) => ({ demand: t.spec.demand, key: t.key })),
        ...(inst.market === 'spot' ? { spot: true } : {}),
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
