import { mkdirSync } from 'node:fs';
import type { Catalog } from '../../../core/catalog.js';
import type { BillingTypes } from '../../../controller/instance-market.js';
import { capacityScale, hostCapacity } from '../../../cloud/local/host-capacity.js';
import { ControllerMetrics } from '../../../controller/api/server.js';
import { AttentionClock } from '../../../controller/attention-clock.js';
import type { Clock } from '../../../controller/clock.js';
import type { ControllerConfig } from '../../../controller/config.js';
import {
  configuredSchedulerFactory,
  configuredSchedulerRecipe,
} from '../../../controller/configured-scheduler.js';
import { Controller } from '../../../controller/controller.js';
import type { FaultInjector } from '../../../controller/faults.js';
import type { ControllerLogger } from '../../../controller/seams.js';
import { contextLimitsFrom, settingsFromConfig } from '../../../controller/settings.js';
import { SqliteStateStore } from '../../../controller/state/sqlite-state-store.js';
import { WorkerTaskControl } from '../../../controller/worker-task-control.js';
import { describeQueue } from '../../../queue/admission-views.js';
import type { ObjectStore } from '../../../storage/object-store.js';
import { openObjectStore } from '../../../storage/open-object-store.js';
import { controllerBackups, type ControllerBackups } from '../../controller-backups.js';
import type { ControllerState } from '../../controller-state.js';
import type { Fleet } from './provider-setup.js';
import type { SecretFiles } from './secrets.js';

/** Build the Controller and the services it runs with: object store, metrics, backups and the workers' endpoint. */

export interface BuildControllerOptions {
  readonly config: ControllerConfig;
  readonly catalog: Catalog;
  /** Types only ended instances ran that the catalog lacks: billed, never planned. */
  readonly billingTypes?: BillingTypes | undefined;
  readonly state: ControllerState;
  readonly fleet: Fleet;
  readonly clock: Clock;
  readonly faults: FaultInjector | undefined;
  readonly secretFiles: SecretFiles;
  readonly log: ControllerLogger;
}

export interface BuiltController {
  readonly controller: Controller;
  /** Where reports go; undefined in a dry run onto S3 (no cloud call). */
  readonly objectStore: ObjectStore | undefined;
  readonly metrics: ControllerMetrics;
  readonly backups: ControllerBackups | undefined;
  /** The workers' side of the API; undefined where no worker runs or without an object store. */
  readonly workers: WorkerTaskControl | undefined;
  readonly contextLimits: ReturnType<typeof contextLimitsFrom>;
}

/** Assemble the controller (nothing started yet), logging the scheduler and the queue it runs with. */
export async function buildController(options: BuildControllerOptions): Promise<BuiltController> {
  const { config, catalog, state, clock, log } = options;
  const { store } = state;
  const { registrar } = options.fleet;
  const local = config.provider === 'local';
  const onS3 = config.objectStore.startsWith('s3://');
  if (!onS3) mkdirSync(config.objectStore, { recursive: true });
  // A dry run makes no cloud call at all: reports then stay local, or are not written.
  const objectStore =
    config.dryRun && onS3 ? undefined : await openObjectStore(config.objectStore, { region: config.region });

  const metrics = new ControllerMetrics();
  // A dry run keeps no backups: it changes nothing a new box would need. A PostgreSQL state is the database's to back
  // up (its own base backups and WAL archiving); these backups copy the SQLite file.
  const backups =
    config.dryRun || !(store instanceof SqliteStateStore)
      ? undefined
      : controllerBackups({
          everySeconds: config.backupSeconds,
          keep: config.backupKeep,
          cluster: config.cluster,
          stateDir: config.stateDir,
          secretFiles: options.secretFiles,
          store,
          objectStore,
          clock,
          log,
          metrics,
        });
  const host = hostCapacity();
  const contextLimits = contextLimitsFrom(config.buildContexts);
  // The workers' endpoint is built before the controller it serves; once that exists, its current catalog (replaced by
  // each price refresh) prices the holds the workers report.
  const current: { controller?: Controller } = {};
  const workers =
    registrar === undefined || objectStore === undefined
      ? undefined
      : new WorkerTaskControl({
          store,
          catalog: () => current.controller?.catalog ?? catalog,
          clock,
          registrar,
          objectStoreLocation: objectStore.location,
          heartbeatSeconds: config.workerHeartbeatSeconds,
          heartbeatTimeoutSeconds: config.workerHeartbeatTimeoutSeconds,
          // A stall of this process (a starved host, a long synchronous step) does not count as its workers' silence.
          attention: new AttentionClock().start(),
          contextLimits,
          logger: log,
          coStart: config.coStart,
          onStartMeasured: (_jobId, measured) => metrics.observeStart(measured),
          ...(local
            ? {
                // A type's capacity is the same in every catalog (a price refresh changes only prices).
                capacityScale: (typeName: string) => {
                  const type = catalog.types.find((t) => t.name === typeName);
                  return type === undefined ? 1 : capacityScale(type, host);
                },
                // The host's GPUs, if any, are not the catalog's: GPU types run their tasks without devices.
                gpuDevices: false,
              }
            : {}),
        });
  // EC2 sells spot (Eva buys it where the catalog has pools and it pays); the local provider has no spot market.
  const market = { spot: !local };
  const schedulerFor = configuredSchedulerFactory(config, market);
  const controller = new Controller({
    ...(workers === undefined ? {} : { tasks: workers, workers }),
    store,
    catalog,
    billingTypes: options.billingTypes,
    scheduler: schedulerFor(catalog),
    schedulerFor,
    schedulerRecipe: configuredSchedulerRecipe(config, market),
    spotMarket: market.spot,
    provider: options.fleet.provider,
    clock,
    objectStore,
    jobArchive: backups?.archive,
    metrics,
    // Holds at the co-start barrier that end without a release count as they end (a measured start counts its own).
    onBarrierIdle: (dollars) => metrics.observeBarrierIdle(dollars),
    settings: settingsFromConfig(config),
    faults: options.faults,
    logger: log,
    executor: options.fleet.executor,
  });
  current.controller = controller;
  log.info(`scheduler: ${controller.scheduler.name}`);
  log.info(`queue: ${describeQueue(controller.admission.config, config.caps)}`);
  return { controller, objectStore, metrics, backups, workers, contextLimits };
}
