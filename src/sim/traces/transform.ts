import { ValidationError } from '../../core/validation.js';
import type { Trace } from '../../world/trace.js';

/** The first `count` jobs in arrival order; an error when the trace has fewer. */
export function firstJobs(trace: Trace, count: number, source = trace.name): Trace {
  if (!(Number.isInteger(count) && count > 0))
    throw new ValidationError('trace options', [`jobs: must be a positive integer, got ${count}`]);
  // Bad input like any other (exit 2), not a failure of the run.
  if (count > trace.jobs.length)
    throw new ValidationError(source, [
      `--jobs: asked for ${count} jobs, but the trace has only ${trace.jobs.length}`,
    ]);
  const ordered = [...trace.jobs].sort((a, b) => a.arrivalSeconds - b.arrivalSeconds);
  return { ...trace, jobs: ordered.slice(0, count) };
}

/**
 * Multiply the arrival rate by `scale` (arrival times divided by it, truncated to whole seconds like the
 * generators'): 2 doubles the load, 0.5 halves it. Durations are unchanged.
 */
export function scaleArrivalRate(trace: Trace, scale: number): Trace {
  if (!(Number.isFinite(scale) && scale > 0))
    throw new ValidationError('trace options', [`arrivalRateScale: must be positive, got ${scale}`]);
  if (scale === 1) return trace;
  return {
    ...trace,
    jobs: trace.jobs.map((j) => ({ ...j, arrivalSeconds: Math.floor(j.arrivalSeconds / scale) })),
  };
}
