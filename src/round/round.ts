import type { Catalog } from '../core/catalog.js';
import type { ClusterSnapshot } from '../core/model.js';
import { withoutJobs } from '../core/snapshot.js';
import {
  type Admission,
  type AdmissionInfo,
  type PreemptionVictim,
  type QueueDecision,
} from '../queue/admission.js';
import { capsBrokenAlone, NO_INSTANCE_TYPE, shownWaitReason, waitCapName } from '../queue/admission-views.js';
import type { QueueCaps } from '../queue/caps.js';
import { diffConfiguration, type ConfigurationDiff } from '../scheduler/actions.js';
import type { Plan, Scheduler, ThroughputObservation, WaitingEntry } from '../scheduler/types.js';
import { capHoldsJobsBack } from './between-rounds.js';
import { capacityHolds, capacityWait } from './capacity-holds.js';
import { pinnedHold, planCapViolation } from './plan-caps.js';

/**
 * One scheduling round, the same for the simulator and the controller (ARCHITECTURE.md "One scheduler, two
 * worlds"): admission under the caps → preemption victims → the scheduler observes and plans → the diff into actions
 * (each with the gates it waits for, see gates.ts) → the cap check. It reads plain data and the two stateful
 * decision makers (admission and scheduler: their learned state is part of the decision); it performs no I/O and
 * carries nothing out. The runtimes differ only in how they carry the actions out (EC2 and workers, or the
 * simulated world) and where the snapshot and observations come from. Karpenter's provisioner and consolidation
 * share one scheduling simulation the same way; Nomad's schedulers read a state snapshot and write only through a
 * plan the leader checks.
 */

export interface RoundInput {
  /** Every live job and every instance in the plan, as the runtime sees them now. */
  readonly snapshot: ClusterSnapshot;
  /** What admission knows of each job beyond the snapshot (team, declared size, success model). */
  readonly jobInfo: AdmissionInfo;
  readonly admission: Admission;
  readonly scheduler: Scheduler;
  /** Normalized throughputs observed since the last round (they teach the co-location table). */
  readonly observations: readonly ThroughputObservation[];
  /**
   * Every job the runtime has that has not ended, in the snapshot or not (PlanContext.liveJobIds): a job out of the
   * plan for now (held back, preempted, bound for no instance) has not finished. Absent: the snapshot's jobs.
   */
  readonly liveJobIds?: readonly string[] | undefined;
  readonly catalog: Catalog;
  /**
   * Copy the admission and the scheduler before this round touches them, for a completion-time prediction that
   * replays this round and runs on from it (PCS §4).
   */
  readonly forkForPrediction?: boolean | undefined;
  /**
   * The runtime carries the plan out when it keeps the caps (false: a dry run, which records the plan only).
   * Preemptions count as under way only for a plan carried out.
   */
  readonly carriedOut: boolean;
}

export interface PredictionFork {
  readonly admission: Admission;
  readonly scheduler: Scheduler;
}

export interface PlannedRound {
  readonly queue: QueueDecision;
  /** Jobs checkpointed back to the queue so a class reclaims its guaranteed share. */
  readonly victims: readonly PreemptionVictim[];
  /** The plan, its decision listing the jobs admission kept waiting. */
  readonly plan: Plan;
  /** Against the admitted snapshot: victims come out as checkpoint-stops back to the queue. */
  readonly diff: ConfigurationDiff;
  /** A cap the plan breaks: the plan must not be carried out. */
  readonly capViolation: string | undefined;
}

export interface RoundOutcome {
  readonly queue: QueueDecision;
  /** Admission kept a job out for the caps (between-rounds.ts): placement between rounds acts until the next round. */
  readonly capHoldsJobsBack: boolean;
  /**
   * Undefined when there was nothing to plan (no admitted job and no instance): the jobs admission kept waiting are
   * then in `idleWaits`, as a plan's decision would list them.
   */
  readonly planned: PlannedRound | undefined;
  readonly idleWaits?: readonly WaitingEntry[];
  readonly fork: PredictionFork | undefined;
}

/** Run one round. */
export function runRound(input: RoundInput): RoundOutcome {
  const { admission, scheduler } = input;
  const fork =
    input.forkForPrediction === true
      ? { admission: admission.fork(), scheduler: scheduler.fork?.() ?? scheduler }
      : undefined;
  // Jobs only types the cloud has no capacity for could host wait out of the round (capacity-holds.ts).
  const holds = capacityHolds(input.snapshot, input.catalog, admission.spot);
  const holdWaits = holds.map(capacityWait);
  const considered = withoutJobs(input.snapshot, new Set(holds.map((h) => h.jobId)));
  const queue = admission.decide(considered, input.jobInfo);
  const holdsBack = capHoldsJobsBack(queue.result.queued);
  const admitted = queue.snapshot;
  if (admitted.jobs.length === 0 && admitted.instances.length === 0)
    return {
      queue,
      capHoldsJobsBack: holdsBack,
      planned: undefined,
      idleWaits: [...queueWaits(queue, admission.caps), ...holdWaits],
      fork,
    };
  // Preemption (PCS §3): the scheduler plans without the victims; the diff, against the snapshot that has them,
  // checkpoints them back to the queue.
  const victims = admission.victims(queue);
  const withoutVictims = withoutJobs(admitted, new Set(victims.map((v) => v.jobId)));
  // The scheduler learns whether caps hold jobs back: its slowdown budget must not price time up then (Eva). It learns
  // from the fleet as it ran, victims included: their tasks were beside the others when those were measured.
  scheduler.observe(holdsBack ? { ...admitted, capHoldsJobsBack: true } : admitted, input.observations);
  // Jobs admission holds back and victims are out of the planned snapshot, not ended (Eva's event rate counts endings).
  const liveJobIds = input.liveJobIds ?? input.snapshot.jobs.map((j) => j.id);
  const plan = withQueueWaits(
    withoutPinnedWaits(scheduler.plan(withoutVictims, { liveJobIds }), admitted),
    queue,
    admission.caps,
    holdWaits,
  );
  const diff = diffConfiguration(admitted, plan.configuration, input.catalog, { scheduler: scheduler.name });
  const hold = pinnedHold(admitted, plan.configuration, diff);
  const capViolation = planCapViolation(plan.configuration, diff, input.catalog, admission.caps, hold);
  if (input.carriedOut && capViolation === undefined) {
    admission.markPreempting(victims);
    admission.noteCut(plan.decision.waiting.filter((w) => !isQueueWait(w.cap)).map((w) => w.jobId));
  }
  return { queue, capHoldsJobsBack: holdsBack, planned: { queue, victims, plan, diff, capViolation }, fork };
}

/** Decision `waiting` entries the queue layer added (`queue <class>: …`), as opposed to caps the scheduler enforced. */
export const QUEUE_WAIT_PREFIX = 'queue ';

export function isQueueWait(cap: string): boolean {
  return cap.startsWith(QUEUE_WAIT_PREFIX);
}

/**
 * The name of the cap a `waiting` entry waits for (WaitingEntry.capName). A round recorded before entries carried it
 * has the scheduler's caps by name, and the queue's line, whose position is dropped so the name stays one of few.
 */
export function waitingCapName(w: WaitingEntry): string {
  if (w.capName !== undefined) return w.capName;
  return isQueueWait(w.cap) ? w.cap.replace(/, position \d+$/, '') : w.cap;
}

/**
 * The plan without the cap waits of pinned jobs (being launched or moved): a cap that cuts one from the plan does not
 * stop it, as the diff keeps it where it is committed (scheduler/actions.ts), so it runs on rather than waits, and
 * the round's cap check counts the instances it holds. Once it can move, a cut stops it and it is listed then.
 */
function withoutPinnedWaits(plan: Plan, snapshot: ClusterSnapshot): Plan {
  const pinned = new Set(snapshot.jobs.filter((j) => !j.reconfigurable).map((j) => j.id));
  const waiting = plan.decision.waiting.filter((w) => !pinned.has(w.jobId));
  if (waiting.length === plan.decision.waiting.length) return plan;
  return { ...plan, decision: { ...plan.decision, waiting } };
}

/**
 * The plan with the jobs admission kept out, and those held for capacity (`holdWaits`), listed in its decision's
 * `waiting`, so explanations and round records say why they were not placed.
 */
function withQueueWaits(
  plan: Plan,
  queue: QueueDecision,
  caps: QueueCaps,
  holdWaits: readonly WaitingEntry[],
): Plan {
  const waits = [...queueWaits(queue, caps), ...holdWaits];
  if (waits.length === 0) return plan;
  return { ...plan, decision: { ...plan.decision, waiting: [...plan.decision.waiting, ...waits] } };
}

/**
 * The jobs admission kept out, as decision `waiting` entries (`queue small: class-share, position 2`, the cap's name
 * apart).
 */
function queueWaits(queue: QueueDecision, caps: QueueCaps): WaitingEntry[] {
  const position = new Map<string, number>();
  for (const ids of queue.queues.values()) ids.forEach((id, i) => position.set(id, i + 1));
  const waits: WaitingEntry[] = [];
  for (const q of queue.result.queued) {
    const where = position.get(q.jobId);
    const reason = shownWaitReason(q, queue.result);
    const brokenAlone = reason === 'never-fits' ? capsBrokenAlone(q, queue, caps) : [];
    waits.push({
      jobId: q.jobId,
      cap: `${QUEUE_WAIT_PREFIX}${q.classId}: ${reason}${where === undefined ? '' : `, position ${where}`}`,
      capName: waitCapName(q, queue, caps),
      ...(brokenAlone.length > 1 ? { brokenAlone } : {}),
    });
  }
  for (const u of queue.unhostable)
    waits.push({
      jobId: u.jobId,
      cap: `${QUEUE_WAIT_PREFIX}${u.classId}: never-fits`,
      capName: NO_INSTANCE_TYPE,
    });
  return waits;
}
