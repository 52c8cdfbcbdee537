import { z } from 'zod';
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

/** The event history as saved: the four numbers λ, p and the bootstrap horizon need, whatever the events seen. */
export interface EventHistoryState {
  /** Events seen (arrivals and completions). */
  readonly count: number;
  /** Rounds that chose a Full Reconfiguration. */
  readonly fullCount: number;
  /** Earliest and latest event time; absent while `count` is 0. */
  readonly firstSeconds?: number;
  readonly lastSeconds?: number;
}

/** The event history as versions before the compact form saved it: every event time seen, sorted. */
export interface LegacyEventHistoryState {
  readonly times: readonly number[];
  readonly fullCount: number;
}

const wholeCount = z.number().int('must be a whole number').min(0, 'must be ≥ 0');

/** What `EventHistory.fromJSON` reads back from a state store: the compact form, or the older list of times. */
const savedEventHistorySchema = z.union([
  z
    .object({
      count: wholeCount,
      fullCount: wholeCount,
      firstSeconds: z.number().optional(),
      lastSeconds: z.number().optional(),
    })
    .refine(
      (h) =>
        h.count === 0
          ? h.firstSeconds === undefined && h.lastSeconds === undefined
          : h.firstSeconds !== undefined && h.lastSeconds !== undefined && h.firstSeconds <= h.lastSeconds,
      'firstSeconds ≤ lastSeconds are saved exactly when count > 0',
    ),
  z.object({ times: z.array(z.number()), fullCount: wholeCount }),
]);

/**
 * Event history for λ and p: arrivals and completions, and how many rounds chose Full Reconfiguration. λ needs only
 * the count and the span of the event times, so only those are kept: the saved state stays the same size however
 * long the controller runs. Event times are never NaN (they are clock readings and job arrivals).
 */
export class EventHistory {
  private count = 0;
  private fullCount = 0;
  private first: number | undefined;
  private last: number | undefined;

  /** Record events at the given times, in any order (ties keep the first-recorded earliest, as a sorted list would). */
  addEvents(timesSeconds: readonly number[]): void {
    for (const t of timesSeconds) {
      this.count += 1;
      if (this.first === undefined || t < this.first) this.first = t;
      if (this.last === undefined || t >= this.last) this.last = t;
    }
  }

  recordFull(): void {
    this.fullCount += 1;
  }

  /** Time of the first event seen (the bootstrap horizon counts from it, not from the clock's epoch). */
  get firstEventSeconds(): number | undefined {
    return this.first;
  }

  get eventCount(): number {
    return this.count;
  }

  /** λ = 1 / mean inter-event time = (count − 1) / (last − first), undefined until two events with distinct times. */
  get eventRatePerSecond(): number | undefined {
    if (this.count < 2 || this.first === undefined || this.last === undefined) return undefined;
    const span = this.last - this.first;
    return span > 0 ? (this.count - 1) / span : undefined;
  }

  /** p = share of events that led to a Full Reconfiguration. */
  get fullFraction(): number {
    return Math.min(1, this.fullCount / Math.max(1, this.count));
  }

  toJSON(): EventHistoryState {
    return {
      count: this.count,
      fullCount: this.fullCount,
      ...(this.first === undefined || this.last === undefined
        ? {}
        : { firstSeconds: this.first, lastSeconds: this.last }),
    };
  }

  /** The history as saved, in the compact form or as the list of times older versions saved; throws on neither. */
  static fromJSON(data: EventHistoryState | LegacyEventHistoryState): EventHistory {
    const saved = savedEventHistorySchema.parse(data);
    const h = new EventHistory();
    if ('times' in saved) h.addEvents(saved.times);
    else {
      h.count = saved.count;
      h.first = saved.firstSeconds;
      h.last = saved.lastSeconds;
    }
    h.fullCount = saved.fullCount;
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
