import { weighed } from '../../src/scheduler/eva-choice.js';
import { netValue } from '../../src/scheduler/decision-rule.js';
import type { CandidateSummary } from '../../src/scheduler/types.js';

/**
 * What the chosen candidate's net value over the horizon beats staying's by (Eva eq. 1, the migration cost counted
 * `paybackMargin` times, dollars and the value of time together): what the decision rule must have found positive.
 */
export function gainOverStaying(
  chosen: CandidateSummary,
  stay: CandidateSummary,
  paybackMargin: number,
  horizonSeconds: number,
): number {
  const w = weighed(chosen);
  const s = weighed(stay);
  return (
    netValue(w.savingPerSecond, paybackMargin * w.migrationCost, horizonSeconds) -
    netValue(s.savingPerSecond, paybackMargin * s.migrationCost, horizonSeconds)
  );
}
