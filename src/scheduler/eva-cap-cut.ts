import type { Caps } from '../core/model.js';
import { buyPlan, enforceCaps, type PlanPricing } from './caps.js';
import type { EvaluateCandidate } from './eva-candidates.js';
import { capViolation, cutRepairs, type Candidate } from './eva-choice.js';
import type { DraftInstance } from './full-reconfiguration.js';
import type { PackTask } from './packing.js';
import { describeBreach, planQuotaBreaches } from './plan-quotas.js';
import type { PriceBook } from './reservation-price.js';

/**
 * A candidate over a cap, weighed as the plan it would become. Rejecting it outright leaves the decision rule only the
 * candidates that fit, and under a binding cap (admission filling it with jobs that need new instances) those are
 * often a Full Reconfiguration or a consolidation that fits by moving many running jobs: moves no saving chose, only
 * the cap. A plan over a cap loses its least cost-efficient new instances anyway (enforceCaps), their new jobs waiting
 * for the next round, so that is the alternative the moves must beat under eq. 1 (Eva §4.5): keeping the running jobs
 * where they are and letting a newly admitted job wait. A cut that would stop a running job is not offered: the
 * candidate stays rejected, as before.
 */
export function cutToCaps(
  candidate: Candidate,
  caps: Caps,
  tasks: ReadonlyMap<string, PackTask>,
  pinnedTaskIds: ReadonlySet<string>,
  valueOf: (d: DraftInstance) => number,
  /** How the plan is bought and at what $/hour (eva-cap-price.ts): what the $ cap and the quotas are held to. */
  pricing: PlanPricing,
  evaluate: EvaluateCandidate,
  /** The types new instances may be merged into over `maxInstances` (caps.ts enforceCaps). */
  book?: PriceBook,
): Candidate {
  if (candidate.summary.rejectedBecause !== undefined) return candidate;
  const violation = violationAsBought(candidate, caps, pricing);
  if (violation === undefined) return candidate;
  const rejected: Candidate = {
    ...candidate,
    summary: { ...candidate.summary, rejectedBecause: violation },
    cutRepairs: cutRepairs(candidate.summary, caps),
  };
  const cut = enforceCaps(candidate.drafts, caps, tasks, pinnedTaskIds, valueOf, pricing, book);
  const waiting = new Set(cut.waiting.map((w) => w.jobId));
  const stopsRunning = [...tasks.values()].some(
    (t) => waiting.has(t.jobId) && t.currentInstanceId !== undefined,
  );
  if (waiting.size === 0 || stopsRunning) return rejected;
  const evaluated = evaluate(candidate.summary.name, cut.drafts);
  const still = violationAsBought(evaluated, caps, pricing);
  return {
    drafts: evaluated.drafts,
    capWaits: cut.waiting,
    summary: {
      ...evaluated.summary,
      leftWaiting: waiting.size,
      ...(still === undefined ? {} : { rejectedBecause: still }),
    },
    ...(still === undefined ? {} : { cutRepairs: cutRepairs(evaluated.summary, caps) }),
  };
}

/**
 * The cap a candidate breaks as its plan would be bought (spot quotas moving new spot instances on demand, whose price
 * the $ cap then sees), its quotas counted as the round's check counts them; undefined when it keeps every cap.
 */
function violationAsBought(
  c: Pick<Candidate, 'summary' | 'drafts'>,
  caps: Caps,
  pricing: PlanPricing,
): string | undefined {
  const bought = buyPlan(pricing, c.drafts, caps);
  const violation = capViolation(c, caps, bought.pricePerHour);
  if (violation !== undefined) return violation;
  const breach = planQuotaBreaches(
    c.drafts.map((d) => ({ type: d.type, market: bought.planned(d).market })),
    caps,
  )[0];
  return breach === undefined ? undefined : describeBreach(breach);
}
