import { join } from 'node:path';
import type { Clock } from '../../../controller/clock.js';
import type { ControllerConfig } from '../../../controller/config.js';
import type { ControllerLogger } from '../../../controller/seams.js';
import { LEASE_LOST_EXIT_CODE, openControllerState, type ControllerState } from '../../controller-state.js';
import { DB_FILE } from './state-dir.js';

/**
 * Open the controller's state store and, where controllers share it, wait until this one holds the lease. `opened`
 * is given the state as soon as it is open, before the wait: whoever must give the lease back (a failed start, a
 * signal) has it from the moment the lease is taken.
 */
export async function openActiveState(
  config: ControllerConfig,
  options: {
    readonly clock: Clock;
    readonly log: ControllerLogger;
    readonly opened?: (state: ControllerState) => void;
    /** Checks on the open state before any wait for the lease: a standby is refused at start, not at takeover. */
    readonly beforeLease?: (state: ControllerState) => Promise<void>;
  },
): Promise<ControllerState> {
  const { clock, log } = options;
  const state = openControllerState(config, {
    nowSeconds: () => clock.nowSeconds(),
    sqlitePath: join(config.stateDir, DB_FILE),
    log,
  });
  options.opened?.(state);
  await options.beforeLease?.(state);
  // A standby waits here, before anything touches the cloud or the workers, until the lease is its own.
  await state.becomeActive((reason) => {
    log.error(`lost the controller lease (${reason}); exiting so that only the new active controller acts`);
    process.exit(LEASE_LOST_EXIT_CODE);
  });
  return state;
}
