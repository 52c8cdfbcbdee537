import type { DecisionRecord } from './types.js';
/**
 * Eva's time-amortized choice between Full and Partial Reconfiguration (§4.5, eq. 1), with the horizon T estimated
 * from the observed event rate (research digest §2, "Full-vs-partial criterion").
 */

/**
 * Mean time until the next Full Reconfiguration: events (job arrivals and completions) arrive as a Poisson process
 * of rate λ and each leads to a Full Reconfiguration with probability p, so P(none by t) = (1−p)^{λt} and
 * T = −1 / (λ·ln(1−p)). Before any Full Reconfiguration (p = 0) the reference bootstraps T with the current
 * simulation time, i.e. the time the cluster has run: `elapsedSeconds` (not an epoch timestamp). p = 1 gives 0.
 */
export function horizonSeconds(
  eventRatePerSecond: number | undefined,
  fullFraction: number,
  elapsedSeconds: number,
): number {
  if (fullFraction <= 0 || eventRatePerSecond === undefined || !(eventRatePerSecond > 0))
    return Math.max(0, elapsedSeconds);
  if (fullFraction >= 1) return 0;
  return -1 / (eventRatePerSecond * Math.log(1 - fullFraction));
}

/**
 * Whether a round's chosen candidate is a Full Reconfiguration (Eva §4.5's p): at packed prices (`full`) or at
 * standalone ones (`full-standalone`), both repack every task.
 */
export function isFullReconfiguration(chosen: DecisionRecord['chosen']): boolean {
  return chosen === 'full' || chosen === 'full-standalone';
}

/** Event history for λ and p: arrivals and completions, and how many rounds chose Full Reconfiguration. */
export class EventHistory {
  private readonly times: number[] = [];
  private fullCount = 0;

  /** Record events at the given times (kept sorted: the reference's unsorted list made λ a rough estimate). */
  addEvents(timesSeconds: readonly number[]): void {
    for (const t of timesSeconds) {
      let i = this.times.length;
      while (i > 0 && (this.times[i - 1] as number) > t) i--;
      this.times.splice(i, 0, t);
    }
  }

  recordFull(): void {
    this.fullCount += 1;
  }

  /** Time of the first event seen (the bootstrap horizon counts from it, not from the clock's epoch). */
  get firstEventSeconds(): number | undefined {
    return this.times[0];
  }

  get eventCount(): number {
    return this.times.length;
  }

  /** λ = 1 / mean inter-event time, undefined until two events with distinct times. */
  get eventRatePerSecond(): number | undefined {
    if (this.times.length < 2) return undefined;
    const span = (this.times[this.times.length - 1] as number) - (this.times[0] as number);
    return span > 0 ? (this.times.length - 1) / span : undefined;
  }

  /** p = share of events that led to a Full Reconfiguration. */
  get fullFraction(): number {
    return Math.min(1, this.fullCount / Math.max(1, this.times.length));
  }

  toJSON(): { times: number[]; fullCount: number } {
    return { times: [...this.times], fullCount: this.fullCount };
  }

  static fromJSON(data: { times: readonly number[]; fullCount: number }): EventHistory {
    const h = new EventHistory();
    h.addEvents(data.times);
    h.fullCount = data.fullCount;
    return h;
  }
}

/** The value of a candidate plan over the horizon: provisioning saving rate × T − migration cost (eq. 1). */
export function netValue(savingPerSecond: number, migrationCost: number, horizon: number): number {
  return savingPerSecond * horizon - migrationCost;
}

/**
 * Eq. 1: choose Full iff (S_full − S_partial)·T > M_full − M_partial. The reference rounds both sides' values to
 * cents before comparing, so differences below a cent never cause a reconfiguration. With `paybackMargin` k > 1
 * (EvaOptions.paybackMargin) the extra migration cost counts k times: (S_full − S_partial)·T > k·(M_full − M_partial).
 */
export function chooseFull(
  full: { savingPerSecond: number; migrationCost: number },
  partial: { savingPerSecond: number; migrationCost: number },
  horizon: number,
  paybackMargin = 1,
): boolean {
  const cents = (x: number) => Math.round(x * 100) / 100;
  return (
    cents(netValue(full.savingPerSecond, paybackMargin * full.migrationCost, horizon)) -
      cents(netValue(partial.savingPerSecond, paybackMargin * partial.migrationCost, horizon)) >
    0
  );
}
