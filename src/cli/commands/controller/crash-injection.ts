import { ValidationError } from '../../../core/validation.js';
import { FAULT_POINTS, type FaultInjector, type FaultPoint } from '../../../controller/faults.js';

/** The controller's crash-testing hook, read from the environment. */

/**
 * Testing hook: `FLEETWISE_CRASH_AT=<fault point>[:<n>]` makes the process SIGKILL itself at the n-th time (default
 * the first) it reaches that point between an intent and its effect, so tests can check recovery from a real kill.
 */
export const CRASH_AT_ENV = 'FLEETWISE_CRASH_AT';

/** The fault injector `FLEETWISE_CRASH_AT` asks for; undefined when it is not set. */
export function crashInjectorFromEnv(env: NodeJS.ProcessEnv): FaultInjector | undefined {
  const spec = env[CRASH_AT_ENV];
  if (spec === undefined || spec.trim() === '') return undefined;
  const match = /^(.*?)(?::(\d+))?$/.exec(spec.trim()) as RegExpExecArray;
  const point = match[1] as string;
  const countText = match[2];
  if (!(FAULT_POINTS as readonly string[]).includes(point))
    throw new ValidationError(CRASH_AT_ENV, [
      `${point}: not a fault point (one of ${FAULT_POINTS.join(', ')})`,
    ]);
  const target = countText === undefined ? 1 : Number(countText);
  let hits = 0;
  return {
    hit(at: FaultPoint) {
      if (at !== point) return;
      hits += 1;
      if (hits === target) process.kill(process.pid, 'SIGKILL');
    },
  };
}
