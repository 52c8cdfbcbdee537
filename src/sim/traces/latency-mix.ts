import { hashUnit } from '../../core/random.js';
import type { LatencyPreset } from '../../core/network.js';
import { ValidationError } from '../../core/validation.js';
import type { Trace, TraceJob } from '../../world/trace.js';

/**
 * `--latency-sensitive SHARE`: that share of a trace's multi-task jobs gets one of NoMora's curves, drawn in the
 * paper's simulation mix (§6.1: 50 % memcached, 25 % STRADS, 25 % TensorFlow; Spark left out as "almost constant"),
 * a star pattern rooted at the first task, and `gibPerHour` of traffic. Single-task jobs stay insensitive (they do not
 * communicate), and so do jobs that already declare a network. Each job's draws hash its id with the seed, so a job
 * sensitive at one share stays sensitive, with the same curve, at any larger share, and the trace's other draws are
 * untouched. A trace with no multi-task job left to draw from is refused, naming the flag, rather than run unchanged.
 */
export function withLatencySensitivity(trace: Trace, share: number, seed: number, gibPerHour: number): Trace {
  if (!(share >= 0 && share <= 1)) throw new Error(`latency-sensitive share must be in [0, 1], got ${share}`);
  if (share === 0) return trace;
  const eligible = (job: TraceJob): boolean => job.tasks.length >= 2 && job.network === undefined;
  // With no job to draw from, the share would change nothing and the run would report no latency-sensitive job.
  if (!trace.jobs.some(eligible)) {
    const declaring = trace.jobs.filter((j) => j.network !== undefined).length;
    throw new ValidationError('--latency-sensitive', [
      `gives a share of the multi-task jobs without a network of their own a curve, and the trace has none ` +
        `(${trace.jobs.length - declaring} single-task, ${declaring} declaring a network): generated traces ` +
        '(alibaba, synthetic, success) get multi-task jobs with --multi-task',
    ]);
  }
  return {
    ...trace,
    jobs: trace.jobs.map((job) => {
      if (!eligible(job)) return job;
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
