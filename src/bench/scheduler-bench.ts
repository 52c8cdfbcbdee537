import { performance } from 'node:perf_hooks';
import type { Catalog } from '../core/catalog.js';
import type { ClusterSnapshot } from '../core/model.js';
import { Rng } from '../core/random.js';
import type { FamilyDemand } from '../core/resources.js';
import { EvaScheduler } from '../scheduler/eva.js';
import { configurationCostPerHour } from '../scheduler/full-reconfiguration.js';
import { PriceBook } from '../scheduler/reservation-price.js';
import { median } from '../world/metrics.js';

export interface WeightedDemand {
  readonly demand: FamilyDemand;
  readonly weight: number;
  /** Co-location identity shared by tasks of this demand (one workload per demand vector, as Eva's traces). */
  readonly key: string;
}

export interface SchedulerBenchResult {
  readonly tasks: number;
  readonly seconds: number;
  readonly instances: number;
  readonly costPerHour: number;
  readonly noPackingCostPerHour: number;
}

/** A seeded sample of single-task jobs, all waiting (a cold start: the largest Full Reconfiguration). */
export function sampleSnapshot(
  demands: readonly WeightedDemand[],
  count: number,
  seed: number,
): ClusterSnapshot {
  const rng = new Rng(seed);
  const total = demands.reduce((s, d) => s + d.weight, 0);
  const pick = (): WeightedDemand => {
    let x = rng.next() * total;
    for (const d of demands) {
      x -= d.weight;
      if (x < 0) return d;
    }
    return demands[demands.length - 1] as WeightedDemand;
  };
  const jobs = [];
  const tasks = [];
  for (let i = 0; i < count; i++) {
    const d = pick();
    const id = `t${String(i).padStart(6, '0')}`;
    jobs.push({
      id: `j${id}`,
      taskIds: [id],
      reconfigurable: true,
      arrivalSeconds: 0,
      migrationDelaySeconds: 0,
    });
    tasks.push({ id, jobId: `j${id}`, key: d.key, demand: d.demand });
  }
  return { nowSeconds: 0, jobs, tasks, instances: [] };
}

/**
 * Full Reconfiguration (the EvaScheduler in its full-only variant, decision record included) on `count` sampled
 * tasks; seconds is the median of `repeats` runs, each on a fresh scheduler.
 */
export function benchScheduler(
  catalog: Catalog,
  demands: readonly WeightedDemand[],
  taskCounts: readonly number[],
  // `now` (milliseconds) is the clock the runs are timed by; a test gives its own.
  options: { seed?: number; repeats?: number; now?: () => number } = {},
): SchedulerBenchResult[] {
  const book = new PriceBook(catalog);
  const now = options.now ?? (() => performance.now());
  // Warm the JIT once so the first size is not charged for compilation (sizes are compared as ratios).
  new EvaScheduler(catalog, { variant: 'eva-full-only' }).plan(
    sampleSnapshot(demands, 2000, (options.seed ?? 1) + 1),
  );
  return taskCounts.map((count) => {
    const snapshot = sampleSnapshot(demands, count, options.seed ?? 1);
    const repeats = options.repeats ?? (count > 20_000 ? 3 : 5);
    const times: number[] = [];
    let plan;
    for (let r = 0; r < repeats; r++) {
      const scheduler = new EvaScheduler(catalog, { variant: 'eva-full-only' });
      const start = now();
      plan = scheduler.plan(snapshot);
      times.push((now() - start) / 1000);
    }
    if (plan === undefined) throw new Error('no run');
    const placed = plan.configuration.instances.reduce((s, i) => s + i.taskIds.length, 0);
    if (placed !== count) throw new Error(`plan placed ${placed} of ${count} tasks`);
    return {
      tasks: count,
      // An even number of repeats has two middle times: their mean, not the upper one.
      seconds: median(times),
      instances: plan.configuration.instances.length,
      costPerHour: Math.round(configurationCostPerHour(book, plan.configuration) * 1e4) / 1e4,
      noPackingCostPerHour:
        Math.round(snapshot.tasks.reduce((s, t) => s + book.reservationPrice(t.demand), 0) * 1e4) / 1e4,
    };
  });
}
