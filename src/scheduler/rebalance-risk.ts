import type { ClusterSnapshot } from '../core/model.js';
import { REBALANCE_INTERRUPTION_RATE_PER_HOUR } from './spot-cost.js';
import type { Configuration } from './types.js';

/**
 * How often an instance EC2 recommended rebalancing is reclaimed, learned from the flagged instances the rounds have
 * seen. EC2 publishes no figure, and a recommendation is not always followed by an interruption: priced at a fixed
 * rate, false alarms would keep triggering moves that pay for nothing.
 *
 * Exponential lifetimes with independent censoring (a Gamma–Poisson estimate): exposure is the time a flagged
 * instance was seen flagged, round to round (for one reclaimed, to the midpoint of the interval it went in); a reclaim
 * is a flagged instance gone from the snapshot while the last plan kept it, when the snapshot names it reclaimed (a spot
 * interruption notice, or terminated by the cloud: `reclaimedInstanceIds`). Any other exit is censored: an instance the
 * plan dropped (its tasks moved off), and one drained by an operator, lost with its worker or retired, whose end says
 * nothing of when EC2 would have reclaimed it; censoring does not bias the estimate since those exits do not depend on
 * when the reclaim would have come. The prior is one reclaim
 * in two hours (`REBALANCE_INTERRUPTION_RATE_PER_HOUR`), so that with no evidence the risk is priced as imminent, and
 * the hours of alarms that came to nothing bring it down.
 */

/** The prior's weight: one reclaim in 1 / REBALANCE_INTERRUPTION_RATE_PER_HOUR hours of exposure. */
const PRIOR_RECLAIMS = 1;
const PRIOR_HOURS = PRIOR_RECLAIMS / REBALANCE_INTERRUPTION_RATE_PER_HOUR;

export interface RebalanceRiskState {
  readonly reclaims: number;
  readonly exposureSeconds: number;
  /** Flagged instances seen in the last round and when. */
  readonly flagged: readonly (readonly [string, number])[];
  /** Instances the last plan kept. */
  readonly kept: readonly string[];
}

export class RebalanceRiskTracker {
  private reclaims = 0;
  private exposureSeconds = 0;
  private flagged = new Map<string, number>();
  private kept = new Set<string>();

  /** A round's snapshot: exposure of the flagged instances still there, a reclaim for each kept one reclaimed since. */
  observe(snapshot: ClusterSnapshot): void {
    const now = snapshot.nowSeconds;
    const present = new Set(snapshot.instances.map((i) => i.id));
    const reclaimed =
      snapshot.reclaimedInstanceIds === undefined ? undefined : new Set(snapshot.reclaimedInstanceIds);
    for (const id of this.flagged.keys()) {
      if (present.has(id)) continue;
      // Reclaimed some time since it was last seen: half that interval (the midpoint) counts as exposure too, or the
      // rate would come out high by up to a round period per reclaim.
      if (this.kept.has(id) && (reclaimed === undefined || reclaimed.has(id))) {
        this.reclaims += 1;
        this.exposureSeconds += Math.max(0, now - (this.flagged.get(id) as number)) / 2;
      }
      this.flagged.delete(id);
    }
    for (const inst of snapshot.instances) {
      if (inst.rebalanceRecommended !== true) continue;
      const seen = this.flagged.get(inst.id);
      if (seen !== undefined) this.exposureSeconds += Math.max(0, now - seen);
      this.flagged.set(inst.id, now);
    }
  }

  /** The plan chosen this round: the instances it keeps (a flagged one gone by the next round was reclaimed). */
  notePlan(configuration: Configuration): void {
    this.kept = new Set(configuration.instances.filter((i) => !i.isNew).map((i) => i.id));
  }

  /** Reclaims per hour of a flagged instance: the posterior mean. */
  ratePerHour(): number {
    return (this.reclaims + PRIOR_RECLAIMS) / (this.exposureSeconds / 3600 + PRIOR_HOURS);
  }

  toJSON(): RebalanceRiskState {
    return {
      reclaims: this.reclaims,
      exposureSeconds: this.exposureSeconds,
      flagged: [...this.flagged],
      kept: [...this.kept],
    };
  }

  /** State saved before this was learned has none: the prior alone. */
  static fromJSON(state: RebalanceRiskState | undefined): RebalanceRiskTracker {
    const t = new RebalanceRiskTracker();
    if (state === undefined) return t;
    t.reclaims = state.reclaims;
    t.exposureSeconds = state.exposureSeconds;
    t.flagged = new Map(state.flagged);
    t.kept = new Set(state.kept);
    return t;
  }
}
