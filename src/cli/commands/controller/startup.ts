import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { LocalInstance } from '../../../cloud/local/local-provider.js';
import { readWorkerExit } from '../../../cloud/local/worker-exit-record.js';
import { startApiServer, type ApiServer } from '../../../controller/api/server.js';
import type { Clock } from '../../../controller/clock.js';
import type { ControllerConfig } from '../../../controller/config.js';
import { checkStateBeforeStart } from '../../../controller/empty-state-guard.js';
import { recordStoppedWithoutController } from '../../../controller/stopped-with-controller.js';
import type { InterruptionListener } from '../../../controller/interruption-listener.js';
import type { PriceRefresher } from '../../../controller/price-refresh.js';
import type { ControllerLogger } from '../../../controller/seams.js';
import type { ControllerState } from '../../controller-state.js';
import { API_URL_FILE } from '../../local-state.js';
import { listenError } from '../../listen-error.js';
import type { BuiltController } from './build-controller.js';
import type { Fleet } from './provider-setup.js';

/** Starting a built controller: the empty-state guard, the loop and its feeds, the HTTP API, then the backups. */

/**
 * How long an API change that waits for a backup (a team token made or revoked) waits at most: well within the
 * client's 30 s, so a stuck object store gets the change answered, with a warning, rather than timed out.
 */
const CHANGE_BACKUP_SECONDS = 20;

export interface StartupOptions {
  readonly config: ControllerConfig;
  /** `--init`: start a new cluster on an empty state even where one ran before. */
  readonly init: boolean;
  readonly state: ControllerState;
  readonly fleet: Fleet;
  readonly built: BuiltController;
  readonly priceRefresher: PriceRefresher | undefined;
  readonly interruptions: InterruptionListener | undefined;
  readonly adminToken: string;
  /** The token `/metrics` asks for; undefined: it asks for none. */
  readonly metricsToken: string | undefined;
  readonly clock: Clock;
  readonly log: ControllerLogger;
  /** The pino logger behind `log`: the API logs its failures there (server.ts takes a child at warn). */
  readonly apiLogger?: Logger;
  readonly releaseStateDir: () => void;
}

/** Start the controller and whatever runs beside it; returns the API server when `--listen` gives it an address. */
export async function startController(options: StartupOptions): Promise<ApiServer | undefined> {
  const { config, state, priceRefresher, interruptions, log, releaseStateDir } = options;
  const { controller, objectStore, metrics, backups, workers, contextLimits } = options.built;
  const objectStoreWarning = sharedObjectStoreWarning(config, state);
  if (objectStoreWarning !== undefined) log.warn(objectStoreWarning);
  // An empty state where a cluster ran before is a lost state: refused unless --init (a dry run touches nothing).
  if (!config.dryRun)
    await checkStateBeforeStart({
      store: state.store,
      stateFile: state.description,
      init: options.init,
      sources: {
        clusterName: config.cluster,
        provider: options.fleet.provider,
        localInstanceFile: options.fleet.local?.instanceFile,
        objectStore,
      },
      nowSeconds: options.clock.nowSeconds(),
      log,
    }).catch((e: unknown) => {
      priceRefresher?.stop();
      state.close();
      releaseStateDir();
      throw e;
    });
  // The API binds before the loop starts: a port in use then stops the start before any round launches anything.
  let api: ApiServer | undefined;
  if (config.listen !== undefined) {
    try {
      api = await startApiServer(controller, {
        listen: config.listen,
        adminToken: options.adminToken,
        metricsToken: options.metricsToken,
        // The controller's current catalog: a dry run is priced as the plan would price it after a price refresh.
        catalog: () => controller.catalog,
        metrics,
        contextLimits,
        ...(options.apiLogger === undefined ? {} : { logger: options.apiLogger }),
        ...(workers === undefined ? {} : { workers }),
        ...(state.leadership === undefined ? {} : { leadership: state.leadership }),
        ...(backups === undefined
          ? {}
          : {
              backupNow: () => backups.schedule.backupCurrentState({ timeoutSeconds: CHANGE_BACKUP_SECONDS }),
            }),
      });
    } catch (e) {
      // Stop what started, so the one-line error is all that remains. The loop has not started: no instance was
      // launched or replaced, no worker spawned, for a controller that cannot be reached.
      priceRefresher?.stop();
      state.close();
      releaseStateDir();
      throw listenError(e, config.listen);
    }
    options.fleet.local?.apiBound(api.url);
    // Workers can reach this controller from now on: their silence counts from here.
    workers?.serving();
    // The client finds a controller it was not told about through this file (src/cli/local-state.ts).
    writeFileSync(join(config.stateDir, API_URL_FILE), `${api.url}\n`, { mode: 0o600 });
  }
  try {
    const local = options.fleet.local;
    if (local !== undefined && !config.dryRun) {
      // Instances a controller that crashed mid-launch recorded without starting their workers: started now (the
      // workers can reach this controller), or each would wait out the registration timeout and be replaced.
      const started = local.provider.startUnstartedWorkers(config.cluster);
      if (started.length > 0)
        log.info(`started the workers of ${started.join(', ')}, recorded before a crash but never started`);
      // Before the recovery's cloud sync, which closes them: workers `fleetwise down` stopped while no controller
      // ran, and workers that gave up waiting for one, checkpointed first, as with a clean stop of this controller;
      // they are not lost capacity. Those that gave up are closed here, each when it exited.
      await local.provider.closeGoneWorkers(config.cluster);
      recordStoppedWithoutController(
        state.store,
        local.provider.instances().flatMap((i) => {
          const atMs = stoppedWithoutControllerAt(i);
          return atMs === undefined ? [] : [{ cloudId: i.instanceId, atSeconds: atMs / 1000 }];
        }),
      );
    }
    await controller.start();
  } catch (e) {
    // As for a bind failure: the lease is given back with the state, or a standby would wait out a lease that a
    // controller which never ran holds.
    await api?.close().catch(() => undefined);
    priceRefresher?.stop();
    state.close();
    releaseStateDir();
    throw e;
  }
  priceRefresher?.start();
  interruptions?.start();
  if (interruptions !== undefined)
    log.info(`reading EC2 interruption events from ${config.interruptionQueue}`);
  // The first backup now (a restored or recovered state is in the object store at once), then every period.
  backups?.schedule.start();
  return api;
}

/** When a local instance ended as a clean stop would end it, with no controller running; undefined otherwise. */
function stoppedWithoutControllerAt(instance: LocalInstance): number | undefined {
  if (instance.state !== 'terminated' || instance.terminatedAtMs === undefined) return undefined;
  if (instance.stoppedBy === 'down') return instance.terminatedAtMs;
  return readWorkerExit(instance.dir)?.reason === 'gave-up' ? instance.terminatedAtMs : undefined;
}

/**
 * Controllers sharing a PostgreSQL state take over from one another, possibly on other machines: a standby there
 * cannot read the checkpoints, contexts and logs the active one kept in a directory of its own. Only a warning, as two
 * controllers on one machine (a test of failover) do share the directory.
 */
export function sharedObjectStoreWarning(
  config: ControllerConfig,
  state: Pick<ControllerState, 'shared' | 'description'>,
): string | undefined {
  if (!state.shared || config.objectStore.startsWith('s3://')) return undefined;
  // The description, not the configured URL: it never shows a password.
  return (
    `the state ${state.description} is shared with other controllers, but the object store is the local directory ` +
    `${config.objectStore}: a controller on another machine that takes over cannot read its checkpoints, build ` +
    `contexts or logs; every controller on one database must use the same s3:// object store (--object-store)`
  );
}
