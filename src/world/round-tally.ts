import type { QueueDecision } from '../queue/admission.js';
import type { RoundOutcome } from '../round/round.js';
import { isFullReconfiguration } from '../scheduler/decision-rule.js';

/** What a run's rounds added up to: for its result, its progress and the reason it gives when it stalls. */
export class RoundTally {
  /** Rounds that planned, and those whose plan chose Full Reconfiguration. */
  rounds = 0;
  fullRounds = 0;
  /** Rounds whose plan broke a cap and was not carried out, and the last such breach. */
  capRefusedRounds = 0;
  lastCapViolation: string | undefined;
  /** Job moves carried out by plans chosen for the network's sake. */
  latencyMoves = 0;
  /** Jobs stopped by WFQ preemption. */
  preemptions = 0;
  /** The last round's admission: what a run stopped at its time limit left waiting in the queue. */
  lastQueue: QueueDecision | undefined;

  /** Count a round; its plan is carried out unless it broke a cap (`capViolation`). */
  count(round: RoundOutcome): void {
    this.lastQueue = round.queue;
    const planned = round.planned;
    if (planned === undefined) return;
    this.rounds += 1;
    if (isFullReconfiguration(planned.plan.decision.chosen)) this.fullRounds += 1;
    if (planned.capViolation === undefined) {
      this.preemptions += planned.victims.length;
      // Moves of plans chosen for the network (the `latency` candidate: jobs measured slow, moved again).
      if (planned.plan.decision.chosen === 'latency') this.latencyMoves += planned.diff.movedJobIds.length;
    } else {
      this.capRefusedRounds += 1;
      this.lastCapViolation = planned.capViolation;
    }
  }
}
