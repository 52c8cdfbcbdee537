import type { Catalog, LaunchDelays } from '../../core/catalog.js';

/**
 * Launch delays of local "instances" (worker processes on this machine): a process starts and registers in about
 * two seconds, where an EC2 instance takes minutes. Local mode plans and predicts with these, so Eva's move costs and
 * the ETAs match what the user sees instead of EC2's boot times.
 */
export const LOCAL_LAUNCH_DELAYS: LaunchDelays = {
  instantiateSeconds: 0,
  workerStartSeconds: 2,
  workerRegisterSeconds: 1,
  terminateSeconds: 1,
};

/**
 * The catalog with every type's delays replaced by the local ones (prices and capacities unchanged); a type given a
 * boot time (the configuration's `localBootSeconds`: its workers start that much later) plans with it.
 */
export function withLocalDelays(
  catalog: Catalog,
  bootSeconds: Readonly<Record<string, number>> = {},
): Catalog {
  return {
    ...catalog,
    types: catalog.types.map((t) => ({
      ...t,
      delays: {
        ...LOCAL_LAUNCH_DELAYS,
        workerStartSeconds: LOCAL_LAUNCH_DELAYS.workerStartSeconds + (bootSeconds[t.name] ?? 0),
      },
    })),
  };
}
