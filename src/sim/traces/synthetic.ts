import { z } from 'zod';
import { Rng } from '../../core/random.js';
import { parseWith } from '../../core/validation.js';
import {
  buildJob,
  DEFAULT_MEAN_INTERARRIVAL_SECONDS,
  drawTaskCount,
  gavelDurationSeconds,
  generationStreams,
  poissonArrivalSeconds,
  resolveGenerationOptions,
  type GenerationOptions,
} from './generation.js';
import type { Trace, TraceJob } from '../../world/trace.js';
import { findWorkload, singleTaskWorkloads, type WorkloadCatalog } from './workloads.js';

/** Jobs in Eva's multi-task synthetic traces (`simulation/trace_generator.py`, research digest §5.3). */
export const DEFAULT_SYNTHETIC_JOBS = 100;

const syntheticOptionsSchema = z.object({
  /** Identical tasks in every job (Eva's multi-task experiment uses 4). Excludes multiTaskShare. */
  tasksPerJob: z.number().int().positive().default(1),
  /**
   * Restrict the workloads drawn from (catalog keys or names), e.g. `['gpt2', 'resnet18']` for a trace whose
   * interference is one measured pair. Default: every single-task workload of the catalog.
   */
  workloads: z.array(z.string().min(1)).min(1).optional(),
  traceName: z.string().min(1).optional(),
});

export type SyntheticTraceOptions = GenerationOptions & {
  readonly workloadCatalog: WorkloadCatalog;
  readonly tasksPerJob?: number | undefined;
  readonly workloads?: readonly string[] | undefined;
  readonly traceName?: string | undefined;
};

/**
 * A seeded synthetic trace in the style of Eva's multi-task experiment (§6.7; research digest §5.3): N jobs,
 * each a uniformly drawn catalog workload with that workload's own demand per family, `tasksPerJob`
 * identical tasks, durations 10^U(1.5, 3) minutes (Eva's synthetic generator draws only the short range),
 * Poisson arrivals with mean 1200 s / arrivalRateScale. Job names are the bare workload names (as in Eva's
 * synthetic traces), so all jobs of a workload share one interference identity.
 *
 * Unlike Eva's generator, `seq` jobs also draw their duration (Eva pins them to the profiled 5,798 s) and
 * `resnet18` is the single-task profile (Eva's dict is shadowed by `two_node_Resnet18`, also named resnet18).
 */
export function generateSyntheticTrace(options: SyntheticTraceOptions): Trace {
  const gen = resolveGenerationOptions({
    seed: options.seed,
    jobs: options.jobs,
    arrivalRateScale: options.arrivalRateScale,
    multiTaskShare: options.multiTaskShare,
  });
  const own = parseWith(
    syntheticOptionsSchema,
    {
      tasksPerJob: options.tasksPerJob,
      workloads: options.workloads === undefined ? undefined : [...options.workloads],
      traceName: options.traceName,
    },
    'synthetic trace options',
  );
  const pool =
    own.workloads === undefined
      ? singleTaskWorkloads(options.workloadCatalog)
      : own.workloads.map((w) => findWorkload(options.workloadCatalog, w));
  if (pool.length === 0) throw new Error('the workload catalog has no single-task workload to draw from');
  if (own.tasksPerJob > 1 && gen.multiTaskShare > 0)
    throw new Error(
      'synthetic trace options: give either tasksPerJob (every job) or multiTaskShare (a share of jobs)',
    );

  const count = gen.jobs ?? DEFAULT_SYNTHETIC_JOBS;
  const streams = generationStreams(new Rng(gen.seed));
  const arrivals = poissonArrivalSeconds(
    streams.arrival,
    count,
    DEFAULT_MEAN_INTERARRIVAL_SECONDS / gen.arrivalRateScale,
  );
  const jobs: TraceJob[] = [];
  for (let i = 0; i < count; i++) {
    const workload = streams.workload.pick(pool);
    const drawnTaskCount = drawTaskCount(streams.taskCount, gen.multiTaskShare);
    jobs.push(
      buildJob({
        id: String(i),
        name: workload.name,
        workload,
        arrivalSeconds: arrivals[i] ?? 0,
        durationSeconds: gavelDurationSeconds(streams.duration, 1),
        demand: workload.demand,
        taskCount: own.tasksPerJob > 1 ? own.tasksPerJob : drawnTaskCount,
      }),
    );
  }
  return { name: own.traceName ?? `synthetic (seed ${gen.seed}, ${count} jobs)`, jobs };
}
