import type { Command } from 'commander';
import type { Logger } from 'pino';
import type { Catalog } from '../../core/catalog.js';
import { spotInZones } from '../../core/spot.js';
import { ValidationError } from '../../core/validation.js';
import {
  LOG_FORMAT_ENV,
  LOG_FORMATS,
  logDestination,
  commandLogger,
  selectLogFormat,
  type LogFormat,
} from '../log-output.js';
import type { ApiServer } from '../../controller/api/server.js';
import { SystemClock } from '../../controller/clock.js';
import { METRICS_AUTH_MODES, ORPHAN_POLICIES } from '../../controller/config.js';
import type { ControllerFlags } from '../../controller/config-flags.js';
import { LOCAL_DEFAULTS as LOCAL } from '../../controller/config-loading.js';
import type { ControllerLogger } from '../../controller/seams.js';
import type { ControllerState } from '../controller-state.js';
import { SCHEDULER_NAMES } from '../../scheduler/registry.js';
import { priceRefresherFor, interruptionListenerFor } from './controller/aws-feeds.js';
import { openActiveState } from './controller/active-state.js';
import { buildController } from './controller/build-controller.js';
import { loadConfigAndCatalog, withStateInstanceTypes } from './controller/config-and-catalog.js';
import { crashInjectorFromEnv } from './controller/crash-injection.js';
import { setUpFleet } from './controller/provider-setup.js';
import { submitOnStart } from './controller/quick-start-submit.js';
import { checkSubmitFiles } from './controller/submit-files-check.js';
import {
  METRICS_TOKEN_ENV,
  adminTokenFor,
  metricsTokenFor,
  refuseUnusedMetricsToken,
  secretFilesIn,
} from './controller/secrets.js';
import { giveBackOnSignal, stopOnSignals } from './controller/shutdown.js';
import { startController } from './controller/startup.js';
import { claimStateDirectory, restoreFromBackup } from './controller/state-dir.js';

/**
 * `fleetwise controller`: the long-running controller. Wires the configuration, the
 * SQLite state, the EC2 provider (the AWS SDK's standard configuration: credential chain, AWS_REGION,
 * AWS_ENDPOINT_URL / AWS_ENDPOINT_URL_EC2 / _S3, so it runs unchanged against moto_server), the object store for
 * reports, the HTTP API and the loop, and stops cleanly on SIGTERM/SIGINT.
 */

export { ADMIN_TOKEN_ENV, ensureSecretFile } from './controller/secrets.js';
export { CRASH_AT_ENV } from './controller/crash-injection.js';
export { EXTERNAL_WORKERS_ENV } from './controller/provider-setup.js';
export { DB_FILE } from './controller/state-dir.js';
export { PID_FILE } from '../state-dir-lock.js';
export { submitChildCommand } from './controller/quick-start-submit.js';

/** The controller logs to stderr (stdout carries the startup summary), pretty when stderr is a terminal. */
function makeLogger(format: LogFormat): ControllerLogger & { readonly pino: Logger } {
  const log = commandLogger({ component: 'controller' }, logDestination(format, 2));
  return {
    info: (message, data) => log.info(data ?? {}, message),
    warn: (message, data) => log.warn(data ?? {}, message),
    error: (message, data) => log.error(data ?? {}, message),
    pino: log,
  };
}

/** Run the controller until a signal stops it: set up its state, cloud and services, start them, then serve. */
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
  const loaded = loadConfigAndCatalog(flags, env);
  const { config } = loaded;
  // The specs go in through the API: without one they would be dropped without a word.
  if ((flags.submit?.length ?? 0) > 0 && config.listen === undefined)
    throw new ValidationError('--submit', [
      'submits through the API, which this controller does not serve: give --listen HOST:PORT (local mode listens by default)',
    ]);
  refuseUnusedMetricsToken(env, config.metricsAuth);
  const releaseStateDir = claimStateDirectory(config);
  const log = makeLogger(logFormat);
  const clock = new SystemClock();
  const faults = crashInjectorFromEnv(env);
  const secretFiles = secretFilesIn(config.stateDir);

  // A new box from a backup: the state (and its tokens) are installed before anything reads them.
  if (flags.restoreFrom !== undefined)
    await restoreFromBackup({
      from: flags.restoreFrom,
      config,
      catalog: loaded.catalog,
      secretFiles,
      log,
      releaseStateDir,
    });

  const adminToken = adminTokenFor(env, secretFiles.adminToken);
  const metricsToken =
    config.metricsAuth === 'token' ? metricsTokenFor(env, secretFiles.metricsToken) : undefined;
  // From the moment the lease is taken, a start that fails, or a signal before stopOnSignals takes over, gives it back
  // at once (with the state directory): a standby would otherwise wait for it to expire behind a controller that
  // never ran.
  let opened: ControllerState | undefined;
  const giveBack = (): void => {
    opened?.close();
    releaseStateDir();
  };
  const giveBackOnStop = giveBackOnSignal(giveBack);
  const started = await (async () => {
    const state = await openActiveState(config, {
      clock,
      log,
      opened: (s) => (opened = s),
      // Checked where they would be submitted (a restart, a state with jobs, submits none), before a standby waits.
      beforeLease: async (s) => {
        if ((flags.submit?.length ?? 0) > 0 && s.store.countJobs() === 0)
          await checkSubmitFiles(flags.submit ?? []);
      },
    });

    // Checked once the state is this controller's: the types its instances ran are the ones its bills must price.
    const {
      catalog: loadedCatalog,
      listCatalog,
      billingTypes,
    } = withStateInstanceTypes(loaded, state.store.listInstances(), log);
    const fleet = await setUpFleet({ config, catalog: loadedCatalog, env, state, secretFiles, log });
    // Spot is planned only in the pools of the zones the fleet can launch in.
    const inFleetZones = (c: Catalog): Catalog =>
      fleet.zones === undefined ? c : { ...c, spot: spotInZones(c.spot, fleet.zones) };
    const catalog = inFleetZones(loadedCatalog);
    const built = await buildController({
      config,
      catalog,
      billingTypes,
      state,
      fleet,
      clock,
      faults,
      secretFiles,
      log,
    });
    const { controller, backups } = built;
    // Every cap's counter has a series before the API serves, so the first time one is hit shows in increase().
    built.metrics.expectCaps(
      controller.admission.caps,
      controller.admission.config.classes.map((c) => c.id),
    );
    const feedOptions = {
      config,
      env,
      catalog,
      // In every zone: the price refresher lays the overrides over it before it keeps the fleet's zones, as above (the
      // overrides were checked against the whole catalog, and may price spot only in other zones).
      listCatalog,
      spotZones: fleet.zones,
      clock,
      controller,
      log,
    };
    const priceRefresher = await priceRefresherFor(feedOptions);
    const interruptions = await interruptionListenerFor(feedOptions);

    // The signal handlers are installed before the API serves: they close it once it does.
    const serving: { api: ApiServer | undefined } = { api: undefined };
    giveBackOnStop();
    stopOnSignals({
      config,
      keepWorkers: flags.keepWorkers === true,
      state,
      controller,
      localProvider: fleet.local?.provider,
      priceRefresher,
      interruptions,
      backups,
      api: () => serving.api,
      releaseStateDir,
      log,
    });
    const api = await startController({
      config,
      init: flags.init === true,
      state,
      fleet,
      built,
      priceRefresher,
      interruptions,
      adminToken: adminToken.value,
      metricsToken: metricsToken?.value,
      clock,
      log,
      apiLogger: log.pino,
      releaseStateDir,
    });
    serving.api = api;
    return { state, objectStore: built.objectStore, api };
  })().catch((e: unknown) => {
    giveBackOnStop();
    giveBack();
    throw e;
  });
  const { state, objectStore, api } = started;
  process.stdout.write(
    `fleetwise controller: cluster ${config.cluster} in ${config.region}${config.dryRun ? ' (dry run: no cloud calls)' : ''}; ` +
      `state ${state.shared ? state.description : config.stateDir}; reports to ${objectStore?.location ?? 'nowhere (dry run)'}` +
      `${api === undefined ? '' : `; API ${api.url}`}` +
      `${adminToken.file === undefined ? '' : `; admin token in ${adminToken.file}`}` +
      `${metricsToken?.file === undefined ? '' : `; metrics token in ${metricsToken.file}`}\n`,
  );
  const toSubmit = flags.submit ?? [];
  if (api !== undefined && toSubmit.length > 0)
    await submitOnStart({
      files: toSubmit,
      apiUrl: api.url,
      adminToken: adminToken.value,
      store: state.store,
    });
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
      `replace an instance whose worker is silent this long (default 60; local ${LOCAL.workerHeartbeatTimeoutSeconds})`,
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
    .option(
      '--region <region>',
      'AWS region (default: AWS_REGION, then AWS_DEFAULT_REGION, then the catalog region)',
    )
    .option('--state-dir <dir>', 'state directory (SQLite database, tokens)')
    .option(
      '--state <url>',
      'keep the state in PostgreSQL (postgres://user@host:port/db; password in PGPASSWORD or ~/.pgpass): every ' +
        'controller on the same database contends for one lease, one is active, the others stand by',
    )
    .option('--bucket <name>', 'S3 bucket for reports (shorthand for --object-store s3://NAME)')
    .option('--object-store <location>', 's3://bucket/prefix or a directory (default: <state-dir>/objects)')
    .option('--listen <host:port>', `HTTP API address (default for --provider local: ${LOCAL.listen})`)
    .option(
      '--advertise-url <url>',
      'API URL published with the lease for standbys and clients (default: --listen, a wildcard host replaced by ' +
        "this host's name)",
    )
    .option(
      '--metrics-auth <mode>',
      `who may read /metrics: ${METRICS_AUTH_MODES.join(' | ')} (default none: anyone who reaches the API; token: ` +
        `the metrics token, from ${METRICS_TOKEN_ENV} or <state-dir>/metrics-token, or the admin token)`,
    )
    .option(
      '--round-seconds <s>',
      `seconds between scheduling rounds (default 300; local ${LOCAL.roundSeconds})`,
    )
    .option(
      '--poll-seconds <s>',
      `seconds between reconciliation passes (default min(round, 15); local ${LOCAL.pollSeconds})`,
    )
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
      `replace an instance whose worker has not registered by then (default 900; local ${LOCAL.registrationTimeoutSeconds})`,
    )
    .option(
      '--registration-backoff-seconds <s>',
      `first launch backoff after a registration failure, doubling (default 60; local ${LOCAL.registrationBackoffBaseSeconds})`,
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
      'hours between on-demand price refreshes from the AWS Price List API: 0 disables, else 0.1 to 744 ' +
        `(default 24; local ${LOCAL.priceRefreshHours})`,
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
