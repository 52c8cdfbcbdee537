import type { ClusterSnapshot } from '../core/model.js';
import { withoutJobs } from '../core/snapshot.js';
import type { Plan } from './types.js';

/** A round's plan and whether it came from a Full Reconfiguration (the event history counts those). */
export interface ChosenRound {
  readonly plan: Plan;
  readonly full: boolean;
}

/**
 * Packings a round may try when its plan breaks a cap, each without the jobs the cap kept waiting so far: on the
 * Alibaba conversions under a $ cap the second packing rarely breaks it again, and the last one is still cut to the caps.
 */
export const MAX_CAP_REPACKS = 3;

/**
 * A plan over a cap loses whole instances, least cost-efficient first, and with them whole jobs (caps.ts), which
 * leaves holes where the kept instances held those jobs' other tasks. The round is packed again without the jobs the
 * cap keeps waiting, so that the plan under a cap is the plan for the jobs it keeps. `packWithout` packs a snapshot
 * without changing the scheduler's state; every job a cap kept waiting in any packing is listed in the decision.
 */
export function repackedUnderCaps(
  snapshot: ClusterSnapshot,
  first: ChosenRound,
  packWithout: (fewer: ClusterSnapshot) => ChosenRound,
): ChosenRound {
  let chosen = first;
  const capWaits = new Map<string, string>();
  for (let attempt = 0; attempt < MAX_CAP_REPACKS; attempt++) {
    // Every `waiting` entry of a scheduler's own plan is a cap's (the queue layer adds its own later).
    const newWaits = chosen.plan.decision.waiting.filter((w) => !capWaits.has(w.jobId));
    if (newWaits.length === 0) break;
    newWaits.forEach((w) => capWaits.set(w.jobId, w.cap));
    chosen = packWithout(withoutJobs(snapshot, new Set(capWaits.keys())));
  }
  return capWaits.size === 0 ? chosen : { ...chosen, plan: withCapWaits(chosen.plan, capWaits) };
}

/** The plan with every job a cap kept waiting, in any packing of the round, listed in its decision. */
function withCapWaits(plan: Plan, capWaits: ReadonlyMap<string, string>): Plan {
  const listed = new Set(plan.decision.waiting.map((w) => w.jobId));
  const earlier = [...capWaits]
    .filter(([jobId]) => !listed.has(jobId))
    .map(([jobId, cap]) => ({ jobId, cap }));
  if (earlier.length === 0) return plan;
  return {
    ...plan,
    decision: {
      ...plan.decision,
      waiting: [...earlier, ...plan.decision.waiting],
      reason: `${plan.decision.reason}; packed again without the ${capWaits.size} job(s) a cap keeps waiting`,
    },
  };
}
