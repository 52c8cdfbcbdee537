import { ValidationError } from '../../core/validation.js';
import type { Trace, TraceJob } from '../../world/trace.js';
import { MAX_TRACE_ARRIVAL_SECONDS } from './trace-bounds.js';

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
 * Bounds of `--arrival-rate-scale`, a thousand times slower or faster: far beyond, arrivals land centuries out (the
 * run would plan a round every period until then) or all in the first second.
 */
export const MIN_ARRIVAL_RATE_SCALE = 0.001;
export const MAX_ARRIVAL_RATE_SCALE = 1000;

/**
 * Refuse a scaled or generated trace whose last job arrives later than a trace file may say (trace-bounds.ts): the
 * simulator would plan a round every period until then, and times that large lose whole seconds to rounding.
 * Named as the flag that stretched it; `scale` is the rate it was built with.
 */
export function checkScaledArrivals(trace: Trace, scale: number): void {
  let last: TraceJob | undefined;
  for (const job of trace.jobs)
    if (last === undefined || job.arrivalSeconds > last.arrivalSeconds) last = job;
  if (last === undefined || last.arrivalSeconds <= MAX_TRACE_ARRIVAL_SECONDS) return;
  throw new ValidationError('--arrival-rate-scale', [
    `at x = ${scale}, job ${last.id} (of ${trace.jobs.length}) arrives at ${last.arrivalSeconds} s, later than the ` +
      `${MAX_TRACE_ARRIVAL_SECONDS} s (ten years) a trace may span: raise x (arrival times scale by 1/x) or ` +
      'simulate fewer --jobs',
  ]);
}

/**
 * Multiply the arrival rate by `scale` (arrival times divided by it, truncated to whole seconds like the
 * generators'): 2 doubles the load, 0.5 halves it. Durations are unchanged.
 */
export function scaleArrivalRate(trace: Trace, scale: number): Trace {
  if (!(Number.isFinite(scale) && scale > 0))
    throw new ValidationError('trace options', [`arrivalRateScale: must be positive, got ${scale}`]);
  if (scale === 1) return trace;
  const scaled = {
    ...trace,
    jobs: trace.jobs.map((j) => ({ ...j, arrivalSeconds: Math.floor(j.arrivalSeconds / scale) })),
  };
  checkScaledArrivals(scaled, scale);
  return scaled;
}
