import { setupSeconds, type Catalog, type InstanceType } from '../core/catalog.js';
import { groupBy } from '../core/group.js';
import { UNKNOWN_DURATION_SECONDS, type Admission } from '../queue/admission.js';
import type { BetweenRoundsPlacement } from '../round/between-rounds.js';
import { placeWaitingJobs, type PaidInstanceFacts, type WaitingJobFacts } from '../round/place-waiting.js';
import { PriceBook } from '../scheduler/reservation-price.js';
import type { Clock } from './clock.js';
import type { BetweenRoundsStart } from './reconcile/plan-intents.js';
import type { ControllerScheduler } from './scheduler-state.js';
import type { ControllerLogger } from './seams.js';
import { admissionInfo } from './admission-info.js';
import { buildSnapshot, readSnapshotInputs } from './snapshot.js';
import type { InstanceRecord, JsonValue, StateStore } from './state-store.js';

/**
 * The controller's side of placement between rounds (round/place-waiting.ts, the rule the simulator follows too):
 * after a submission or a job's end, while the last round's admission kept jobs out for the caps, waiting jobs whose
 * tasks fit on capacity already paid for are placed at once, each task in one attempt on the slot with the earliest
 * expected start, instead of waiting for the next round. Their starts are written as a round's would be
 * (reconcile/plan-intents.ts), so they are carried out by the same gates, co-start included, and the next round's
 * plan sees them placed. Paid capacity adds nothing to the fleet's $/hour or instance count: the caps hold.
 */

export interface BetweenRoundsPlacementDeps {
  readonly store: StateStore;
  readonly clock: Clock;
  /** The current catalog (a price refresh replaces it). */
  readonly catalog: () => Catalog;
  readonly admission: Admission;
  /** The scheduler planning the rounds: its learned co-location rates bound what a placement may add. */
  readonly scheduler: () => ControllerScheduler;
  /** Also wait for an instance still coming up when it is ready no later than a launch would be (digest E2). */
  readonly bind: boolean;
  /**
   * Whether an instance's worker has registered (TaskControl.workerRegistered): the store's `running` is the cloud's
   * state, and a task starts only once its worker has registered. Absent where no worker runs tasks (a running
   * instance is ready), as the start gate has it.
   */
  readonly workerRegistered?: ((instance: InstanceRecord) => boolean) | undefined;
  readonly apply: (jobs: readonly BetweenRoundsStart[]) => void;
  readonly log: ControllerLogger;
}

/**
 * Passes that read the store run at most this often. Each reads every live job and task (a snapshot), and a burst of
 * submissions asks for one per submission: 400 submitted at about 45 a second under a binding cap spent a quarter of
 * the controller's CPU on those reads (`bench controller --cpu-prof`). A second's delay is nothing against the round
 * period this placement saves, and the burst is placed together.
 */
export const PLACEMENT_MIN_GAP_SECONDS = 1;

export class BetweenRoundsPlacer {
  /** What the last round's admission found; false until the first round (nothing is known to wait for the caps). */
  private capHoldsJobsBack = false;
  private requested = false;
  private prices: PriceBook | undefined;
  /** When the last pass read the store. */
  private lastPassSeconds: number | undefined;

  constructor(private readonly deps: BetweenRoundsPlacementDeps) {}

  /** What a round's admission decided: whether it left jobs waiting for the caps (RoundOutcome.capHoldsJobsBack). */
  noteRound(capHoldsJobsBack: boolean): void {
    this.capHoldsJobsBack = capHoldsJobsBack;
  }

  /**
   * A job arrived or capacity was freed: look at the next pass. Answers whether the loop must wake for it: not when a
   * pass is asked for already (the loop sleeps no longer than until it is due), so a burst wakes it once.
   */
  request(): boolean {
    if (!this.capHoldsJobsBack || this.requested) return false;
    this.requested = true;
    return true;
  }

  /** When the pass asked for may run (PLACEMENT_MIN_GAP_SECONDS after the last); undefined when none is asked for. */
  get dueAtSeconds(): number | undefined {
    if (!this.requested) return undefined;
    return this.lastPassSeconds === undefined
      ? Number.NEGATIVE_INFINITY
      : this.lastPassSeconds + PLACEMENT_MIN_GAP_SECONDS;
  }

  /**
   * Place what was asked for and fits; returns the ids of the jobs placed. A pass asked for sooner than
   * PLACEMENT_MIN_GAP_SECONDS after the last waits (stays asked for) unless `atOnce`: a round places first so that
   * its plan sees the placements, as the simulator's round sees its own.
   */
  placeIfRequested(atOnce = false): string[] {
    if (!this.requested) return [];
    const now = this.deps.clock.nowSeconds();
    if (!atOnce && now < (this.dueAtSeconds as number)) return [];
    this.requested = false;
    if (!this.capHoldsJobsBack) return [];
    const catalog = this.deps.catalog();
    if (this.prices?.catalog !== catalog) this.prices = new PriceBook(catalog);
    this.lastPassSeconds = now;
    const inputs = readSnapshotInputs(this.deps.store, now);
    const snapshot = buildSnapshot(inputs);
    const tasksByJob = groupBy(snapshot.tasks, (t) => t.jobId);
    const jobs: WaitingJobFacts[] = [];
    for (const job of snapshot.jobs) {
      const tasks = tasksByJob.get(job.id) ?? [];
      if (!job.reconfigurable || tasks.length === 0 || tasks.some((t) => t.instanceId !== undefined))
        continue;
      jobs.push({
        id: job.id,
        taskSeconds: job.expectedRemainingSeconds ?? UNKNOWN_DURATION_SECONDS,
        tasks: tasks.map((t) => ({ id: t.id, demand: t.demand, key: t.key })),
        ...(job.spot === 'never' ? { onDemandOnly: true } : {}),
        ...(job.spotMaxDelaySeconds === undefined ? {} : { scheduled: job }),
      });
    }
    if (jobs.length === 0) return [];
    const types = new Map(catalog.types.map((t) => [t.name, t]));
    const records = new Map(inputs.instances.map((i) => [i.id, i]));
    const taskById = new Map(snapshot.tasks.map((t) => [t.id, t]));
    const instances: PaidInstanceFacts[] = [];
    for (const inst of snapshot.instances) {
      const type = types.get(inst.typeName);
      const record = records.get(inst.id);
      if (type === undefined || record === undefined) continue;
      // A launch not yet made is not paid for: only instances the cloud is bringing up or running count.
      if (inst.state === 'launching' && record.launchedAtSeconds === undefined) continue;
      const readyAt = this.readyAtSeconds(record, inst.state === 'running', type, now);
      instances.push({
        id: inst.id,
        type,
        readyAtSeconds: readyAt,
        tasks: inst.taskIds.flatMap((id) => {
          const t = taskById.get(id);
          return t === undefined ? [] : [{ demand: t.demand, key: t.key }];
        }),
        ...(inst.market === 'spot' ? { spot: true } : {}),
      });
    }
    const scheduler = this.deps.scheduler();
    const placed = placeWaitingJobs({
      nowSeconds: now,
      jobs,
      instances,
      prices: this.prices,
      admitted: () =>
        this.deps.admission.admissibleNow(snapshot, admissionInfo(inputs, snapshot, this.deps.store)),
      bind: this.deps.bind,
      expectedRate: scheduler.expectedRate?.bind(scheduler),
      capHoldsJobsBack: this.capHoldsJobsBack,
    });
    if (placed.length === 0) return [];
    this.deps.apply(placed.map(startsOf));
    this.deps.log.info(`placed ${placed.length} job(s) between rounds on paid capacity`, {
      jobs: placed.map((p) => p.jobId),
    });
    return placed.map((p) => p.jobId);
  }

  /**
   * When an instance paid for can start tasks: now once its worker registered; else when it is expected to, by its
   * type's delays (as the simulator's instances and the ETA's world count them). Only a bind may wait for that.
   */
  private readyAtSeconds(record: InstanceRecord, running: boolean, type: InstanceType, now: number): number {
    const registered = this.deps.workerRegistered;
    if (running && (registered === undefined || registered(record))) return now;
    // Its worker's registration: its type's setup after the launch, or worker start and registration once running.
    const d = type.delays;
    const expected =
      running && record.runningAtSeconds !== undefined
        ? record.runningAtSeconds + d.workerStartSeconds + d.workerRegisterSeconds
        : (record.launchedAtSeconds ?? record.requestedAtSeconds) + setupSeconds(type);
    // Later than expected, it may never come (the registration timeout replaces the instance): no slot.
    return expected > now ? expected : Number.POSITIVE_INFINITY;
  }
}

function startsOf(p: BetweenRoundsPlacement): BetweenRoundsStart {
  const where = [...new Set(p.placements.map((s) => s.instanceId))].join(', ');
  const bind = p.bindChoice;
  return {
    jobId: p.jobId,
    starts: p.placements.map((s) => ({ taskId: s.taskId, instanceId: s.instanceId })),
    message:
      bind === undefined
        ? `placed between rounds on paid capacity (${where})`
        : `placed between rounds on ${where}, still coming up: ${bind.reason}`,
    data: {
      instances: [...new Set(p.placements.map((s) => s.instanceId))],
      expectedStartSeconds: p.jobStartSeconds,
      ...(bind === undefined ? {} : { bindChoice: JSON.parse(JSON.stringify(bind)) as JsonValue }),
    },
  };
}
