import { hashUnit } from '../../core/random.js';
import type { LatencyPreset } from '../../core/network.js';
import type { Trace } from '../../world/trace.js';

/**
 * `--latency-sensitive SHARE`: that share of a trace's multi-task jobs gets one of NoMora's curves, drawn in the
 * paper's simulation mix (§6.1: 50 % memcached, 25 % STRADS, 25 % TensorFlow; Spark left out as "almost constant"),
 * a star pattern rooted at the first task, and `gibPerHour` of traffic. Single-task jobs stay insensitive (they do not
 * communicate), and so do jobs that already declare a network. Each job's draws hash its id with the seed, so a job
 * sensitive at one share stays sensitive, with the same curve, at any larger share, and the trace's other draws are
 * untouched.
 */
export function withLatencySensitivity(trace: Trace, share: number, seed: number, gibPerHour: number): Trace {
  if (!(share >= 0 && share <= 1)) throw new Error(`latency-sensitive share must be in [0, 1], got ${share}`);
  if (share === 0) return trace;
  return {
    ...trace,
    jobs: trace.jobs.map((job) => {
      if (job.tasks.length < 2 || job.network !== undefined) return job;
      if (hashUnit(seed, 'latency-sensitive', job.id) >= share) return job;
      return {
        ...job,
        network: {
          sensitivity: nomoraMix(hashUnit(seed, 'latency-curve', job.id)),
          pattern: 'star',
          gibPerHour,
        },
      };
    }),
  };
}

/** NoMora's mix from a uniform draw. */
export function nomoraMix(u: number): LatencyPreset {
  return u < 0.5 ? 'memcached' : u < 0.75 ? 'strads' : 'tensorflow';
}
