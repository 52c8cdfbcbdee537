import { z } from 'zod';

/**
 * The value of time as the price of a slowdown budget. An operator rarely knows what an hour of a job's delay is worth
 * in dollars, and the right dollar figure depends on the workload: on pai_200 $8 per job-hour buys little time at a
 * cost, on the Alibaba conversions it is what keeps mean JCT near No-Packing's. What operators can say is how much
 * slower than alone they let running jobs go: a target mean slowdown (0.1: jobs run at 90% of their standalone speed
 * on average). The value of time is then that constraint's multiplier, found online by dual ascent in log space: each
 * round the mean slowdown the jobs show (1 − their observed normalized throughput, smoothed over about
 * SMOOTHING_SECONDS) moves log₂ v up when above the target and down when below, in proportion to the relative error.
 *
 * While the queue layer's caps hold jobs back, and after they did until every running job was placed since, v may
 * fall but not rise (see `observe`).
 *
 * v moves on a grid of quarter powers of two, so the set values memoized under one v and the last round's plan stay
 * valid while it settles, and is held in [MIN, MAX] so that it cannot wind up while the target is out of reach (a
 * burst of arrivals that only co-location can absorb).
 */

/** The value of time where the budget starts, $ per job-hour (the fixed default before the budget). */
export const SLOWDOWN_BUDGET_START = 0.5;
export const SLOWDOWN_BUDGET_MIN = 0.25;
export const SLOWDOWN_BUDGET_MAX = 64;
/** Time constant of the smoothing of the observed slowdown. */
export const SMOOTHING_SECONDS = 45 * 60;
/** log₂ v moves this much per hour when the smoothed slowdown is twice the target (or zero). */
export const GAIN_PER_HOUR = 0.6;
/** A gap between observations longer than this (an idle cluster) counts as this long. */
const MAX_STEP_SECONDS = 3600;

export const slowdownBudgetStateSchema = z.object({
  smoothedSlowdown: z.number().min(0).max(1).optional(),
  log2Value: z.number().min(Math.log2(SLOWDOWN_BUDGET_MIN)).max(Math.log2(SLOWDOWN_BUDGET_MAX)),
  lastSeconds: z.number().optional(),
  /** When the queue layer's caps last held jobs back (absent: never seen). */
  heldBackAtSeconds: z.number().optional(),
});
export type SlowdownBudgetState = z.infer<typeof slowdownBudgetStateSchema>;

/** What the queue layer's caps did, for one round's observation. */
export interface CapContext {
  /** The caps hold jobs back this round. */
  readonly holdsJobsBack: boolean;
  /**
   * When each observed job last began making progress (after its start or its last move), at its `slowdowns` index;
   * undefined: not yet (it initializes), or not known.
   */
  readonly placedSeconds: readonly (number | undefined)[];
}

export class SlowdownBudget {
  private smoothed: number | undefined;
  private log2Value = Math.log2(SLOWDOWN_BUDGET_START);
  private lastSeconds: number | undefined;
  private heldBackAtSeconds: number | undefined;

  constructor(readonly target: number) {
    if (!(target > 0 && target < 1)) throw new Error(`target slowdown must be in (0, 1), got ${target}`);
  }

  /** The value of an hour of a job's completion time now, $ (a quarter power of two). */
  get valuePerJobHour(): number {
    return 2 ** (Math.round(this.log2Value * 4) / 4);
  }

  /** The smoothed mean slowdown of running jobs, once any was seen. */
  get smoothedSlowdown(): number | undefined {
    return this.smoothed;
  }

  /**
   * One round's observation: each running job's slowdown from co-location (1 − its normalized throughput, the
   * slowest task's for a gang). A round with no running job changes nothing.
   *
   * While the caps hold jobs back, v may fall but not rise: while jobs wait for budget, the co-location that slows
   * running jobs is what lets the waiting ones start, and their wait is most of their completion time. Nor may it rise
   * afterwards while some running job was placed (started, or last moved) before the caps last held jobs back. Such
   * a job was packed while time was priced low; a higher v cannot undo its slowdown short of moving it apart, which
   * costs more than it returns, but it does price out the consolidations that pay as the jobs around it finish. When
   * the queue drains after a binding cap, the fleet the cap paid for empties with v rising on slowdowns it cannot
   * change: on a capped Alibaba run that drain ran at 58% GPU utilization against 72% while the cap held (README
   * "Multi-task starts and placement between rounds").
   */
  observe(nowSeconds: number, slowdowns: readonly number[], caps?: CapContext): void {
    const mayRaise = this.mayRaise(caps);
    if (caps?.holdsJobsBack === true) this.heldBackAtSeconds = nowSeconds;
    if (slowdowns.length === 0) return;
    const mean = slowdowns.reduce((sum, s) => sum + Math.min(1, Math.max(0, s)), 0) / slowdowns.length;
    const last = this.lastSeconds;
    this.lastSeconds = nowSeconds;
    if (this.smoothed === undefined || last === undefined) {
      this.smoothed = mean;
      return;
    }
    const dt = Math.min(MAX_STEP_SECONDS, Math.max(0, nowSeconds - last));
    this.smoothed += (1 - Math.exp(-dt / SMOOTHING_SECONDS)) * (mean - this.smoothed);
    const error = (this.smoothed - this.target) / this.target;
    const step = ((GAIN_PER_HOUR * dt) / 3600) * (mayRaise ? error : Math.min(0, error));
    this.log2Value = Math.min(
      Math.log2(SLOWDOWN_BUDGET_MAX),
      Math.max(Math.log2(SLOWDOWN_BUDGET_MIN), this.log2Value + step),
    );
  }

  /** Whether v may rise this round (see `observe`); an unknown placement time counts as before the caps held. */
  private mayRaise(caps: CapContext | undefined): boolean {
    if (caps?.holdsJobsBack === true) return false;
    const since = this.heldBackAtSeconds;
    return since === undefined || (caps?.placedSeconds ?? []).every((t) => t !== undefined && t > since);
  }

  toJSON(): SlowdownBudgetState {
    return {
      ...(this.smoothed === undefined ? {} : { smoothedSlowdown: this.smoothed }),
      log2Value: this.log2Value,
      ...(this.lastSeconds === undefined ? {} : { lastSeconds: this.lastSeconds }),
      ...(this.heldBackAtSeconds === undefined ? {} : { heldBackAtSeconds: this.heldBackAtSeconds }),
    };
  }

  static fromJSON(target: number, state: SlowdownBudgetState | undefined): SlowdownBudget {
    const budget = new SlowdownBudget(target);
    if (state === undefined) return budget;
    const s = slowdownBudgetStateSchema.parse(state);
    budget.smoothed = s.smoothedSlowdown;
    budget.log2Value = s.log2Value;
    budget.lastSeconds = s.lastSeconds;
    budget.heldBackAtSeconds = s.heldBackAtSeconds;
    return budget;
  }
}
