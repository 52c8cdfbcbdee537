import { mkdirSync, statSync, type Stats } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Command } from 'commander';
import { pino } from 'pino';
import { z } from 'zod';
import { parseWith, ValidationError } from '../../core/validation.js';
import { commandLogger } from '../log-output.js';
import { claimWorkDir } from '../state-dir-lock.js';
import { DEFAULT_LATENCY_STALE_SECONDS } from '../../controller/latency-matrix.js';
import { openObjectStore } from '../../storage/open-object-store.js';
import { WorkerAgent } from '../../worker/agent.js';
import { DEFAULT_GIVE_UP_AFTER_SECONDS } from '../../worker/agent-options.js';
import { ControllerClient } from '../../worker/controller-client.js';
import {
  DEFAULT_PROBE_INTERVAL_SECONDS,
  DEFAULT_PROBE_PORT,
  DEFAULT_PROBE_WINDOW_SECONDS,
  LatencyProber,
} from '../../worker/latency-probe.js';
import {
  DEFAULT_IMDS_URL,
  ec2IdentityCredential,
  IMDS_URL_ENV,
  launchSecretCredential,
  type LaunchCredentialSource,
} from '../../worker/launch-credential.js';
import { SavedCredential } from '../../worker/saved-credential.js';
import { DEFAULT_NOTICE_POLL_SECONDS, imdsNoticeSource } from '../../worker/interruption-notices.js';
import { LAUNCH_SECRET_ENV } from '../../protocol/launch-secret.js';
import type { Executor } from '../../worker/executor.js';
import { DockerExecutor } from '../../worker/executors/docker.js';
import { dockerUnreachable } from '../../worker/executors/docker-engine.js';
import { ProcessExecutor } from '../../worker/executors/process.js';
import { controllerAddressFileOf } from '../../protocol/controller-address.js';
import { badPortOfUrl, badPortProblem } from '../../protocol/fetch-bad-ports.js';

/**
 * `fleetwise worker`: the agent on an instance (EC2 user data starts it under systemd; the local provider spawns it).
 * It registers its instance with a launch credential (ARCHITECTURE.md "Worker identity"): the one-time secret the
 * local provider puts in FLEETWISE_LAUNCH_SECRET, or on EC2 the cluster's worker token (FLEETWISE_WORKER_TOKEN, or
 * --token) with the signed instance identity document from the metadata service. The per-instance token it gets is
 * saved in the work directory, and a restarted worker registers with that alone.
 */
export const WORKER_TOKEN_ENV = 'FLEETWISE_WORKER_TOKEN';
/**
 * `fleetwise worker`'s exit code when the controller has retired its instance (replaced it, and resumed its tasks
 * elsewhere): its tasks were killed without a checkpoint. 1 is giving up on an unreachable controller.
 */
export const WORKER_RETIRED_EXIT_CODE = 3;
/** The default of --notice-poll-seconds (a local controller's workers inherit it: tests poll faster). */
export const NOTICE_POLL_SECONDS_ENV = 'FLEETWISE_NOTICE_POLL_SECONDS';

interface WorkerFlags {
  readonly controller: string;
  readonly token?: string;
  readonly imdsUrl?: string;
  readonly instanceId: string;
  readonly executor?: string;
  readonly workDir?: string;
  readonly giveUpAfterSeconds?: string;
  readonly bootDelaySeconds?: string;
  readonly stopTasksOnExit?: boolean;
  readonly keepBuiltImages?: boolean;
  /** False with --no-probe. */
  readonly probe?: boolean;
  readonly probePort?: string;
  readonly probeHost?: string;
  readonly probeIntervalSeconds?: string;
  readonly probeWindowSeconds?: string;
  readonly spotNotices?: string;
  readonly noticePollSeconds?: string;
}

const noticePollSeconds = z.coerce
  .number({ error: 'a number of seconds' })
  .min(0.05, 'at least 0.05 s')
  .max(60, 'at most 60 s (a spot notice comes two minutes ahead)');

/** The poll period under the name it was given by (a bad one names it): the flag wins over its environment variable. */
const noticeFlagsSchema = z
  .object({
    '--spot-notices': z.enum(['auto', 'on', 'off'], { error: 'one of auto, on, off' }).default('auto'),
    '--notice-poll-seconds': noticePollSeconds.optional(),
    [NOTICE_POLL_SECONDS_ENV]: noticePollSeconds.optional(),
  })
  .transform((f) => ({
    '--spot-notices': f['--spot-notices'],
    '--notice-poll-seconds':
      f['--notice-poll-seconds'] ?? f[NOTICE_POLL_SECONDS_ENV] ?? DEFAULT_NOTICE_POLL_SECONDS,
  }));

const probeFlagsSchema = z
  .object({
    '--probe-port': z.coerce
      .number({ error: 'a TCP port' })
      .int('a whole port number')
      .min(0, '0 (any free port) to 65535')
      .max(65535, '0 (any free port) to 65535')
      .default(DEFAULT_PROBE_PORT),
    // As the worker protocol takes it: peers connect to the host as given, and `[fd00::5]` resolves to nothing.
    '--probe-host': z
      .string()
      .refine((h) => !/[[\]]/.test(h), { message: 'give an IPv6 address without brackets', abort: true })
      .regex(/^[A-Za-z0-9:][A-Za-z0-9.:%-]{0,254}$/, 'an IP address or a host name')
      .optional(),
    // Round trips probed less often than the controller keeps them fresh would reach its plans older than it allows.
    '--probe-interval-seconds': z.coerce
      .number({ error: 'a number of seconds' })
      .min(0.05, 'at least 0.05 s')
      .max(
        DEFAULT_LATENCY_STALE_SECONDS,
        `at most ${DEFAULT_LATENCY_STALE_SECONDS} s (the controller drops round trips older than that)`,
      )
      .default(DEFAULT_PROBE_INTERVAL_SECONDS),
    '--probe-window-seconds': z.coerce
      .number({ error: 'a number of seconds' })
      .min(1, 'at least 1 s')
      .max(3600, 'at most an hour')
      .default(DEFAULT_PROBE_WINDOW_SECONDS),
  })
  // Each heartbeat replaces the instance's round trips with its window's: a window shorter than the interval is
  // empty between probes, and the measured pairs vanish from the controller until the next one.
  .refine((f) => f['--probe-window-seconds'] >= f['--probe-interval-seconds'], {
    path: ['--probe-window-seconds'],
    message: 'must be at least --probe-interval-seconds (a shorter window is empty between probes)',
  });

/**
 * The controller's and the metadata service's addresses: http or https only, on a port fetch connects to. Anything
 * else (`notaurl`, `ftp://x`, `http://10.0.0.5:6000`) would start a worker that never registers, or one that runs
 * without spot notices behind a warning in its log: the worker reaches both through fetch, which refuses its bad
 * ports without connecting, as the controller refuses them for the addresses it serves and publishes.
 */
const httpUrl = z
  .string()
  .refine(
    (text) => {
      try {
        return ['http:', 'https:'].includes(new URL(text).protocol);
      } catch {
        return false;
      }
    },
    { message: 'an http:// or https:// URL' },
  )
  .superRefine((text, ctx) => {
    const port = badPortOfUrl(text);
    if (port !== undefined) ctx.addIssue({ code: 'custom', message: badPortProblem(port) });
  });

/** Each address under the name it was given by: the metadata service's flag wins over its environment variable. */
const urlFlagsSchema = z.object({
  '--controller': httpUrl,
  '--imds-url': httpUrl.optional(),
  [IMDS_URL_ENV]: httpUrl.optional(),
});

function checkUrls(flags: Pick<WorkerFlags, 'controller' | 'imdsUrl'>, env: NodeJS.ProcessEnv): void {
  const fromEnv = env[IMDS_URL_ENV] === '' ? undefined : env[IMDS_URL_ENV];
  parseWith(
    urlFlagsSchema,
    {
      '--controller': flags.controller,
      '--imds-url': flags.imdsUrl,
      [IMDS_URL_ENV]: flags.imdsUrl === undefined ? fromEnv : undefined,
    },
    'fleetwise worker',
  );
}

const bootDelaySchema = z.coerce
  .number({ error: 'a number of seconds' })
  .min(0, 'at least 0')
  .max(3600, 'at most an hour (3600)')
  .default(0);

const giveUpSchema = z.coerce
  .number({ error: 'a number of seconds' })
  .min(0, 'at least 0 (0 never gives up)')
  .default(DEFAULT_GIVE_UP_AFTER_SECONDS);

/** True when a Docker engine answers within `timeoutMs` (DOCKER_HOST or the default socket). */
export async function dockerAvailable(timeoutMs = 2000): Promise<boolean> {
  return (await dockerUnreachable(process.env, timeoutMs)) === undefined;
}

export function makeExecutor(
  kind: 'docker' | 'process',
  workDir: string,
  instanceId?: string,
  options: { readonly tasksEndWithThisProcess?: boolean; readonly keepBuiltImages?: boolean } = {},
): Executor {
  return kind === 'docker'
    ? new DockerExecutor({ instanceId, evictBuiltImages: options.keepBuiltImages !== true })
    : new ProcessExecutor({
        stateDir: join(workDir, 'executor'),
        tasksEndWithThisProcess: options.tasksEndWithThisProcess === true,
      });
}

/**
 * The launch credential the environment and flags give: the local launch secret, else (EC2) the cluster's worker
 * token with the metadata service's identity document; undefined when neither is given.
 */
export function launchCredentialFrom(
  flags: Pick<WorkerFlags, 'token' | 'imdsUrl'>,
  env: NodeJS.ProcessEnv,
): LaunchCredentialSource | undefined {
  const secret = env[LAUNCH_SECRET_ENV]?.trim();
  if (secret !== undefined && secret !== '') return launchSecretCredential(secret);
  const token = (flags.token ?? env[WORKER_TOKEN_ENV])?.trim();
  if (token === undefined || token === '') return undefined;
  const imdsUrl = flags.imdsUrl ?? env[IMDS_URL_ENV];
  return ec2IdentityCredential({
    clusterToken: token,
    ...(imdsUrl === undefined || imdsUrl === '' ? {} : { imdsUrl }),
  });
}

/** What the flags say, each checked and named when bad, before the worker looks for a credential or touches a file. */
interface CheckedFlags {
  readonly workDir: string;
  readonly requested: string;
  readonly bootDelaySeconds: number;
  readonly giveUpAfterSeconds: number;
  readonly probeFlags: z.infer<typeof probeFlagsSchema>;
  readonly noticeFlags: z.output<typeof noticeFlagsSchema>;
}

function checkFlags(flags: WorkerFlags, env: NodeJS.ProcessEnv): CheckedFlags {
  checkUrls(flags, env);
  // The controller knows the instance by it, and the default work directory is named after it: an empty one would
  // be that of every worker started so.
  if (flags.instanceId.trim() === '')
    throw new ValidationError('fleetwise worker', [
      "--instance-id: empty: give this instance's cloud id (EC2 i-…, local-…)",
    ]);
  const requested = flags.executor ?? 'auto';
  if (!['auto', 'docker', 'process'].includes(requested))
    throw new ValidationError('fleetwise worker', ['--executor: one of docker, process, auto']);
  const bootDelaySeconds = parseWith(
    z.object({ '--boot-delay-seconds': bootDelaySchema }),
    { '--boot-delay-seconds': flags.bootDelaySeconds },
    'fleetwise worker',
  )['--boot-delay-seconds'];
  const giveUpAfterSeconds = parseWith(
    z.object({ '--give-up-after-seconds': giveUpSchema }),
    { '--give-up-after-seconds': flags.giveUpAfterSeconds },
    'fleetwise worker',
  )['--give-up-after-seconds'];
  const probeFlags = parseWith(
    probeFlagsSchema,
    {
      '--probe-port': flags.probePort,
      '--probe-host': flags.probeHost,
      '--probe-interval-seconds': flags.probeIntervalSeconds,
      '--probe-window-seconds': flags.probeWindowSeconds,
    },
    'fleetwise worker',
  );
  const noticeFlags = parseWith(
    noticeFlagsSchema,
    {
      '--spot-notices': flags.spotNotices,
      '--notice-poll-seconds': flags.noticePollSeconds,
      // Set but empty (a unit file's `Environment=VAR=`) is unset, as for the metadata service's address.
      [NOTICE_POLL_SECONDS_ENV]:
        flags.noticePollSeconds === undefined && env[NOTICE_POLL_SECONDS_ENV] !== ''
          ? env[NOTICE_POLL_SECONDS_ENV]
          : undefined,
    },
    'fleetwise worker',
  );
  const workDir = resolve(flags.workDir ?? join('.fleetwise-worker', flags.instanceId));
  let found: Stats | undefined;
  try {
    found = statSync(workDir, { throwIfNoEntry: false });
  } catch (e) {
    throw workDirError(workDir, e);
  }
  if (found !== undefined && !found.isDirectory()) throw workDirError(workDir, undefined);
  return { workDir, requested, bootDelaySeconds, giveUpAfterSeconds, probeFlags, noticeFlags };
}

/**
 * A work directory that cannot be one, as bad input naming --work-dir: a file (or a path through one), or a place this
 * user may not write. Another failure (a full disk, say) is `cause` itself.
 */
function workDirError(workDir: string, cause: unknown): Error {
  const code = (cause as NodeJS.ErrnoException | undefined)?.code;
  const reason =
    cause === undefined || code === 'EEXIST' || code === 'ENOTDIR'
      ? 'is a file, or a path through one, not a directory'
      : code === 'EACCES' || code === 'EPERM' || code === 'EROFS'
        ? `cannot be created or written by this user (${code})`
        : undefined;
  if (reason === undefined) return cause as Error;
  return new ValidationError('--work-dir', [
    `${workDir} ${reason}: give a directory (created if missing) for the worker's state`,
  ]);
}

export async function runWorker(flags: WorkerFlags, env: NodeJS.ProcessEnv = process.env): Promise<void> {
  const checked = checkFlags(flags, env);
  const { workDir } = checked;
  const saved = new SavedCredential(workDir, flags.instanceId);
  const launch = launchCredentialFrom(flags, env);
  if (launch === undefined && saved.load() === undefined)
    throw new ValidationError('fleetwise worker', [
      `no credential to register with: ${LAUNCH_SECRET_ENV} (local mode; its controller sets it), or the ` +
        `cluster's worker token on EC2 (--token or ${WORKER_TOKEN_ENV}); a restarted worker needs neither once it ` +
        `has saved its per-instance token in ${saved.path}`,
    ]);
  // One worker per work directory: a second would register with the same saved token, adopt the same tasks and
  // heartbeat, checkpoint and ship logs for them too. A worker that died without releasing it leaves a stale lock.
  try {
    mkdirSync(workDir, { recursive: true, mode: 0o700 });
  } catch (e) {
    throw workDirError(workDir, e);
  }
  const release = claimWorkDir(workDir);
  try {
    await runClaimed(flags, env, { ...checked, saved, launch });
  } finally {
    release();
  }
}

async function runClaimed(
  flags: WorkerFlags,
  env: NodeJS.ProcessEnv,
  parsed: CheckedFlags & {
    readonly saved: SavedCredential;
    readonly launch: LaunchCredentialSource | undefined;
  },
): Promise<void> {
  const { workDir, saved, launch, requested, bootDelaySeconds, giveUpAfterSeconds, probeFlags, noticeFlags } =
    parsed;
  const kind: 'docker' | 'process' =
    requested === 'auto'
      ? (await dockerAvailable())
        ? 'docker'
        : 'process'
      : (requested as 'docker' | 'process');
  // Local mode's slow instance types: this "instance" is still booting (nothing registers, nothing runs).
  if (bootDelaySeconds > 0) await new Promise((r) => setTimeout(r, bootDelaySeconds * 1000));
  // The latency probe's echo listener; a port another process holds is a startup error, as for the executor.
  const latencyProbe =
    flags.probe === false
      ? undefined
      : await LatencyProber.start({
          port: probeFlags['--probe-port'],
          advertisedHost: probeFlags['--probe-host'],
          intervalSeconds: probeFlags['--probe-interval-seconds'],
          windowSeconds: probeFlags['--probe-window-seconds'],
        }).catch((e: unknown) => {
          throw new ValidationError('fleetwise worker', [
            `--probe-port: the latency probe cannot listen on port ${probeFlags['--probe-port']} ` +
              `(${(e as Error).message}); pick another port (0: any free one) or pass --no-probe`,
          ]);
        });
  // auto: on EC2 (the worker token and the identity document) or wherever a metadata service is named explicitly.
  const imdsUrl = flags.imdsUrl ?? (env[IMDS_URL_ENV] === '' ? undefined : env[IMDS_URL_ENV]);
  const onEc2 =
    (flags.token ?? env[WORKER_TOKEN_ENV] ?? '').trim() !== '' && env[LAUNCH_SECRET_ENV] === undefined;
  const pollNotices =
    noticeFlags['--spot-notices'] === 'on' ||
    (noticeFlags['--spot-notices'] === 'auto' && (onEc2 || imdsUrl !== undefined));
  const log = commandLogger({ component: 'worker', instance: flags.instanceId }, pino.destination(2), env);
  const agent = new WorkerAgent({
    // A worker a local controller spawned follows it to another address (protocol/controller-address.ts).
    connection: new ControllerClient(flags.controller, undefined, controllerAddressFileOf(env)),
    credentials: { launch, saved },
    // A worker that stops its tasks on exit is its instance (local mode): its process tasks end with it however it
    // ends, a SIGKILL included, instead of running on unsupervised while the controller restarts them elsewhere.
    executor: makeExecutor(kind, workDir, flags.instanceId, {
      tasksEndWithThisProcess: flags.stopTasksOnExit === true,
      keepBuiltImages: flags.keepBuiltImages === true,
    }),
    openStore: (location) => openObjectStore(location),
    cloudInstanceId: flags.instanceId,
    workDir,
    throughputWindowSeconds: 60,
    giveUpAfterSeconds,
    stopTasksOnExit: flags.stopTasksOnExit === true,
    controllerUrl: flags.controller,
    ...(latencyProbe === undefined ? {} : { latencyProbe }),
    ...(pollNotices
      ? {
          interruptionNotices: {
            source: imdsNoticeSource(imdsUrl === undefined ? {} : { imdsUrl }),
            pollSeconds: noticeFlags['--notice-poll-seconds'],
          },
        }
      : {}),
    logger: {
      debug: (message, data) => log.debug(data ?? {}, message),
      info: (message, data) => log.info(data ?? {}, message),
      warn: (message, data) => log.warn(data ?? {}, message),
    },
  });
  const stop = new AbortController();
  // SIGTERM/SIGINT stop the agent only: tasks keep running and a restarted worker adopts them; with
  // --stop-tasks-on-exit (local mode's workers, whose "instance" ends with them) the tasks are checkpointed and stopped.
  process.once('SIGTERM', () => stop.abort());
  process.once('SIGINT', () => stop.abort());
  process.stdout.write(
    `fleetwise worker ${flags.instanceId}: ${kind} executor, work dir ${workDir}, controller ${flags.controller}` +
      `${latencyProbe === undefined ? '' : `, latency probe on port ${latencyProbe.port}`}\n`,
  );
  // Giving up is a failure: a supervisor that restarts failed workers (systemd on EC2) tries the controller again.
  // A retirement is not: the instance is going away, and a restarted worker would only be told so again.
  const exit = await agent.run(stop.signal);
  await latencyProbe?.stop();
  if (exit === 'gave-up') process.exitCode = 1;
  else if (exit === 'retired') process.exitCode = WORKER_RETIRED_EXIT_CODE;
}

export function registerWorker(program: Command): void {
  program
    .command('worker')
    .description(
      'run the worker agent on an instance: register, heartbeat, run and checkpoint tasks; exits 1 after giving up ' +
        `on the controller, ${WORKER_RETIRED_EXIT_CODE} when the controller has retired the instance (tasks killed)`,
    )
    .requiredOption('--controller <url>', "the controller's API, e.g. http://10.0.0.5:7070")
    .option(
      '--token <token>',
      `EC2: the cluster's worker token, sent with the instance identity document (default: ${WORKER_TOKEN_ENV})`,
    )
    .option(
      '--imds-url <url>',
      `EC2: the instance metadata service (default: ${IMDS_URL_ENV}, else ${DEFAULT_IMDS_URL})`,
    )
    .requiredOption('--instance-id <id>', "this instance's cloud id (EC2 i-…, local-…)")
    .option('--executor <kind>', 'docker | process | auto (Docker when an engine answers)', 'auto')
    .option('--work-dir <dir>', 'agent state: checkpoints, progress files, build contexts, process records')
    .option(
      '--give-up-after-seconds <s>',
      `without a controller answer this long, checkpoint and stop the tasks and exit (default ${DEFAULT_GIVE_UP_AFTER_SECONDS}; 0 never)`,
    )
    .option(
      '--boot-delay-seconds <s>',
      "local mode: wait this long before registering, as a slow instance type's boot would (default 0)",
    )
    .option(
      '--keep-built-images',
      'never remove the images built from build contexts (default: those no task needs, the 3 most recently used kept); for workers that share one Docker engine (local mode)',
    )
    .option(
      '--stop-tasks-on-exit',
      'on SIGTERM/SIGINT, checkpoint and stop the tasks before exiting, and (process executor) end them with the worker however it ends (default: leave them for a restarted worker)',
    )
    .option(
      '--probe-port <port>',
      `TCP port of the latency probe other workers measure round trips to (default ${DEFAULT_PROBE_PORT}; 0 any free port)`,
    )
    .option(
      '--probe-host <address>',
      "the address other workers reach this one's probe at, IPv6 without brackets (default: the address the controller sees)",
    )
    .option(
      '--probe-interval-seconds <s>',
      `probe each peer this often (default ${DEFAULT_PROBE_INTERVAL_SECONDS}; at most ${DEFAULT_LATENCY_STALE_SECONDS})`,
    )
    .option(
      '--probe-window-seconds <s>',
      `report max and p99 round trips over this window (default ${DEFAULT_PROBE_WINDOW_SECONDS}; at least the interval)`,
    )
    .option('--no-probe', 'measure no round trips and open no probe port')
    .option(
      '--spot-notices <mode>',
      'poll the metadata service for spot interruption notices and rebalance recommendations: on, off, or auto ' +
        '(on EC2, or when a metadata service is named; default)',
    )
    .option(
      '--notice-poll-seconds <s>',
      `poll for spot notices this often (default ${NOTICE_POLL_SECONDS_ENV}, else ${DEFAULT_NOTICE_POLL_SECONDS})`,
    )
    .action(async (options: WorkerFlags) => {
      await runWorker(options);
    });
}
