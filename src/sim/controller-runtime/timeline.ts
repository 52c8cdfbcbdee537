import { EventQueue } from '../../world/event-queue.js';

/**
 * The simulated world's own events (instances coming up, tasks launching, checkpoints uploading, jobs finishing),
 * shared by the simulated cloud and workers. At one time, effects of earlier commands run first and completions
 * last, with the controller's round in between, as the engine ranks them (src/world/simulation.ts: a job finishing exactly
 * at a round is still seen running by that round); within each kind, in the order they were scheduled.
 */
export type TimelineKind = 'effect' | 'completion';

interface TimelineEvent {
  readonly timeSeconds: number;
  readonly rank: number;
  readonly run: () => void;
}

export class Timeline {
  private readonly effects = new EventQueue<TimelineEvent>();
  private readonly completions = new EventQueue<TimelineEvent>();

  at(timeSeconds: number, run: () => void, kind: TimelineKind = 'effect'): void {
    (kind === 'effect' ? this.effects : this.completions).push({ timeSeconds, rank: 0, run });
  }

  nextTime(): number | undefined {
    const a = this.effects.peekTime();
    const b = this.completions.peekTime();
    if (a === undefined) return b;
    return b === undefined ? a : Math.min(a, b);
  }

  /** Run every event of `kind` at or before `t` (and those they add at or before `t`); returns the count. */
  runUntil(t: number, kind: TimelineKind): number {
    const queue = kind === 'effect' ? this.effects : this.completions;
    let n = 0;
    for (;;) {
      const next = queue.peekTime();
      if (next === undefined || next > t) return n;
      (queue.pop() as TimelineEvent).run();
      n += 1;
    }
  }

  get size(): number {
    return this.effects.size + this.completions.size;
  }
}
