import { AttentionClock } from '../../controller/attention-clock.js';
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Command } from 'commander';
import { SqsInterruptionQueue } from '../../cloud/aws/interruption-queue.js';
import { InterruptionListener } from '../../controller/interruption-listener.js';
import {
  LOG_FORMAT_ENV,
  LOG_FORMATS,
  logDestination,
  commandLogger,
  selectLogFormat,
  type LogFormat,
} from '../log-output.js';
import type { Catalog } from '../../core/catalog.js';
import { ValidationError } from '../../core/validation.js';
import { SqliteStateStore } from '../../controller/state/sqlite-state-store.js';
// The AWS SDK clients take about a second to load: they are imported only when the aws provider or prices need them.
import { fixturePricingApi, PRICING_FIXTURE_DIR_ENV } from '../../cloud/aws/pricing-fixture.js';
import { BUNDLED_CATALOG_PATH, loadCatalogFile } from '../../cloud/catalog-file.js';
import {
  ControllerMetrics,
  parseListenAddress,
  startApiServer,
  type ApiServer,
} from '../../controller/api/server.js';
import { WORKER_MAIN as WORKER_MAIN_PATH } from '../../cloud/local/worker-spawner.js';
import { SystemClock } from '../../controller/clock.js';
import { ORPHAN_POLICIES } from '../../controller/config.js';
import type { ControllerFlags } from '../../controller/config-flags.js';
import { loadControllerConfig } from '../../controller/config-loading.js';
import { describeQueue } from '../../queue/admission-views.js';
import {
  configuredSchedulerFactory,
  configuredSchedulerRecipe,
} from '../../controller/configured-scheduler.js';
import { Controller } from '../../controller/controller.js';
import { contextLimitsFrom, settingsFromConfig } from '../../controller/settings.js';
import { FAULT_POINTS, type FaultInjector, type FaultPoint } from '../../controller/faults.js';
import type { ControllerLogger } from '../../controller/seams.js';
import { PriceRefresher, shouldRefreshPrices } from '../../controller/price-refresh.js';
import { LEASE_LOST_EXIT_CODE, openControllerState, sharesState } from '../controller-state.js';
import { WorkerTaskControl } from '../../controller/worker-task-control.js';
import { WorkerRegistrar } from '../../controller/worker-identity/worker-registrar.js';
import { identityVerifierFor } from '../../controller/worker-identity/identity-certificates.js';
import { checkStateBeforeStart } from '../../controller/empty-state-guard.js';
import type { CloudProvider } from '../../cloud/provider.js';
import { LocalProvider } from '../../cloud/local/local-provider.js';
import { withLocalDelays } from '../../cloud/local/local-delays.js';
import { capacityScale, describeLocalCapacity, hostCapacity } from '../../cloud/local/host-capacity.js';
import { ExternalWorkerSpawner, ProcessWorkerSpawner } from '../../cloud/local/worker-spawner.js';
import type { ExecutorKind } from '../../controller/execution-check.js';
import { dockerAvailable, makeExecutor } from './worker.js';
import { spawn } from 'node:child_process';
import { openObjectStore } from '../../storage/open-object-store.js';
import { SCHEDULER_NAMES } from '../../scheduler/registry.js';
import { ADMIN_TOKEN_FILE, API_URL_FILE, LOCAL_DEFAULT_LISTEN } from '../local-state.js';
import { SERVER_ENV, TOKEN_ENV } from '../client.js';
import { claimStateDir } from '../state-dir-lock.js';
import { resolveEc2Settings } from '../ec2-settings.js';
import { stopLocalFleet, workerStopGraceSeconds } from '../local-fleet-stop.js';
import { controllerBackups, describeRestore } from '../controller-backups.js';
import { restoreState } from '../../controller/backup/restore-state.js';

/**
 * `fleetwise controller`: the long-running controller. Wires the configuration, the
 * SQLite state, the EC2 provider (the AWS SDK's standard configuration: credential chain, AWS_REGION,
 * AWS_ENDPOINT_URL / AWS_ENDPOINT_URL_EC2 / _S3, so it runs unchanged against moto_server), the object store for
 * reports, the HTTP API and the loop, and stops cleanly on SIGTERM/SIGINT.
 */

export const ADMIN_TOKEN_ENV = 'FLEETWISE_ADMIN_TOKEN';
/**
 * Testing hook: `FLEETWISE_CRASH_AT=<fault point>[:<n>]` makes the process SIGKILL itself at the n-th time (default
 * the first) it reaches that point between an intent and its effect, so tests can check recovery from a real kill.
 */
export const CRASH_AT_ENV = 'FLEETWISE_CRASH_AT';
/**
 * Benchmark hook: `FLEETWISE_EXTERNAL_WORKERS=1` makes local mode launch its "instances" without starting their
 * workers; workers register from elsewhere over the worker protocol (`fleetwise bench controller` simulates them).
 */
export const EXTERNAL_WORKERS_ENV = 'FLEETWISE_EXTERNAL_WORKERS';

/** The SQLite state in the state directory (`fleetwise export-trace` reads it too). */
export const DB_FILE = 'state.db';
const WORKER_TOKEN_FILE = 'worker-token';
/** The local provider's record of the instances it launched. */
const LOCAL_INSTANCES_FILE = 'local-instances.json';
export { PID_FILE } from '../state-dir-lock.js';

/**
 * Read a secret from the state directory, or create it there; either way it is left readable by the owner only
 * (0600): a file an older run or an operator made 0644 would let any local user act as the admin.
 */
export function ensureSecretFile(path: string): { value: string; created: boolean } {
  try {
    const existing = readFileSync(path, 'utf8').trim();
    if (existing !== '') {
      chmodSync(path, 0o600);
      return { value: existing, created: false };
    }
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
  }
  const value = randomBytes(32).toString('base64url');
  writeFileSync(path, `${value}\n`, { mode: 0o600, flag: 'w' });
  return { value, created: true };
}

function crashInjectorFromEnv(env: NodeJS.ProcessEnv): FaultInjector | undefined {
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

/** The controller logs to stderr (stdout carries the startup summary), pretty when stderr is a terminal. */
function makeLogger(format: LogFormat): ControllerLogger {
  const log = commandLogger({ component: 'controller' }, logDestination(format, 2));
  return {
    info: (message, data) => log.info(data ?? {}, message),
    warn: (message, data) => log.warn(data ?? {}, message),
    error: (message, data) => log.error(data ?? {}, message),
  };
}

export async function runController(
  flags: ControllerFlags & {
    readonly submit?: readonly string[];
    readonly keepWorkers?: boolean;
    readonly init?: boolean;
    readonly restoreFrom?: string;
  },
  env: NodeJS.ProcessEnv = process.env,
  logFormat: LogFormat = selectLogFormat(undefined, process.stderr, env),
): Promise<void> {
  // The catalog first: its region is the last fallback for the configuration's.
  const preliminary = loadControllerConfig({ flags, env, defaultRegion: 'us-east-1' });
  const loaded: Catalog = loadCatalogFile(preliminary.catalog ?? BUNDLED_CATALOG_PATH);
  const config = loadControllerConfig({ flags, env, defaultRegion: loaded.region });
  // Local "instances" are processes that start in seconds: plan and predict with their delays, not EC2's.
  const catalog = config.provider === 'local' ? withLocalDelays(loaded, config.localBootSeconds) : loaded;
  mkdirSync(config.stateDir, { recursive: true, mode: 0o700 });
  // mkdir's mode applies only to a directory it creates: an existing one is narrowed too, as its files hold secrets.
  chmodSync(config.stateDir, 0o700);
  // A shared (PostgreSQL) state is guarded by its lease instead: controllers sharing it may share the directory too.
  const releaseStateDir = sharesState(config) ? () => undefined : claimStateDir(config.stateDir);
  const log = makeLogger(logFormat);
  const clock = new SystemClock();
  const faults = crashInjectorFromEnv(env);
  const secretFiles = {
    workerToken: join(config.stateDir, WORKER_TOKEN_FILE),
    adminToken: join(config.stateDir, ADMIN_TOKEN_FILE),
  };

  // A new box from a backup: the state (and its tokens) are installed before anything reads them.
  if (flags.restoreFrom !== undefined && sharesState(config)) {
    releaseStateDir();
    throw new ValidationError('fleetwise controller', [
      '--restore-from: restores a SQLite state from its backups; a PostgreSQL state (--state) is restored with ' +
        "the database's own tools (pg_restore, point-in-time recovery)",
    ]);
  }
  if (flags.restoreFrom !== undefined) {
    const restored = await restoreState({
      from: flags.restoreFrom,
      cluster: config.cluster,
      dbFile: join(config.stateDir, DB_FILE),
      secretFiles,
      openObjectStore: (location) => openObjectStore(location, { region: config.region }),
      catalog,
    }).catch((e: unknown) => {
      releaseStateDir();
      throw e;
    });
    process.stdout.write(describeRestore(restored));
    log.info('state restored from a backup', {
      key: restored.manifest.key,
      resubmitted: restored.resubmitted.length,
      ended: restored.ended.length,
    });
  }

  const envToken = env[ADMIN_TOKEN_ENV]?.trim();
  const adminToken =
    envToken !== undefined && envToken !== '' ? envToken : ensureSecretFile(secretFiles.adminToken).value;
  const state = openControllerState(config, {
    nowSeconds: () => clock.nowSeconds(),
    sqlitePath: join(config.stateDir, DB_FILE),
    log,
  });
  const store = state.store;
  // A standby waits here, before anything touches the cloud or the workers, until the lease is its own.
  await state.becomeActive((reason) => {
    log.error(`lost the controller lease (${reason}); exiting so that only the new active controller acts`);
    process.exit(LEASE_LOST_EXIT_CODE);
  });

  let provider: CloudProvider | undefined;
  let localProvider: LocalProvider | undefined;
  /** Who may register as which instance: set wherever workers run (local mode, EC2 with a worker bootstrap). */
  let registrar: WorkerRegistrar | undefined;
  // EC2 workers run tasks in Docker (their user data installs it); local ones with the executor chosen below.
  let executor: ExecutorKind = 'docker';
  let workerToken: string | undefined;
  const local = config.provider === 'local';
  if (local) {
    workerToken = ensureSecretFile(join(config.stateDir, WORKER_TOKEN_FILE)).value;
    const kind: 'docker' | 'process' =
      config.executor === 'auto' ? ((await dockerAvailable()) ? 'docker' : 'process') : config.executor;
    executor = kind;
    const host = hostCapacity();
    const { host: listenHost, port } = parseListenAddress(config.listen ?? LOCAL_DEFAULT_LISTEN);
    // Workers reach this controller, or, given --worker-controller-url, whatever is in front of the active one of
    // several (a load balancer that checks /readyz).
    const controllerUrl =
      config.ec2.worker?.controllerUrl ??
      `http://${listenHost.includes(':') ? `[${listenHost}]` : listenHost}:${port}`;
    process.stdout.write(
      `${describeLocalCapacity(catalog, host)}\n` +
        `local mode: tasks run with the ${kind} executor (${config.executor === 'auto' ? (kind === 'docker' ? 'a Docker engine answered' : 'no Docker engine answered') : 'as configured'})` +
        `${kind === 'process' ? ": a task's image is not used, its command runs on this host (submissions say so)" : ''}\n`,
    );
    localProvider = new LocalProvider({
      stateFile: join(config.stateDir, LOCAL_INSTANCES_FILE),
      instancesDir: join(config.stateDir, 'instances'),
      catalog,
      spawner:
        env[EXTERNAL_WORKERS_ENV] === '1'
          ? new ExternalWorkerSpawner()
          : new ProcessWorkerSpawner({
              controllerUrl,
              launchSecretKey: workerToken,
              executorKind: kind,
              executorFor: (dir, instanceId) => makeExecutor(kind, dir, instanceId),
              giveUpAfterSeconds: config.workerGiveUpSeconds,
              bootSecondsOf: (typeName) => config.localBootSeconds[typeName] ?? 0,
            }),
    });
    provider = state.fence(localProvider);
    const instances = localProvider;
    registrar = new WorkerRegistrar({
      store,
      clusterName: config.cluster,
      clusterKey: workerToken,
      describeInstance: async (cloudId) =>
        (await instances.list(config.cluster, { includeTerminated: true })).find(
          (i) => i.instanceId === cloudId,
        ),
      launchCredential: { kind: 'launch-secret' },
    });
  } else if (!config.dryRun) {
    const { createEc2Client, ec2ApiFromClient } = await import('../../cloud/aws/ec2-api.js');
    const { Ec2Provider } = await import('../../cloud/aws/ec2-provider.js');
    const client = createEc2Client({ region: config.region });
    workerToken =
      config.ec2.worker === undefined
        ? undefined
        : ensureSecretFile(join(config.stateDir, WORKER_TOKEN_FILE)).value;
    const ec2Config = await resolveEc2Settings(config, client, workerToken);
    const ec2 = new Ec2Provider(ec2Config, { api: ec2ApiFromClient(client) });
    provider = state.fence(ec2);
    if (workerToken !== undefined)
      registrar = new WorkerRegistrar({
        store,
        clusterName: config.cluster,
        clusterKey: workerToken,
        describeInstance: (cloudId) => ec2.describeInstance(config.cluster, cloudId),
        launchCredential: {
          kind: 'ec2-instance-identity',
          verifier: identityVerifierFor(config.region, config.ec2.worker?.identityCertificate),
          region: config.region,
        },
      });
    log.info('EC2 settings', {
      amiId: ec2Config.amiId,
      zones: ec2Config.placements.map((p) => p.availabilityZone),
    });
  }
  const onS3 = config.objectStore.startsWith('s3://');
  if (!onS3) mkdirSync(config.objectStore, { recursive: true });
  // A dry run makes no cloud call at all: reports then stay local, or are not written.
  const objectStore =
    config.dryRun && onS3 ? undefined : openObjectStore(config.objectStore, { region: config.region });

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
          secretFiles,
          store,
          objectStore,
          clock,
          log,
          metrics,
        });
  const host = hostCapacity();
  const contextLimits = contextLimitsFrom(config.buildContexts);
  const workers =
    registrar === undefined || objectStore === undefined
      ? undefined
      : new WorkerTaskControl({
          store,
          catalog,
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
                capacityScale: (typeName: string) => {
                  const type = catalog.types.find((t) => t.name === typeName);
                  return type === undefined ? 1 : capacityScale(type, host);
                },
              }
            : {}),
        });
  const schedulerFor = configuredSchedulerFactory(config);
  const controller = new Controller({
    ...(workers === undefined ? {} : { tasks: workers, workers }),
    store,
    catalog,
    scheduler: schedulerFor(catalog),
    schedulerFor,
    schedulerRecipe: configuredSchedulerRecipe(config),
    provider,
    clock,
    objectStore,
    jobArchive: backups?.archive,
    metrics,
    settings: settingsFromConfig(config),
    faults,
    logger: log,
    executor,
  });
  log.info(`scheduler: ${controller.scheduler.name}`);
  log.info(`queue: ${describeQueue(controller.admission.config, config.caps)}`);

  // Prices from the Price List API (or the recorded fixtures: a test hook, as for `catalog refresh`).
  const fixtureDir = env[PRICING_FIXTURE_DIR_ENV];
  const pricingModule =
    shouldRefreshPrices(config) && (fixtureDir === undefined || fixtureDir === '')
      ? await import('../../cloud/aws/pricing.js')
      : undefined;
  const priceRefresher = shouldRefreshPrices(config)
    ? new PriceRefresher({
        pricing:
          pricingModule !== undefined
            ? pricingModule.pricingApiFromClient(pricingModule.createPricingClient({}, env))
            : fixturePricingApi(fixtureDir ?? ''),
        regionCode: config.region,
        initial: catalog,
        clock,
        periodHours: config.priceRefreshHours,
        logger: log,
        apply: (repriced) => controller.applyCatalog(repriced),
      })
    : undefined;

  // EC2's interruption events from EventBridge, beside the workers' own notices. A dry run reads nothing (receiving
  // deletes messages: a cloud call that changes the world).
  const interruptions =
    config.interruptionQueue === undefined || config.dryRun
      ? undefined
      : new InterruptionListener({
          source: new SqsInterruptionQueue(
            { queueUrl: config.interruptionQueue, region: config.region },
            env,
          ),
          handle: (cloudId, report) => controller.interruptionFromQueue(cloudId, report),
          log,
        });

  let api: ApiServer | undefined;
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
        keepWorkers: flags.keepWorkers === true,
        stateDir: config.stateDir,
        giveUpSeconds: config.workerGiveUpSeconds,
        graceSeconds: workerStopGraceSeconds(store),
      }).catch((e: unknown) => log.error(`stopping the local workers failed: ${(e as Error).message}`));
    await api?.close().catch(() => undefined);
    // After the API and the workers: the final backup holds their last reports.
    await backups?.archive.stop().catch(() => undefined);
    await backups?.schedule.stop({ finalBackup: true }).catch(() => undefined);
    state.close();
    releaseStateDir();
    process.exit(0);
  };
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

  // An empty state where a cluster ran before is a lost state: refused unless --init (a dry run touches nothing).
  if (!config.dryRun)
    await checkStateBeforeStart({
      store,
      stateFile: state.description,
      init: flags.init === true,
      sources: {
        clusterName: config.cluster,
        provider,
        localInstanceFile: local ? join(config.stateDir, LOCAL_INSTANCES_FILE) : undefined,
        objectStore,
      },
      nowSeconds: clock.nowSeconds(),
      log,
    }).catch((e: unknown) => {
      priceRefresher?.stop();
      state.close();
      releaseStateDir();
      throw e;
    });
  await controller.start();
  priceRefresher?.start();
  interruptions?.start();
  if (interruptions !== undefined)
    log.info(`reading EC2 interruption events from ${config.interruptionQueue}`);
  if (config.listen !== undefined) {
    try {
      api = await startApiServer(controller, {
        listen: config.listen,
        adminToken,
        catalog,
        metrics,
        contextLimits,
        ...(workers === undefined ? {} : { workers }),
        ...(state.leadership === undefined ? {} : { leadership: state.leadership }),
      });
    } catch (e) {
      // Stop what started, so the one-line error is all that remains (no loop keeps the process alive).
      priceRefresher?.stop();
      await controller.stop().catch(() => undefined);
      state.close();
      releaseStateDir();
      throw listenError(e, config.listen);
    }
    // Workers can reach this controller from now on: their silence counts from here.
    workers?.serving();
    // The client finds a controller it was not told about through this file (src/cli/local-state.ts).
    writeFileSync(join(config.stateDir, API_URL_FILE), `${api.url}\n`, { mode: 0o600 });
  }
  // The first backup now (a restored or recovered state is in the object store at once), then every period.
  backups?.schedule.start();
  process.stdout.write(
    `fleetwise controller: cluster ${config.cluster} in ${config.region}${config.dryRun ? ' (dry run: no cloud calls)' : ''}; ` +
      `state ${state.shared ? state.description : config.stateDir}; reports to ${objectStore?.location ?? 'nowhere (dry run)'}` +
      `${api === undefined ? '' : `; API ${api.url}`}` +
      `${envToken !== undefined && envToken !== '' ? '' : `; admin token in ${join(config.stateDir, ADMIN_TOKEN_FILE)}`}\n`,
  );
  // The quick start's convenience: submit job specs once the API answers (as `fleetwise submit` would), but only
  // into an empty state: a restart (every `npm start`) must not queue the example again.
  const toSubmit = flags.submit ?? [];
  if (api !== undefined && toSubmit.length > 0) {
    const existing = store.listJobs().length;
    if (existing > 0)
      process.stdout.write(
        `not submitting ${toSubmit.join(', ')}: the state already has ${existing} job(s) (fleetwise jobs lists them)\n`,
      );
    else
      for (const file of toSubmit) {
        const command = submitChildCommand(file, api.url, adminToken, process.env);
        const child = spawn(command.executable, command.args, {
          env: command.env,
          stdio: ['ignore', 'inherit', 'inherit'],
        });
        await new Promise((resolve) => child.once('exit', resolve));
      }
  }
}

/**
 * How `--submit` runs `fleetwise submit` for one file. The admin token travels in the child's environment, which
 * only its owner can read, never in its arguments, which every local user sees (`ps`, /proc/<pid>/cmdline).
 */
export function submitChildCommand(
  file: string,
  serverUrl: string,
  adminToken: string,
  parentEnv: NodeJS.ProcessEnv,
): { readonly executable: string; readonly args: readonly string[]; readonly env: NodeJS.ProcessEnv } {
  return {
    executable: process.execPath,
    args: [WORKER_MAIN_PATH, 'submit', file],
    env: { ...parentEnv, [SERVER_ENV]: serverUrl, [TOKEN_ENV]: adminToken },
  };
}

/** A bind failure as one line that says what to change. */
function listenError(error: unknown, listen: string): Error {
  const code = (error as NodeJS.ErrnoException).code;
  if (code === 'EADDRINUSE')
    return new Error(
      `cannot serve the API on ${listen}: the address is in use (another controller?); choose another with --listen HOST:PORT`,
    );
  if (code === 'EACCES')
    return new Error(
      `cannot serve the API on ${listen}: permission denied (ports below 1024 need privileges); choose another with --listen HOST:PORT`,
    );
  if (code === 'EADDRNOTAVAIL')
    return new Error(
      `cannot serve the API on ${listen}: no such address on this machine; choose another with --listen HOST:PORT`,
    );
  return error instanceof Error ? error : new Error(String(error));
}

export function registerController(program: Command): void {
  program
    .command('controller')
    .description(
      'run the controller: plan rounds (Eva, or the --scheduler policy), launch and terminate EC2 instances, serve the API',
    )
    .option(
      '--scheduler <name>',
      `scheduling policy (default eva): ${SCHEDULER_NAMES.join(', ')}; owl assumes no interference`,
    )
    .option('--config <file>', 'YAML (or JSON) configuration; flags override it')
    .option(
      '--interruption-queue <url>',
      'SQS queue URL of EC2 spot interruption and rebalance events (EventBridge): interrupted instances are drained at once',
    )
    .option(
      '--provider <name>',
      'cloud provider: aws, or local (worker processes on this machine; the quick start)',
    )
    .option(
      '--executor <kind>',
      'how workers run tasks: auto (Docker when an engine answers) | docker | process',
    )
    .option(
      '--heartbeat-timeout-seconds <s>',
      'replace an instance whose worker is silent this long (default 60; local 10)',
    )
    .option('--submit <files...>', 'submit these job specs once the API is up (local quick start)')
    .option(
      '--keep-workers',
      'local mode: on stop, leave the worker processes and their tasks running (default: checkpoint and stop them)',
    )
    .option(
      '--worker-give-up-seconds <s>',
      'local mode: a worker without an answer from its controller this long checkpoints its tasks and exits (default 300; 0 never)',
    )
    .option('--cluster <name>', 'cluster name (the fleetwise:cluster tag on every instance)')
    .option('--region <region>', 'AWS region (default: AWS_REGION, then the catalog region)')
    .option('--state-dir <dir>', 'state directory (SQLite database, tokens)')
    .option(
      '--state <url>',
      'keep the state in PostgreSQL (postgres://user@host:port/db; password in PGPASSWORD or ~/.pgpass): every ' +
        'controller on the same database contends for one lease, one is active, the others stand by',
    )
    .option('--bucket <name>', 'S3 bucket for reports (shorthand for --object-store s3://NAME)')
    .option('--object-store <location>', 's3://bucket/prefix or a directory (default: <state-dir>/objects)')
    .option('--listen <host:port>', 'HTTP API address (default for --provider local: 127.0.0.1:7070)')
    .option('--round-seconds <s>', 'seconds between scheduling rounds (default 300)')
    .option('--poll-seconds <s>', 'seconds between reconciliation passes (default min(round, 15))')
    .option('--catalog <file>', 'instance catalog (default: the bundled us-east-1 catalog)')
    .option('--max-cost-per-hour <usd>', 'hard cap on the fleet $/hour')
    .option('--max-instances <n>', 'hard cap on instances')
    .option('--max-migrations-per-round <n>', 'hard cap on job moves per round')
    .option('--dry-run', 'plan and record decisions, make no cloud call')
    .option(
      '--orphans <policy>',
      `instances tagged with the cluster but unknown to the state: ${ORPHAN_POLICIES.join(' | ')} (default keep: ` +
        'left running, reported in the log, `fleetwise cluster` and /metrics)',
    )
    .option(
      '--init',
      'start a new cluster on an empty state even where one ran before (its instances, instance file or objects ' +
        'remain); without it such a start is refused as a lost state',
    )
    .option(
      '--registration-timeout-seconds <s>',
      'replace an instance whose worker has not registered by then (default 900)',
    )
    .option(
      '--registration-backoff-seconds <s>',
      'first launch backoff after a registration failure, doubling (default 60)',
    )
    .option('--report-every-seconds <s>', 'cost report period (default 3600)')
    .option(
      '--backup-seconds <s>',
      'back the state up to the object store every this many seconds: the most a lost machine loses (default 60; 0 off)',
    )
    .option('--backup-keep <n>', 'state backups kept in the object store (default 10)')
    .option(
      '--restore-from <location>',
      "start a new box from a backup: s3://bucket/prefix or a directory (the cluster's newest backup there), or one " +
        'backup in it (…/backups/<cluster>/state-<seq>.db.gz); the state directory must hold no state yet',
    )
    .option(
      '--price-refresh-hours <h>',
      'hours between on-demand price refreshes from the AWS Price List API; 0 disables (default 24)',
    )
    .option('--ami <id>', 'worker AMI (default: newest Amazon Linux 2023)')
    .option('--subnets <ids>', 'comma-separated subnet ids (their zones are used)')
    .option('--security-groups <ids>', 'comma-separated security group ids')
    .option('--instance-profile <name|arn>', 'instance profile of the workers')
    .option('--key-name <name>', 'EC2 key pair')
    .option(
      '--worker-controller-url <url>',
      'start a worker on new instances (user data) that reaches the API here (local mode: where workers reach it)',
    )
    .option('--user-data-template <file>', 'user-data template (default infra/worker-user-data.sh)')
    .option(
      '--identity-certificate <file>',
      "PEM certificate(s) the workers' signed instance identity documents are verified against (default: AWS's " +
        'RSA-2048 certificate for the region, bundled)',
    )
    .option(
      '--log-format <format>',
      `${LOG_FORMATS.join(' | ')}: auto is pretty on a terminal, JSON lines otherwise (default: ${LOG_FORMAT_ENV} or auto)`,
    )
    .action(
      async ({
        logFormat,
        ...options
      }: ControllerFlags & {
        submit?: string[];
        keepWorkers?: boolean;
        init?: boolean;
        restoreFrom?: string;
        logFormat?: string;
      }) => {
        await runController(options, process.env, selectLogFormat(logFormat, process.stderr));
      },
    );
}
