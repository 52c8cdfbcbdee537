import type { Clock } from './clock.js';

/**
 * Whether the controller's loop is making progress, for `/healthz`. The loop runs one pass at a time (a round, a
 * reconciliation pass, recovery at start); a pass that runs far longer than any should (a cloud call that never
 * answers, a hung dependency) means nothing else is being decided or carried out, however healthy the API looks. The
 * loop records when each pass starts and ends; the check says "stuck" once the current one has run past a threshold.
 * Passes that all fail for as long (a pass throwing on the same record every time) leave the loop as idle as a hung
 * one, only quicker: the check says "failing", with the last error.
 */

/** A pass longer than this is stuck (a round with thousands of jobs takes seconds; EC2 calls take a few each). */
export const DEFAULT_LOOP_STUCK_SECONDS = 60;

export interface LoopHealth {
  readonly status: 'ok' | 'stuck' | 'failing';
  /** The pass under way ('round', 'reconcile', 'recovery', …), or undefined between passes. */
  readonly pass: string | undefined;
  /** How long the pass under way has been running. */
  readonly passSeconds: number | undefined;
  /** When the last pass ended (the loop's last progress), on the controller's clock; undefined before the first. */
  readonly lastPassEndedAtSeconds: number | undefined;
  /** Why it is stuck, in words. */
  readonly reason?: string;
}

export class LoopMonitor {
  private current: { readonly pass: string; readonly startedAtSeconds: number } | undefined;
  private lastEndedAtSeconds: number | undefined;
  /** Since when every pass has failed, and the last one's error; undefined once one succeeds. */
  private failing: { readonly sinceSeconds: number; error: string } | undefined;

  constructor(
    private readonly clock: Clock,
    private readonly stuckAfterSeconds: number = DEFAULT_LOOP_STUCK_SECONDS,
  ) {}

  /** Run one pass of the loop, recording its start and end. */
  async track<T>(pass: string, run: () => Promise<T>): Promise<T> {
    const startedAtSeconds = this.clock.nowSeconds();
    this.current = { pass, startedAtSeconds };
    try {
      const result = await run();
      this.failing = undefined;
      return result;
    } catch (e) {
      const error = e instanceof Error ? e.message : String(e);
      if (this.failing === undefined) this.failing = { sinceSeconds: startedAtSeconds, error };
      else this.failing.error = error;
      throw e;
    } finally {
      this.current = undefined;
      this.lastEndedAtSeconds = this.clock.nowSeconds();
    }
  }

  health(): LoopHealth {
    const current = this.current;
    const passSeconds =
      current === undefined ? undefined : this.clock.nowSeconds() - current.startedAtSeconds;
    const base = {
      pass: current?.pass,
      passSeconds,
      lastPassEndedAtSeconds: this.lastEndedAtSeconds,
    };
    // A pass running too long is the more pressing: it is why nothing ends, failing or not.
    if (current === undefined || passSeconds === undefined || passSeconds <= this.stuckAfterSeconds)
      return this.failingHealth(base) ?? { status: 'ok', ...base };
    return {
      status: 'stuck',
      ...base,
      reason:
        `the control loop has been in one ${current.pass} pass for ${Math.round(passSeconds)} s ` +
        `(more than ${this.stuckAfterSeconds} s): nothing else is planned or carried out until it ends`,
    };
  }

  private failingHealth(base: Omit<LoopHealth, 'status' | 'reason'>): LoopHealth | undefined {
    const failing = this.failing;
    if (failing === undefined) return undefined;
    const seconds = this.clock.nowSeconds() - failing.sinceSeconds;
    if (seconds <= this.stuckAfterSeconds) return undefined;
    return {
      status: 'failing',
      ...base,
      reason:
        `every pass of the control loop has failed for ${Math.round(seconds)} s (more than ${this.stuckAfterSeconds} s): ` +
        `nothing is planned or carried out; the last: ${failing.error.slice(0, 500)}`,
    };
  }
}
