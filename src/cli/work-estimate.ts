/**
 * Elapsed time and an estimate of the time left for a batch of equally sized runs (tune's candidates). Each run
 * reports the share of its simulation done, so the estimate moves while a long candidate runs instead of waiting
 * for it to finish.
 */
export class WorkEstimate {
  private readonly fractions: number[];

  constructor(
    readonly total: number,
    private readonly startMs: number,
  ) {
    this.fractions = new Array<number>(total).fill(0);
  }

  /** Run `index` has done `fraction` (0–1) of its work. */
  progress(index: number, fraction: number): void {
    if (index < 0 || index >= this.total) return;
    this.fractions[index] = Math.max(this.fractions[index] ?? 0, Math.min(1, Math.max(0, fraction)));
  }

  finish(index: number): void {
    this.progress(index, 1);
  }

  get finished(): number {
    return this.fractions.filter((f) => f >= 1).length;
  }

  /** Share of all the work done, 0–1. */
  get fractionDone(): number {
    return this.total === 0 ? 1 : this.fractions.reduce((s, f) => s + f, 0) / this.total;
  }

  elapsedSeconds(nowMs: number): number {
    return Math.max(0, (nowMs - this.startMs) / 1000);
  }

  /** Seconds left at the pace so far; undefined until there is a pace to go by (1% of the work done). */
  remainingSeconds(nowMs: number): number | undefined {
    const done = this.fractionDone;
    if (done < 0.01) return undefined;
    return (this.elapsedSeconds(nowMs) * (1 - done)) / done;
  }

  /** "2/6 candidates done (40%), 1m05s elapsed, about 1m38s left". */
  describe(nowMs: number, unit: string): string {
    const left = this.remainingSeconds(nowMs);
    return (
      `${this.finished}/${this.total} ${unit} done (${Math.floor(100 * this.fractionDone)}%), ` +
      `${formatDuration(this.elapsedSeconds(nowMs))} elapsed, ` +
      (left === undefined ? 'estimating the time left' : `about ${formatDuration(left)} left`)
    );
  }
}

/** "45s", "3m05s", "2h07m": whole units, the larger two. */
export function formatDuration(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}
