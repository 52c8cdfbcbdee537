import type { Catalog } from '../core/catalog.js';
import type { Admission } from '../queue/admission.js';
import type { Scheduler } from '../scheduler/types.js';
import type { TaskRate } from './progress.js';
import { defaultMaxSimulatedSeconds, Simulation } from './simulation.js';
import type { PredictedTimes } from './simulation-types.js';
import type { SimWorld } from './world.js';

/**
 * Running a world forward from a given state (PCS §4): the engine of completion-time predictions, for the simulator
 * and the controller alike (src/predict). The run takes its rates from a scheduler's expectations, not the ground
 * truth, and sees no future arrivals.
 */

/** Rate model over co-location keys (a scheduler's expectations), memoized per composition. */
export type KeyRate = (taskKey: string, otherKeys: readonly string[]) => number;

/** What `runForward` needs: a world, the scheduler fork to plan with, and how to run it forward. */
export interface WorldRunOptions {
  readonly world: SimWorld;
  /** A fork of the scheduler (it observes and learns during the run). */
  readonly scheduler: Scheduler;
  readonly catalog: Catalog;
  /** Expected normalized throughput by co-location keys; default 1 (no interference). */
  readonly rate?: ((taskKey: string, otherKeys: readonly string[]) => number) | undefined;
  /** A fork of the admission in use (`Admission.fork`); default: every job admitted. */
  readonly admission?: Admission | undefined;
  readonly roundSeconds?: number | undefined;
  /** Also run a round right after each completion (as the controller does; `RunOptions.earlyRounds`). */
  readonly earlyRounds?: boolean | undefined;
  /** Stop once these jobs finished (default: every job of the world). */
  readonly jobIds?: readonly string[] | undefined;
  /**
   * Give up (ends stay null) past this simulated time; default: now + 30 days + 10 × the longest job (the longer of
   * its duration and its iterations' running time).
   */
  readonly maxSimulatedSeconds?: number | undefined;
  /** Asked before each step with the simulated time reached; true gives up there (a caller's time budget). */
  readonly shouldStop?: ((simulatedSeconds: number) => boolean) | undefined;
}

/**
 * Run a world forward with no arrivals (PCS §4) and return each job's start (first progress) and end, null when the
 * run gave up first: what a prediction is made of (src/predict).
 */
export function runForward(o: WorldRunOptions): Map<string, PredictedTimes> {
  const ids = o.jobIds ?? o.world.jobs.map((j) => j.spec.id);
  const sim = runWorld({ ...o, jobIds: ids }, o.admission);
  return new Map(ids.map((id) => [id, sim.timesOf(id)]));
}

/** Run a world forward until `jobIds` finished (or the time limit); `admission` builds its queue layer. */
function runWorld(
  o: WorldRunOptions & { readonly jobIds: readonly string[] },
  admission: Admission | undefined,
): Simulation {
  const sim = new Simulation(
    {
      trace: { name: 'prediction', jobs: [] },
      scheduler: o.scheduler,
      catalog: o.catalog,
      groundTruth: () => 1, // unused: a world run takes its rates from `rate`
      ...(o.roundSeconds !== undefined ? { roundSeconds: o.roundSeconds } : {}),
      earlyRounds: o.earlyRounds ?? false,
      maxSimulatedSeconds:
        o.maxSimulatedSeconds ?? defaultMaxSimulatedSeconds(o.world.nowSeconds, o.world.jobs),
    },
    {
      world: o.world,
      rateOf: taskRate(o.rate ?? (() => 1)),
      admission,
      targets: new Set(o.jobIds),
      shouldStop: o.shouldStop,
    },
  );
  sim.run();
  return sim;
}

/** The task-level rate of a key rate model, memoized per composition. */
function taskRate(rate: KeyRate): TaskRate {
  const memo = memoizedKeyRate(rate);
  return (task, others) =>
    memo(
      task.key,
      others.map((o) => o.key),
    );
}

/** Memoize a key rate model by (task key, sorted other keys); alone is 1. */
function memoizedKeyRate(rate: KeyRate): KeyRate {
  const cache = new Map<string, number>();
  return (target, others) => {
    if (others.length === 0) return 1;
    const key = `${target}\u0001${[...others].sort().join('\u0001')}`;
    let r = cache.get(key);
    if (r === undefined) {
      r = Math.min(1, Math.max(1e-6, rate(target, others)));
      cache.set(key, r);
    }
    return r;
  };
}
