import { spawn } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { CONTROLLER_ADDRESS_FILE_ENV } from '../../protocol/controller-address.js';
import { LAUNCH_SECRET_ENV, launchSecretFor } from '../../protocol/launch-secret.js';
import { PROJECT_ROOT } from '../catalog-file.js';
import { TAG_LAUNCH_TOKEN } from '../provider.js';
import { readJsonRecord, writeJsonRecord } from './json-record.js';
import type { LocalInstance, WorkerSpawner } from './local-provider.js';

/**
 * Local instances' workers as detached `node dist/cli/main.js worker …` processes (their own process group, so they
 * outlive a restarted controller, which finds them again through the provider's file). Each worker gets the one-time
 * secret of its launch (protocol/launch-secret.ts) through the environment, not the command line (other users can read
 * command lines); the cluster's key it derives from, and the controller's own tokens, are never passed on.
 */
export const WORKER_MAIN = join(PROJECT_ROOT, 'dist', 'cli', 'main.js');

/**
 * The part of a worker's executor that terminating an instance needs: find the instance's tasks and stop them. Declared
 * here rather than imported from worker/ (cloud imports only core and protocol); worker/'s Executor satisfies it.
 */
export interface InstanceTaskStopper {
  list(): Promise<readonly { readonly taskId: string }[]>;
  kill(taskId: string): Promise<void>;
  remove(taskId: string): Promise<void>;
}

/**
 * Where an instance's worker ran its tasks, recorded in its directory when it is spawned: whoever stops the tasks
 * later (`fleetwise down`, another controller) reaches them there, not at whatever engine its own environment names.
 */
export interface WorkerEngine {
  readonly executor: 'docker' | 'process';
  /** The worker's DOCKER_HOST; absent when it had none (the engine's default socket) or runs no containers. */
  readonly dockerHost?: string | undefined;
}

/** The record of a worker's engine, in its instance's directory. */
export const WORKER_ENGINE_FILE = 'worker-engine.json';

const workerEngineSchema = z.strictObject({
  executor: z.enum(['docker', 'process']),
  dockerHost: z.string().optional(),
});

/** Record the engine of the worker about to be spawned (atomically: a torn record would leave its tasks unreachable). */
export function recordWorkerEngine(instanceDir: string, engine: WorkerEngine): void {
  writeJsonRecord(join(instanceDir, WORKER_ENGINE_FILE), engine);
}

/** The engine recorded for an instance's worker; undefined for a worker spawned before engines were recorded. */
export function readWorkerEngine(instanceDir: string): WorkerEngine | undefined {
  return readJsonRecord(join(instanceDir, WORKER_ENGINE_FILE), workerEngineSchema);
}

/** What stopping an instance's worker and its tasks came to. */
export type InstanceStopOutcome =
  | { readonly tasksStopped: true }
  | {
      readonly tasksStopped: false;
      /** The executor's error, or that its stops were still under way when the wait ran out. */
      readonly reason: string;
      /** Tasks that may still run: those whose stop failed, else every task the instance's directory records. */
      readonly tasks: readonly string[];
      /** Where they run, as recorded at the worker's spawn; undefined for a worker spawned before that. */
      readonly engine: WorkerEngine | undefined;
    };

export interface ProcessSpawnerOptions {
  /** Where workers reach the controller; asked at each spawn (the API's port may be known only once it is bound). */
  readonly controllerUrl: string | (() => string);
  /**
   * The file the controller keeps its current address in (protocol/controller-address.ts), named to each worker: one
   * that cannot reach the controller reads it, and so follows a controller restarted on another port. Absent when the
   * address is fixed (`--worker-controller-url`): the workers keep the one they are given.
   */
  readonly controllerAddressFile?: string;
  /** The cluster's worker key: each launch's one-time secret is derived from it and the launch token. */
  readonly launchSecretKey: string;
  readonly executorKind: 'docker' | 'process';
  /**
   * The executor an instance's worker used (its directory and id, and the engine recorded at its spawn: undefined for
   * one spawned before engines were recorded), to stop its tasks at termination.
   */
  readonly executorFor: (
    instanceDir: string,
    instanceId: string,
    engine: WorkerEngine | undefined,
  ) => InstanceTaskStopper;
  /** A worker whose controller is gone this long checkpoints its tasks and exits (the worker's default when absent). */
  readonly giveUpAfterSeconds?: number;
  /** Seconds an instance of this type boots before its worker starts (EC2-like slow types; default none). */
  readonly bootSecondsOf?: (typeName: string) => number;
  readonly main?: string;
  /**
   * How long a termination waits for the instance's tasks to be stopped (default TASK_STOP_WAIT_MS) before it returns
   * and lets the stops finish in the background: a Docker engine that hangs must not hold up the controller's round.
   */
  readonly taskStopWaitMs?: number;
  /** Where a failed or slow stop of an instance's tasks is reported (default: nowhere). */
  readonly warn?: (message: string) => void;
}

/** A termination waits this long for its tasks' stops (the executor bounds each of its calls itself). */
export const TASK_STOP_WAIT_MS = 5_000;

export class ProcessWorkerSpawner implements WorkerSpawner {
  constructor(private readonly options: ProcessSpawnerOptions) {}

  spawn(instance: LocalInstance): number | undefined {
    mkdirSync(instance.dir, { recursive: true });
    const env = workerEnvironment(
      process.env,
      launchSecretFor(this.options.launchSecretKey, instance.tags[TAG_LAUNCH_TOKEN] ?? instance.instanceId),
      this.options.controllerAddressFile,
    );
    // Before the worker starts: a task it runs is always findable through the record.
    recordWorkerEngine(instance.dir, {
      executor: this.options.executorKind,
      ...(this.options.executorKind === 'docker' && env.DOCKER_HOST !== undefined && env.DOCKER_HOST !== ''
        ? { dockerHost: env.DOCKER_HOST }
        : {}),
    });
    const log = openSync(join(instance.dir, 'worker.log'), 'a');
    try {
      const child = spawn(
        process.execPath,
        [
          this.options.main ?? WORKER_MAIN,
          'worker',
          '--controller',
          typeof this.options.controllerUrl === 'function'
            ? this.options.controllerUrl()
            : this.options.controllerUrl,
          '--instance-id',
          instance.instanceId,
          '--executor',
          this.options.executorKind,
          '--work-dir',
          instance.dir,
          // A local instance ends with its worker: a stopped worker checkpoints and stops its tasks.
          '--stop-tasks-on-exit',
          // Every local worker shares this host's Docker engine: none can see the tasks another holds prepared, so
          // none removes the images it built (ImageCache.evictBuilt).
          '--keep-built-images',
          // Every local worker is on this host: each latency probe takes a free port of its own, on loopback only.
          '--probe-port',
          '0',
          '--probe-host',
          '127.0.0.1',
          ...(this.options.giveUpAfterSeconds === undefined
            ? []
            : ['--give-up-after-seconds', String(this.options.giveUpAfterSeconds)]),
          ...bootDelayArgs(this.options.bootSecondsOf?.(instance.typeName) ?? 0),
        ],
        {
          env,
          detached: true,
          stdio: ['ignore', log, log],
        },
      );
      child.unref();
      return child.pid;
    } finally {
      closeSync(log);
    }
  }

  async kill(instance: LocalInstance): Promise<void> {
    await this.stop(instance);
  }

  /**
   * `kill`, saying whether the instance's tasks were stopped: a failure or a stop still under way is also reported
   * through `warn`, and the caller that must not record the instance stopped while its tasks may run (`fleetwise
   * down`) learns it here.
   */
  async stop(instance: LocalInstance): Promise<InstanceStopOutcome> {
    // A controller that died between spawning the worker and recording its pid left a record without one.
    const pid = instance.pid ?? findWorkerPid(instance.instanceId);
    if (pid !== undefined && isWorkerOf(pid, instance.instanceId)) {
      try {
        process.kill(-pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    // The tasks run in their own process groups (or containers) so they survive a worker restart: stop them too,
    // waiting a bounded time (the rest goes on in the background, its failure reported).
    let engine: WorkerEngine | undefined;
    const stopping = (async (): Promise<InstanceStopOutcome> => {
      try {
        engine = readWorkerEngine(instance.dir);
        await this.stopTasks(instance, engine);
        return { tasksStopped: true };
      } catch (e) {
        const failed = e instanceof TaskStopFailures ? e.taskIds : recordedTasks(instance.dir);
        this.options.warn?.(
          `could not stop the tasks of local instance ${instance.instanceId}: ${(e as Error).message}; ` +
            `they may still run (${(engine?.executor ?? this.options.executorKind) === 'docker' ? `containers labelled fleetwise.instance=${instance.instanceId}` : `processes under ${join(instance.dir, 'executor')}`}), ` +
            'so their jobs may run twice, here and where they are resumed, until those are stopped',
        );
        return { tasksStopped: false, reason: (e as Error).message, tasks: failed, engine };
      }
    })();
    let timer: NodeJS.Timeout | undefined;
    const outcome = await Promise.race([
      stopping,
      new Promise<undefined>((resolve) => {
        timer = setTimeout(() => resolve(undefined), this.options.taskStopWaitMs ?? TASK_STOP_WAIT_MS);
      }),
    ]);
    clearTimeout(timer);
    if (outcome !== undefined) return outcome;
    this.options.warn?.(
      `the tasks of local instance ${instance.instanceId} are still being stopped (the ${engine?.executor ?? this.options.executorKind} ` +
        'executor is slow to answer); going on, the stops continue in the background',
    );
    return {
      tasksStopped: false,
      reason: `their stops were still under way after ${(this.options.taskStopWaitMs ?? TASK_STOP_WAIT_MS) / 1000} s (the executor is slow to answer)`,
      tasks: recordedTasks(instance.dir),
      engine,
    };
  }

  private async stopTasks(instance: LocalInstance, engine: WorkerEngine | undefined): Promise<void> {
    // A worker that recorded no task left none to stop: no engine is asked, so an instance whose worker never ran a
    // task (one of an older version, its engine unrecorded and guessed) never fails on an engine it did not use.
    if (recordedTasks(instance.dir).length === 0) return;
    const executor = this.options.executorFor(instance.dir, instance.instanceId, engine);
    // Only this instance's tasks: a Docker engine is shared by every local instance (the agent keeps tasks/<id>/).
    const mine = (await executor.list()).filter((t) =>
      existsSync(join(instance.dir, 'tasks', t.taskId, 'agent.json')),
    );
    const failures: string[] = [];
    const failed: string[] = [];
    for (const task of mine) {
      await executor.kill(task.taskId).catch((e: unknown) => {
        failures.push(`${task.taskId}: ${(e as Error).message}`);
        failed.push(task.taskId);
      });
      await executor.remove(task.taskId).catch(() => undefined);
    }
    if (failures.length > 0) throw new TaskStopFailures(failures.join('; '), failed);
  }
}

/** Some of an instance's tasks could not be stopped: which. */
class TaskStopFailures extends Error {
  constructor(
    message: string,
    readonly taskIds: readonly string[],
  ) {
    super(message);
    this.name = 'TaskStopFailures';
  }
}

/** The tasks an instance's worker recorded in its directory (`tasks/<id>/agent.json`): those it may have left running. */
export function recordedTasks(instanceDir: string): string[] {
  try {
    return readdirSync(join(instanceDir, 'tasks'))
      .filter((id) => existsSync(join(instanceDir, 'tasks', id, 'agent.json')))
      .sort();
  } catch {
    return [];
  }
}

/**
 * Credentials of the controller and its clients that a worker must not inherit: the API's tokens, and the PostgreSQL
 * password of a shared state (a worker never opens the state). The cloud's (AWS_*) stay: a worker writes the object
 * store with them.
 */
const WITHHELD_ENV = [
  'FLEETWISE_WORKER_TOKEN',
  'FLEETWISE_ADMIN_TOKEN',
  'FLEETWISE_TOKEN',
  'FLEETWISE_METRICS_TOKEN',
  'PGPASSWORD',
];

/**
 * The controller's environment minus its credentials, plus the launch's one-time secret and, when the controller keeps
 * one, its address file. That variable is set or removed, never inherited: a controller started where it is set must
 * not hand its workers another controller's file.
 */
export function workerEnvironment(
  parent: NodeJS.ProcessEnv,
  launchSecret: string,
  controllerAddressFile?: string,
): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...parent };
  for (const name of WITHHELD_ENV) delete env[name];
  env[LAUNCH_SECRET_ENV] = launchSecret;
  if (controllerAddressFile === undefined) delete env[CONTROLLER_ADDRESS_FILE_ENV];
  else env[CONTROLLER_ADDRESS_FILE_ENV] = controllerAddressFile;
  return env;
}

/**
 * Local instances whose workers run elsewhere: nothing is started or stopped here, and the workers register over the
 * worker protocol like any other (`fleetwise bench controller` simulates a fleet of them over HTTP).
 */
export class ExternalWorkerSpawner implements WorkerSpawner {
  spawn(): number | undefined {
    return undefined;
  }

  kill(): Promise<void> {
    return Promise.resolve();
  }
}

/** The pid still runs our worker for this instance (not a recycled pid). */
export function isWorkerOf(pid: number, instanceId: string): boolean {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').includes(instanceId);
  } catch {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  }
}

/**
 * The pid of the running worker of this instance, found by its command line (`worker … --instance-id <id>`), or
 * undefined where there is none or no /proc to look in.
 */
export function findWorkerPid(instanceId: string): number | undefined {
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return undefined;
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    let argv: string[];
    try {
      argv = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
    } catch {
      continue; // exited while we looked
    }
    const at = argv.indexOf('--instance-id');
    if (argv.includes('worker') && at >= 0 && argv[at + 1] === instanceId) return Number(entry);
  }
  return undefined;
}

function bootDelayArgs(seconds: number): string[] {
  return seconds > 0 ? ['--boot-delay-seconds', String(seconds)] : [];
}
