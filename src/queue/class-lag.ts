import type { ClassShare, QueuedPosition } from './admit.js';

/**
 * Each class's lag: the service the fluid allocation owed it while it waited, minus the service it held, in seconds
 * of the whole capped capacity (a share of 1 held for one second is one). It is the memory the work-conserving pass
 * needs. A job bigger than its class's share only ever starts on room the work-conserving pass hands out, and at the
 * moment a job ends every class may hold nothing: ranked by their shares of that moment alone, the same class (the
 * heavier, or the one listed first) wins every time. Ranked by lag, the class that has waited longest while the other
 * held the room goes next, as in fair queueing (lag as EEVDF defines it, Stoica et al., RTSS 1996; start-time fair
 * queueing, Goyal, Vin and Cheng, SIGCOMM 1996, serves the flow whose service is furthest behind its share).
 *
 * - While a class is backlogged (a job waits in its line, one that can ever fit its ceiling), between two rounds it
 *   accrues dt × (owed − used): `used` is its share of the capacity held after the earlier round's admissions, `owed`
 *   its fluid share of the capacity all classes held then (fluid_k / Σ fluid × Σ used). Whole jobs seldom fill the
 *   capacity, so the fluid shares are scaled to what was held: the rates of all classes then sum to 0, and two
 *   classes taking turns keep their lags near each other instead of both drifting up to the bound (a class's share of
 *   admissions then follows its weight, not its weight plus a part of the room no job could fill).
 * - A class with nothing waiting has a lag of 0: it banks no credit while idle (start-time fair queueing starts a
 *   returning flow at the current virtual time), and carries no debt into its next burst.
 * - A lag is bounded by ±`LAG_HORIZON_SECONDS`, so one very long job does not lock its class out for longer than
 *   that, and the state stays small and finite whatever the run's length.
 */

/** The bound on a class's lag: four hours of the whole capped capacity. */
export const LAG_HORIZON_SECONDS = 4 * 3600;

/** Lags closer than this are equal (their difference is rounding), so the next key decides. */
export const LAG_EPS_SECONDS = 1e-6;

/** What the lags were at a round and how they accrue from then on: plain data, kept with the admission's state. */
export interface ClassLagState {
  /** The round's time. */
  readonly atSeconds: number;
  /** Each class backlogged after that round: its lag then, and what it accrues per second from then on. */
  readonly classes: readonly (readonly [classId: string, lagSeconds: number, ratePerSecond: number])[];
}

/** Each class's lag at `nowSeconds` (a class not listed is at 0). */
export function lagsAt(state: ClassLagState | undefined, nowSeconds: number): Map<string, number> {
  const lags = new Map<string, number>();
  if (state === undefined) return lags;
  const dt = Math.max(0, nowSeconds - state.atSeconds);
  for (const [classId, lag, rate] of state.classes) lags.set(classId, clampLag(lag + dt * rate));
  return lags;
}

/**
 * The state after a round at `nowSeconds` whose admission left `classes` holding their shares and `queued` waiting:
 * the backlogged classes keep their lags (`lags`, accrued up to now) and accrue from here at their owed share of what
 * is held less their own; the others go back to 0.
 */
export function nextLagState(
  lags: ReadonlyMap<string, number>,
  classes: readonly ClassShare[],
  queued: readonly QueuedPosition[],
  nowSeconds: number,
): ClassLagState {
  const backlogged = new Set(queued.filter((q) => q.reason !== 'never-fits').map((q) => q.classId));
  const fluid = classes.reduce((s, c) => s + c.fluidShare, 0);
  const held = classes.reduce((s, c) => s + c.usedShare, 0);
  const scale = fluid > 0 ? held / fluid : 0;
  return {
    atSeconds: nowSeconds,
    classes: classes
      .filter((c) => backlogged.has(c.classId))
      .map((c) => [c.classId, lags.get(c.classId) ?? 0, c.fluidShare * scale - c.usedShare] as const),
  };
}

function clampLag(lag: number): number {
  return Math.min(LAG_HORIZON_SECONDS, Math.max(-LAG_HORIZON_SECONDS, lag));
}
