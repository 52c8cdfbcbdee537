import type { Caps } from '../core/model.js';
import { enforceCaps } from './caps.js';
import type { EvaluateCandidate } from './eva-candidates.js';
import { capViolation, cutRepairs, type Candidate } from './eva-choice.js';
import type { DraftInstance } from './full-reconfiguration.js';
import type { PackTask } from './packing.js';

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
  /** $/hour of an instance at the market it is bought in (eva-cap-price.ts): what the $ cap is held to. */
  pricePerHour: (d: DraftInstance) => number,
  evaluate: EvaluateCandidate,
): Candidate {
  if (candidate.summary.rejectedBecause !== undefined) return candidate;
  const violation = capViolation(candidate, caps, pricePerHour);
  if (violation === undefined) return candidate;
  const rejected: Candidate = {
    ...candidate,
    summary: { ...candidate.summary, rejectedBecause: violation },
    cutRepairs: cutRepairs(candidate.summary, caps),
  };
  const cut = enforceCaps(candidate.drafts, caps, tasks, pinnedTaskIds, valueOf, pricePerHour);
  const waiting = new Set(cut.waiting.map((w) => w.jobId));
  const stopsRunning = [...tasks.values()].some(
    (t) => waiting.has(t.jobId) && t.currentInstanceId !== undefined,
  );
  if (waiting.size === 0 || stopsRunning) return rejected;
  const evaluated = evaluate(candidate.summary.name, cut.drafts);
  const still = capViolation(evaluated, caps, pricePerHour);
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
