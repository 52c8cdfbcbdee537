import type { RoundCause } from './service.js';

/**
 * When the controller's loop plans: on the period (`roundSeconds`), and early when asked, at least `minRoundGap` after
 * the last round. Without early rounds (`earlyRounds: false`, the simulator's runtime, as Eva's reference) only capacity
 * lost or about to be is planned for early, and the period keeps its grid, as the simulator's engine does: such a
 * round moves no later one.
 */
export class RoundSchedule {
  /** Why the next round was asked for; undefined: none asked for. */
  requestedBecause: string | undefined;
  private lastRoundAtSeconds = Number.NEGATIVE_INFINITY;
  private lastPeriodicRoundAtSeconds = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly settings: {
      readonly roundSeconds: number;
      readonly earlyRounds?: boolean | undefined;
      readonly minRoundGapSeconds?: number | undefined;
    },
    /**
     * When capacity the cloud refused may be back (the ends of its capacity-error windows, no-capacity-records.ts):
     * a round runs at the first of them after the last round, to plan the jobs the round kept waiting for it.
     */
    private readonly capacityBackTimes: () => readonly number[] = () => [],
  ) {}

  /**
   * Ask for a round; true when this is a new request (one that should wake the loop). With one pending, the loop
   * already sleeps until the earliest round it may run (or is in a pass and looks at the request after it): waking it
   * again would only buy a reconciliation pass per submission in a burst, for nothing a round would not do moments later.
   */
  request(reason: string, cause: RoundCause): boolean {
    // Capacity lost is planned for at once even without early rounds: the tasks it held would otherwise wait idle for
    // up to a round period.
    if (this.settings.earlyRounds === false && cause !== 'capacity') return false;
    if (this.requestedBecause !== undefined) return false;
    this.requestedBecause = reason;
    return true;
  }

  /** Whether a round runs now: the period's, or one asked for once the gap since the last has passed. */
  due(nowSeconds: number): boolean {
    return (
      this.periodicDue(nowSeconds) ||
      (this.requestedBecause !== undefined && nowSeconds >= this.lastRoundAtSeconds + this.minGap()) ||
      nowSeconds >= (this.capacityBackSeconds() ?? Number.POSITIVE_INFINITY)
    );
  }

  /** Why a round due now runs: asked for, capacity that may be back, else the period. */
  reasonAt(nowSeconds: number): string {
    if (this.requestedBecause !== undefined) return this.requestedBecause;
    return nowSeconds >= (this.capacityBackSeconds() ?? Number.POSITIVE_INFINITY)
      ? 'capacity may be back'
      : 'period';
  }

  /** A round starts now (the request, if any, is answered by it). */
  started(nowSeconds: number): void {
    if (this.periodicDue(nowSeconds)) this.lastPeriodicRoundAtSeconds = nowSeconds;
    this.lastRoundAtSeconds = nowSeconds;
    this.requestedBecause = undefined;
  }

  /** When the next round may run: the earliest an asked-for one may, else the period's next. */
  nextRoundSeconds(): number {
    const asked =
      this.requestedBecause !== undefined
        ? this.earliestEarlySeconds()
        : this.periodFrom() + this.settings.roundSeconds;
    return Math.min(asked, this.capacityBackSeconds() ?? Number.POSITIVE_INFINITY);
  }

  /**
   * The first end of a capacity-error window after the last round (and its gap), if any: an early round, so none
   * without early rounds (the simulator's runtime plans on the period's grid, as its engine does).
   */
  private capacityBackSeconds(): number | undefined {
    if (this.settings.earlyRounds === false) return undefined;
    const after = this.capacityBackTimes().filter((t) => t > this.lastRoundAtSeconds);
    return after.length === 0 ? undefined : Math.max(Math.min(...after), this.earliestEarlySeconds());
  }

  /** The earliest an early round may run. */
  earliestEarlySeconds(): number {
    return this.lastRoundAtSeconds + this.minGap();
  }

  private periodicDue(nowSeconds: number): boolean {
    return nowSeconds >= this.periodFrom() + this.settings.roundSeconds;
  }

  /** When the current period began: the last round of any kind with early rounds, else the period's own last. */
  private periodFrom(): number {
    return this.settings.earlyRounds === false ? this.lastPeriodicRoundAtSeconds : this.lastRoundAtSeconds;
  }

  private minGap(): number {
    return this.settings.minRoundGapSeconds ?? Math.min(this.settings.roundSeconds, 2);
  }
}
