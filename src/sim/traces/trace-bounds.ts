import { z } from 'zod';
import { MAX_DURATION_SECONDS } from '../../core/duration.js';

/**
 * Bounds on a trace job's times. A job runs at most a year, as a job spec's expectedDurationSeconds, and arrives
 * within ten: the simulator plans a round every period until the last job has ended, so an absurd value in a trace
 * would keep a run going for ever instead of being refused, naming the field.
 */
export const MAX_TRACE_ARRIVAL_SECONDS = 10 * MAX_DURATION_SECONDS;

/** Seconds a job runs at full throughput. */
export const traceDurationSeconds = z
  .number()
  .finite()
  .positive()
  .max(
    MAX_DURATION_SECONDS,
    `at most ${MAX_DURATION_SECONDS} s (365 days), as a job spec's expectedDurationSeconds`,
  );

/** Seconds after the trace's start. */
export const traceArrivalSeconds = z
  .number()
  .finite()
  .nonnegative()
  .max(MAX_TRACE_ARRIVAL_SECONDS, `at most ${MAX_TRACE_ARRIVAL_SECONDS} s (ten years)`);

/**
 * The longest delay of one step of a job's life (a launch, a fetch, a build, a checkpoint upload): a day, as a job
 * spec's delay estimates. Each move pays some of them again, so a longer one would outlast the run's time limit.
 */
export const MAX_TRACE_DELAY_SECONDS = 86_400;

/** Seconds one step of a job's life takes. */
export const traceDelaySeconds = z
  .number()
  .finite()
  .nonnegative()
  .max(MAX_TRACE_DELAY_SECONDS, `at most ${MAX_TRACE_DELAY_SECONDS} s (a day), as a job spec's delays`);

/** The most shared memory a trace's task may ask for, GiB: what a job spec's memory demand may be (64 TiB). */
export const MAX_TRACE_SHM_GIB = 65_536;

/** A task's shared memory (/dev/shm), GiB. */
export const traceShmGiB = z
  .number()
  .finite()
  .nonnegative()
  .max(MAX_TRACE_SHM_GIB, `at most ${MAX_TRACE_SHM_GIB} GiB, as a job spec's memory`);
