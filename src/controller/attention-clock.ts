/**
 * Time during which the controller could hear its workers: wall time, except that a stretch in which its event loop
 * was held up (a long synchronous round on a starved host, a paused process) counts for at most two ticks. A worker's
 * silence is measured on this clock (worker-silence-watch.ts): heartbeats queue unread while the loop is held up, and
 * a controller that measured silence on the wall clock would replace healthy instances after its own stall.
 */
export interface Attention {
  /** Seconds of attention so far (an arbitrary origin; only differences mean something). */
  seconds(): number;
}

export class AttentionClock implements Attention {
  private attentionMs = 0;
  private lastMs: number;
  private timer: ReturnType<typeof setInterval> | undefined;

  constructor(
    private readonly tickMs = 200,
    private readonly nowMs: () => number = () => performance.now(),
  ) {
    this.lastMs = nowMs();
  }

  /** Sample every tick from now on (the timer does not keep the process alive). */
  start(): this {
    this.timer ??= setInterval(() => this.sample(), this.tickMs);
    this.timer.unref();
    return this;
  }

  stop(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Credit the time since the last sample, at most two ticks of it. */
  sample(): void {
    const now = this.nowMs();
    this.attentionMs += this.credit(now);
    this.lastMs = now;
  }

  seconds(): number {
    return (this.attentionMs + this.credit(this.nowMs())) / 1000;
  }

  private credit(now: number): number {
    return Math.min(Math.max(0, now - this.lastMs), 2 * this.tickMs);
  }
}
