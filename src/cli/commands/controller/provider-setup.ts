import { join } from 'node:path';
import type { Catalog } from '../../../core/catalog.js';
import type { CloudProvider } from '../../../cloud/provider.js';
import { goneGraceWithin, LocalProvider } from '../../../cloud/local/local-provider.js';
import { describeLocalCapacity, hostCapacity } from '../../../cloud/local/host-capacity.js';
import {
  CONTROLLER_ADDRESS_FILE,
  recordControllerAddress,
} from '../../../cloud/local/controller-address-file.js';
import { ExternalWorkerSpawner, ProcessWorkerSpawner } from '../../../cloud/local/worker-spawner.js';
import { parseListenAddress } from '../../../controller/api/server.js';
import type { ControllerConfig } from '../../../controller/config.js';
import type { ExecutorKind } from '../../../controller/execution-check.js';
import type { ControllerLogger } from '../../../controller/seams.js';
import { WorkerRegistrar } from '../../../controller/worker-identity/worker-registrar.js';
import { identityVerifierFor } from '../../../controller/worker-identity/identity-certificates.js';
import type { ControllerState } from '../../controller-state.js';
import { resolveEc2Settings } from '../../ec2-settings.js';
import { LOCAL_DEFAULT_LISTEN, LOCAL_INSTANCES_FILE } from '../../local-state.js';
import { ValidationError } from '../../../core/validation.js';
import { dockerUnreachable, dockerWhere } from '../../../worker/executors/docker-engine.js';
import { dockerAvailable, makeExecutor } from '../worker.js';
import { taskStopperFor } from '../local-task-stopper.js';
import { ensureSecretFile, type SecretFiles } from './secrets.js';

/** The controller's cloud: the local or EC2 provider, how its workers run tasks, and who may register as them. */

/**
 * Benchmark hook: `FLEETWISE_EXTERNAL_WORKERS=1` makes local mode launch its "instances" without starting their
 * workers; workers register from elsewhere over the worker protocol (`fleetwise bench controller` simulates them).
 */
export const EXTERNAL_WORKERS_ENV = 'FLEETWISE_EXTERNAL_WORKERS';

export interface Fleet {
  /** What launches and terminates instances, behind the lease; undefined in a dry run (no cloud call). */
  readonly provider: CloudProvider | undefined;
  /** Local mode's provider (its workers stop with the controller) and its record of the instances it launched. */
  readonly local:
    | {
        readonly provider: LocalProvider;
        readonly instanceFile: string;
        /** The API is bound at `url`: workers spawned from now on are told it (unless --worker-controller-url says). */
        readonly apiBound: (url: string) => void;
      }
    | undefined;
  /** Who may register as which instance: set wherever workers run (local mode, EC2 with a worker bootstrap). */
  readonly registrar: WorkerRegistrar | undefined;
  /** EC2 workers run tasks in Docker (their user data installs it); local ones with the executor chosen at start. */
  readonly executor: ExecutorKind;
  /** The zones instances can be launched in (EC2: its subnets'); undefined where any the catalog names will do. */
  readonly zones?: readonly string[] | undefined;
}

export interface FleetOptions {
  readonly config: ControllerConfig;
  readonly catalog: Catalog;
  readonly env: NodeJS.ProcessEnv;
  readonly state: ControllerState;
  readonly secretFiles: SecretFiles;
  readonly log: ControllerLogger;
}

/** The provider for `--provider`: local worker processes, EC2 (none in a dry run), behind the state's lease. */
export async function setUpFleet(options: FleetOptions): Promise<Fleet> {
  if (options.config.provider === 'local') return setUpLocalFleet(options);
  if (!options.config.dryRun) return setUpEc2Fleet(options);
  return { provider: undefined, local: undefined, registrar: undefined, executor: 'docker' };
}

/** Local mode: "instances" are worker processes on this host, running tasks with the configured executor. */
async function setUpLocalFleet({
  config,
  catalog,
  env,
  state,
  secretFiles,
  log,
}: FleetOptions): Promise<Fleet> {
  const workerToken = ensureSecretFile(secretFiles.workerToken).value;
  const kind: 'docker' | 'process' =
    config.executor === 'auto' ? ((await dockerAvailable()) ? 'docker' : 'process') : config.executor;
  if (config.executor === 'docker') {
    // Asked for by name: without an engine every worker would fail its tasks' starts, or go silent and be replaced
    // in a loop. Said now, once, rather than by the fleet.
    const why = await dockerUnreachable(env);
    if (why !== undefined)
      throw new ValidationError('--executor', [
        `docker: no Docker engine answers at ${dockerWhere(env)} (${why}); start one or set DOCKER_HOST, or use ` +
          '--executor process (or auto)',
      ]);
  }
  const host = hostCapacity();
  const { host: listenHost, port } = parseListenAddress(config.listen ?? LOCAL_DEFAULT_LISTEN);
  // Workers reach this controller, or, given --worker-controller-url, whatever is in front of the active one of
  // several (a load balancer that checks /readyz).
  const given = config.ec2.worker?.controllerUrl;
  let controllerUrl = given ?? `http://${listenHost.includes(':') ? `[${listenHost}]` : listenHost}:${port}`;
  // Where the workers find this controller's address once it is bound: workers spawned before a restart follow it to
  // a new port (`--listen HOST:0`). A fixed --worker-controller-url needs no following.
  const addressFile = given === undefined ? join(config.stateDir, CONTROLLER_ADDRESS_FILE) : undefined;
  process.stdout.write(
    `${describeLocalCapacity(catalog, host)}\n` +
      `local mode: tasks run with the ${kind} executor (${config.executor === 'auto' ? (kind === 'docker' ? 'a Docker engine answered' : 'no Docker engine answered') : 'as configured'})` +
      `${kind === 'process' ? ": a task's image is not used, its command runs on this host (submissions say so)" : ''}\n`,
  );
  // A warning of its own, whether chosen or fallen back to: a team token is then no boundary at all.
  if (kind === 'process') log.warn(processExecutorWarning(config.stateDir));
  const localProvider = new LocalProvider({
    stateFile: join(config.stateDir, LOCAL_INSTANCES_FILE),
    instancesDir: join(config.stateDir, 'instances'),
    catalog,
    // Inside the heartbeat timeout as configured, so a killed worker is said to be gone, not silent.
    goneGraceMs: goneGraceWithin({
      heartbeatSeconds: config.workerHeartbeatSeconds,
      heartbeatTimeoutSeconds: config.workerHeartbeatTimeoutSeconds,
      pollSeconds: config.pollSeconds,
    }),
    spawner:
      env[EXTERNAL_WORKERS_ENV] === '1'
        ? new ExternalWorkerSpawner()
        : new ProcessWorkerSpawner({
            controllerUrl: () => controllerUrl,
            ...(addressFile === undefined ? {} : { controllerAddressFile: addressFile }),
            launchSecretKey: workerToken,
            executorKind: kind,
            // A worker's tasks are stopped at the engine it was spawned with; one spawned before engines were
            // recorded ran this controller's kind.
            executorFor: (dir, instanceId, engine) =>
              engine === undefined
                ? makeExecutor(kind, dir, instanceId)
                : taskStopperFor(dir, instanceId, engine),
            giveUpAfterSeconds: config.workerGiveUpSeconds,
            bootSecondsOf: (typeName) => config.localBootSeconds[typeName] ?? 0,
            warn: (message) => log.warn(message),
          }),
  });
  const provider = state.fence(localProvider);
  const registrar = new WorkerRegistrar({
    store: state.store,
    clusterName: config.cluster,
    clusterKey: workerToken,
    describeInstance: async (cloudId) =>
      (await localProvider.list(config.cluster, { includeTerminated: true })).find(
        (i) => i.instanceId === cloudId,
      ),
    launchCredential: { kind: 'launch-secret' },
  });
  return {
    provider,
    local: {
      provider: localProvider,
      instanceFile: join(config.stateDir, LOCAL_INSTANCES_FILE),
      // `--listen HOST:0` binds a free port: only then is the address workers must reach known.
      apiBound: (url) => {
        if (addressFile === undefined) return;
        controllerUrl = url;
        try {
          recordControllerAddress(addressFile, url);
        } catch (e) {
          log.warn(
            `could not record this controller's address in ${addressFile} (${(e as Error).message}): workers ` +
              'started before this restart keep trying the address they were given, and are replaced once they ' +
              'are taken for silent',
          );
        }
      },
    },
    registrar,
    executor: kind,
  };
}

/**
 * What running tasks as plain processes gives away: they run as the controller's user, so any task can read its state
 * directory (the admin token, the workers' credentials) and act as the admin or any worker.
 */
function processExecutorWarning(stateDir: string): string {
  return (
    `the process executor runs every task as this user with no isolation: a task can read ${stateDir} ` +
    '(the admin token, worker credentials), so team tokens are no boundary; run only tasks you trust, or use ' +
    'Docker (--executor docker)'
  );
}

/** EC2: instances from the AWS SDK's standard configuration; workers register when a worker bootstrap is set. */
async function setUpEc2Fleet({ config, state, secretFiles, log }: FleetOptions): Promise<Fleet> {
  // The AWS SDK clients take about a second to load: they are imported only when the aws provider needs them.
  const { createEc2Client, ec2ApiFromClient } = await import('../../../cloud/aws/ec2-api.js');
  const { Ec2Provider } = await import('../../../cloud/aws/ec2-provider.js');
  const client = createEc2Client({ region: config.region });
  const workerToken =
    config.ec2.worker === undefined ? undefined : ensureSecretFile(secretFiles.workerToken).value;
  const ec2Config = await resolveEc2Settings(config, client, workerToken);
  const ec2 = new Ec2Provider(ec2Config, { api: ec2ApiFromClient(client) });
  const provider = state.fence(ec2);
  const registrar =
    workerToken === undefined
      ? undefined
      : new WorkerRegistrar({
          store: state.store,
          clusterName: config.cluster,
          clusterKey: workerToken,
          describeInstance: (cloudId) => ec2.describeInstance(config.cluster, cloudId),
          launchCredential: {
            kind: 'ec2-instance-identity',
            verifier: identityVerifierFor(config.region, config.ec2.worker?.identityCertificate),
            region: config.region,
          },
        });
  const zones = ec2Config.placements.map((p) => p.availabilityZone);
  log.info('EC2 settings', { amiId: ec2Config.amiId, zones });
  return { provider, local: undefined, registrar, executor: 'docker', zones };
}
