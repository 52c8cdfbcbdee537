import type { LocalProvider } from '../../../cloud/local/local-provider.js';
import type { ApiServer } from '../../../controller/api/server.js';
import type { ControllerConfig } from '../../../controller/config.js';
import type { Controller } from '../../../controller/controller.js';
import type { InterruptionListener } from '../../../controller/interruption-listener.js';
import type { PriceRefresher } from '../../../controller/price-refresh.js';
import type { ControllerLogger } from '../../../controller/seams.js';
import type { ControllerBackups } from '../../controller-backups.js';
import type { ControllerState } from '../../controller-state.js';
import { stopLocalFleet, workerStopGraceSeconds } from '../../local-fleet-stop.js';
import { recordStoppedWithController } from '../../../controller/stopped-with-controller.js';

/** Stopping the controller cleanly on SIGTERM/SIGINT, and at once on a second signal. */

export interface ShutdownOptions {
  readonly config: ControllerConfig;
  /** `--keep-workers`: local workers and their tasks keep running after the controller stops. */
  readonly keepWorkers: boolean;
  readonly state: ControllerState;
  readonly controller: Controller;
  /** Local mode's provider, whose workers stop with the controller; undefined elsewhere. */
  readonly localProvider: LocalProvider | undefined;
  readonly priceRefresher: PriceRefresher | undefined;
  readonly interruptions: InterruptionListener | undefined;
  readonly backups: ControllerBackups | undefined;
  /** The API server once it serves (it starts after these handlers are installed). */
  readonly api: () => ApiServer | undefined;
  readonly releaseStateDir: () => void;
  readonly log: ControllerLogger;
}

/**
 * While the controller starts (before stopOnSignals): a SIGTERM or SIGINT runs `giveBack` (the lease, so a standby
 * need not wait for it to expire, and the state directory), then ends the process by that signal, as it would have
 * ended without a handler. Returns what removes these handlers.
 */
export function giveBackOnSignal(giveBack: () => void): () => void {
  const onSignal = (signal: NodeJS.Signals): void => {
    remove();
    try {
      giveBack();
    } finally {
      // No handler is left: the signal's default action ends the process.
      process.kill(process.pid, signal);
    }
  };
  const onTerm = (): void => onSignal('SIGTERM');
  const onInt = (): void => onSignal('SIGINT');
  const remove = (): void => {
    process.removeListener('SIGTERM', onTerm);
    process.removeListener('SIGINT', onInt);
  };
  process.on('SIGTERM', onTerm);
  process.on('SIGINT', onInt);
  return remove;
}

/** Install the SIGTERM and SIGINT handlers that stop everything in order and exit. */
export function stopOnSignals(options: ShutdownOptions): void {
  const { config, state, controller, localProvider, priceRefresher, interruptions, backups, log } = options;
  let stopping = false;
  let stoppingSinceMs = 0;
  const shutdown = async (signal: string): Promise<void> => {
    if (stopping) return;
    stopping = true;
    stoppingSinceMs = Date.now();
    log.info(`received ${signal}; stopping`);
    priceRefresher?.stop();
    await interruptions?.stop().catch(() => undefined);
    // The loop first, so no round launches or replaces an instance while the workers go; the API last, so workers
    // checkpointing their tasks can still report the final checkpoints.
    await controller.stop().catch(() => undefined);
    // Controllers sharing the state hand the fleet over to the next active one: its workers keep running.
    if (localProvider !== undefined && !state.shared)
      await stopLocalFleet(localProvider, {
        keepWorkers: options.keepWorkers,
        stateDir: config.stateDir,
        giveUpSeconds: config.workerGiveUpSeconds,
        graceSeconds: workerStopGraceSeconds(state.store),
      })
        // The state is told now, while it is open: the next start closes these instances when they ended, as
        // stopped with the controller, instead of billing them up to that start and calling them lost.
        .then((stopped) => recordStoppedWithController(state.store, stopped))
        .catch((e: unknown) => log.error(`stopping the local workers failed: ${(e as Error).message}`));
    const api = options.api();
    await api?.close().catch(() => undefined);
    // After the API and the workers: the final backup holds their last reports.
    await backups?.archive.stop().catch(() => undefined);
    await backups?.schedule.stop({ finalBackup: true }).catch(() => undefined);
    state.close();
    options.releaseStateDir();
    process.exit(0);
  };
  const local = config.provider === 'local';
  // Under `npm start` one Ctrl-C arrives twice (from the terminal, and forwarded by npm): a repeat within a second is
  // the same request; a later one means "exit now", leaving whatever is still running.
  const onSignal = (signal: string): void => {
    if (!stopping) return void shutdown(signal);
    if (Date.now() - stoppingSinceMs < 1000) return;
    process.stdout.write(
      `${signal} again: exiting now${local ? `; stop what is left with: fleetwise down --state-dir ${config.stateDir}` : ''}\n`,
    );
    process.exit(130);
  };
  process.on('SIGTERM', () => onSignal('SIGTERM'));
  process.on('SIGINT', () => onSignal('SIGINT'));
}
