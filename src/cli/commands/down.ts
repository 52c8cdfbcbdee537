import { existsSync, readFileSync, readlinkSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Command } from 'commander';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { BUNDLED_CATALOG_PATH, loadCatalogFile } from '../../cloud/catalog-file.js';
import { LocalProvider, type WorkerSpawner } from '../../cloud/local/local-provider.js';
import { journalPathOf, LocalInstanceFile, type LocalInstance } from '../../cloud/local/instance-file.js';
import { exitTimes, stopWorkersGently, type WorkerStopOutcome } from '../../cloud/local/local-shutdown.js';
import {
  isWorkerOf,
  ProcessWorkerSpawner,
  readWorkerEngine,
  recordedTasks,
  type InstanceStopOutcome,
} from '../../cloud/local/worker-spawner.js';
import { parseWith, ValidationError } from '../../core/validation.js';
import { controllerConfigSchema, type ControllerConfig } from '../../controller/config.js';
import {
  ADMIN_TOKEN_FILE,
  findLocalController,
  LOCAL_INSTANCES_FILE,
  LOCAL_STATE_DIR,
  WORKER_TOKEN_FILE,
} from '../local-state.js';
import {
  dirLockHeld,
  lockFileOf,
  lockHolder,
  PID_FILE,
  processRunning,
  sharedControllers,
} from '../state-dir-lock.js';
import { DB_FILE } from './controller/state-dir.js';
import { tasksStillRunning } from '../local-fleet-stop.js';
import { taskStopperFor } from './local-task-stopper.js';

/**
 * `fleetwise down`: stop everything a local controller started from its state directory: the controller (which stops
 * its workers, unless it was started with --keep-workers), or every controller sharing a PostgreSQL state there, then
 * every worker process the local instance records still list, each checkpointing and stopping its tasks first; what
 * does not stop in time is killed with its tasks. Those it stopped are marked so in the records, for the next start.
 * An instance whose tasks could not be stopped (its worker's Docker engine did not answer) stays recorded as running,
 * for the next controller or `down` to stop, and `down` names its containers and fails. Instances that ended with
 * tasks left running (a controller could not stop them: `tasksLeft`) are stopped the same way. Where their engine is
 * gone for good, `--forget-tasks` records them stopped without asking it, once the user removed them.
 * A controller that cannot be stopped leaves the workers running. An EC2 controller stops alone: its instances are
 * not this host's processes, and it says so.
 * Idempotent: with nothing running it says so and succeeds.
 */

interface DownFlags {
  readonly stateDir?: string;
  readonly graceSeconds?: string;
  /** true: every instance's; names: those instances'. */
  readonly forgetTasks?: boolean | string[];
}

const flagsSchema = z.object({
  '--state-dir': z.string().min(1, 'a directory').optional(),
  '--grace-seconds': z.coerce.number({ error: 'a number of seconds' }).positive('must be > 0').default(90),
  '--forget-tasks': z
    .union([z.literal(true), z.array(z.string().min(1, 'an instance id')).min(1, 'an instance id')])
    .optional(),
});

/** Whether the pid runs a controller (not a recycled pid); without /proc the pid file is trusted. */
function isController(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').includes('controller');
  } catch {
    return true;
  }
}

type Provider = ControllerConfig['provider'];

interface RunningController {
  readonly pid: number;
  /** It shares a PostgreSQL state: it leaves the workers to the next active controller, so down stops them. */
  readonly shared: boolean;
  /** Whose instances it runs; undefined when its command line cannot be read (no /proc, another user's). */
  readonly provider: Provider | undefined;
}

/** The value of `--name X` or `--name=X` in a command line (the last one given, as commander takes it). */
function flagValue(args: readonly string[], name: string): string | undefined {
  let value: string | undefined;
  args.forEach((arg, i) => {
    if (arg === name) value = args[i + 1];
    else if (arg.startsWith(`${name}=`)) value = arg.slice(name.length + 1);
  });
  return value;
}

/**
 * The provider a running controller was started with, as it resolved it: `--provider`, else its `--config` file's
 * `provider` (a relative path is the controller's working directory's), else the configuration's default.
 */
function controllerProvider(pid: number): Provider | undefined {
  const providerSchema = controllerConfigSchema.shape.provider;
  try {
    const args = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    const given = flagValue(args, '--provider');
    if (given !== undefined) return providerSchema.safeParse(given).data;
    const config = flagValue(args, '--config');
    if (config === undefined) return providerSchema.parse(undefined);
    const file = parseYaml(
      readFileSync(resolve(readlinkSync(`/proc/${pid}/cwd`), config), 'utf8'),
    ) as unknown;
    const inFile =
      typeof file === 'object' && file !== null ? (file as { provider?: unknown }).provider : undefined;
    return providerSchema.safeParse(inFile).data;
  } catch {
    return undefined;
  }
}

/**
 * What stopping `controller` does to its workers. Only a local controller stops them: an EC2 controller's SIGTERM
 * ends its loop and API, and its instances keep running, billed, until they are terminated.
 */
function stoppingLine({ pid, shared, provider }: RunningController): string {
  const stopping = `stopping the controller (pid ${pid})${shared ? ' sharing the state' : ''}`;
  const local = shared ? 'its workers are stopped next' : "it checkpoints and stops its workers' tasks";
  const ec2 =
    'its EC2 instances keep running, and billing, without it: to end them, let it terminate them first (cancel ' +
    'the jobs with fleetwise cancel --all and wait until fleetwise cluster lists no instance), or terminate the ' +
    'instances tagged fleetwise:cluster=<cluster> yourself (aws ec2 terminate-instances)';
  if (provider === 'local') return `${stopping}; ${local}`;
  if (provider === 'aws') return `${stopping}; ${ec2}`;
  // Its command line could not be read: each provider's outcome is said.
  return `${stopping}; a local controller: ${local}; an EC2 controller: ${ec2}`;
}

/**
 * The controllers running on this state directory (not stale pid files, not recycled pids): the one holding it, or
 * every controller sharing a PostgreSQL state that recorded itself there.
 */
function runningControllers(stateDir: string): RunningController[] {
  const holder = lockHolder(stateDir);
  return [
    ...(holder === undefined ? [] : [{ pid: holder, shared: false }]),
    ...sharedControllers(stateDir)
      .filter((pid) => pid !== holder)
      .map((pid) => ({ pid, shared: true })),
  ]
    .filter((c) => isController(c.pid))
    .map((c) => ({ ...c, provider: controllerProvider(c.pid) }));
}

async function waitForExit(pid: number, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (processRunning(pid)) {
    if (Date.now() >= deadline) return false;
    await new Promise((r) => setTimeout(r, 200));
  }
  return true;
}

/** SIGTERM, then SIGKILL once the grace is over; the pid if it still runs after all (another user's, say). */
async function stopController(
  controller: RunningController,
  graceMs: number,
  out: (line: string) => void,
): Promise<number | undefined> {
  const { pid } = controller;
  out(stoppingLine(controller));
  if (!signal(pid, 'SIGTERM')) return pid;
  if (await waitForExit(pid, graceMs + 30_000)) {
    out(`controller stopped (pid ${pid})`);
    return undefined;
  }
  if (!signal(pid, 'SIGKILL') || !(await waitForExit(pid, 5_000))) return pid;
  out(`the controller (pid ${pid}) did not stop in time: killed`);
  return undefined;
}

/** Send the signal; false if the process cannot be signalled (another user's). A process already gone is fine. */
function signal(pid: number, name: NodeJS.Signals): boolean {
  try {
    process.kill(pid, name);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'ESRCH';
  }
}

export async function runDown(flags: DownFlags): Promise<void> {
  const options = parseWith(
    flagsSchema,
    {
      '--state-dir': flags.stateDir,
      '--grace-seconds': flags.graceSeconds,
      '--forget-tasks': flags.forgetTasks,
    },
    'fleetwise down',
  );
  // Without --state-dir, the local controller the client commands find: ./.fleetwise here or in a directory above.
  const found = options['--state-dir'] ?? findLocalController()?.stateDir;
  const stateDir = resolve(found ?? LOCAL_STATE_DIR);
  // A mistyped path must not read as "nothing to stop": the controller and workers the user meant keep running.
  if (!isStateDirectory(stateDir))
    throw new ValidationError(found === undefined ? 'fleetwise down' : '--state-dir', [
      found === undefined
        ? `no controller state here or in a directory above (${LOCAL_STATE_DIR}): pass --state-dir DIR, the directory the controller was started with`
        : `${stateDir} is not a controller's state directory (${whatIsAt(stateDir) === 'other' ? 'not a directory' : 'no state, token or instance records in it'}): give the directory the controller was started with`,
    ]);
  const graceMs = options['--grace-seconds'] * 1000;
  const stateFile = join(stateDir, LOCAL_INSTANCES_FILE);
  const forget = options['--forget-tasks'];
  // Checked before anything stops: a mistyped id must not leave the tasks it meant to be asked for.
  if (Array.isArray(forget)) checkForgettable(stateFile, forget);
  const out = (line: string): boolean => process.stdout.write(`${line}\n`);
  let stoppedAnything = false;

  const controllers = runningControllers(stateDir);
  // Its pid file gone (removed by hand), a controller still holds the directory: its workers must not be stopped
  // under it, and saying "nothing to stop" would leave it launching.
  if (controllers.length === 0 && dirLockHeld(stateDir))
    throw new Error(
      `a controller holds ${lockFileOf(stateDir)} but ${join(stateDir, PID_FILE)} is missing: ` +
        `find it with fuser -v ${lockFileOf(stateDir)}, stop it, and run fleetwise down again`,
    );
  if (controllers.length > 0) {
    // All at once: a standby signalled after the active controller stopped could take the lease over and launch.
    const unstopped = await Promise.all(controllers.map((c) => stopController(c, graceMs, out)));
    const left = unstopped.filter((pid): pid is number => pid !== undefined);
    // A controller still running would launch the workers again, or start new ones: they are left as they are.
    if (left.length > 0)
      throw new Error(
        `could not stop the controller${left.length === 1 ? '' : 's'} (pid ${left.join(', ')}) on ${stateDir}; ` +
          'its workers are left running, as it would launch them again: stop it (as its owner) and run fleetwise down again',
      );
    stoppedAnything = true;
  }

  // The records are a snapshot and its journal; either may exist alone.
  if (existsSync(stateFile) || existsSync(journalPathOf(stateFile))) {
    const spawner = new ProcessWorkerSpawner({
      controllerUrl: '',
      launchSecretKey: '',
      executorKind: 'process',
      executorFor: taskStopperFor,
      taskStopWaitMs: DOWN_TASK_STOP_WAIT_MS,
    });
    // down stops each instance's worker and tasks itself, to learn whether they stopped: the provider only records.
    const recordOnly: WorkerSpawner = { spawn: () => undefined, kill: () => Promise.resolve() };
    const provider = new LocalProvider({
      stateFile,
      instancesDir: join(stateDir, 'instances'),
      catalog: loadCatalogFile(BUNDLED_CATALOG_PATH),
      spawner: recordOnly,
    });
    const running = provider.instances().filter((i) => i.state === 'running');
    // Ended instances whose tasks a controller could not stop: down stops those tasks too.
    const leftBehind = provider
      .instances()
      .filter((i) => i.state === 'terminated' && i.tasksLeft !== undefined);
    const forgotten = new Set(
      [...running, ...leftBehind]
        .map((i) => i.instanceId)
        .filter((id) => forget === true || (forget?.includes(id) ?? false)),
    );
    if (running.length > 0 || leftBehind.length > 0) {
      const outcomes = await stopWorkersGently(running, { graceMs });
      const stopOf = async (i: LocalInstance): Promise<InstanceStopOutcome> => {
        if (!forgotten.has(i.instanceId)) return spawner.stop(i);
        killWorker(i);
        return { tasksStopped: true };
      };
      const stops = new Map(
        await Promise.all(
          [...running, ...leftBehind].map(async (i) => [i.instanceId, await stopOf(i)] as const),
        ),
      );
      const tasksStopped = (i: LocalInstance): boolean => stops.get(i.instanceId)?.tasksStopped === true;
      // An instance whose tasks may still run stays running in the records: a later controller or down stops them.
      const stopped = running.filter(tasksStopped);
      // Each instance ends when its own worker exited (a killed one now), not when the slowest was done; an ended one
      // whose tasks are stopped now has them taken off its record.
      await provider.terminate(
        [...stopped, ...leftBehind.filter(tasksStopped)].map((i) => i.instanceId),
        exitTimes(outcomes),
      );
      markStoppedByDown(stateFile, stopped);
      for (const o of outcomes) {
        const instance = running.find((i) => i.instanceId === o.instanceId);
        if (instance !== undefined) out(workerLine(o, instance, stops.get(o.instanceId)));
      }
      for (const instance of leftBehind) out(leftBehindLine(instance, stops.get(instance.instanceId)));
      for (const instance of [...running, ...leftBehind])
        if (forgotten.has(instance.instanceId)) out(forgottenLine(instance));
      stoppedAnything = true;
      const unstopped = [...running, ...leftBehind].filter((i) => !tasksStopped(i));
      if (unstopped.length > 0) {
        const ids = unstopped.map((i) => i.instanceId).join(' ');
        throw new Error(
          `could not stop the tasks of local instance${unstopped.length === 1 ? '' : 's'} ` +
            `${unstopped.map((i) => i.instanceId).join(', ')} (see above); left on record as still to stop: run ` +
            'fleetwise down again once their engine answers, or, if it is gone for good, remove what still runs ' +
            `yourself and run fleetwise down --forget-tasks ${ids}`,
        );
      }
    }
  }
  if (!stoppedAnything) out(`nothing to stop in ${stateDir}`);
}

/**
 * How long down waits for an instance's tasks to be stopped. The executor bounds each of its calls; down, unlike a
 * controller's round, waits for the answer, since it records the instance stopped only once its tasks are.
 */
const DOWN_TASK_STOP_WAIT_MS = 180_000;

/** What down did to one worker and its tasks; where tasks may still run, which and where. */
function workerLine(
  worker: WorkerStopOutcome,
  instance: LocalInstance,
  stop: InstanceStopOutcome | undefined,
): string {
  const head = `worker ${worker.instanceId} (pid ${worker.pid ?? '?'}): `;
  if (stop === undefined || stop.tasksStopped)
    return (
      head +
      (worker.outcome === 'exited'
        ? 'checkpointed its tasks and stopped'
        : worker.outcome === 'gone'
          ? 'had already exited; its leftover tasks (if any) are stopped'
          : 'did not stop in time: killed with its tasks')
    );
  const ended =
    worker.outcome === 'exited' ? 'stopped' : worker.outcome === 'gone' ? 'had already exited' : 'killed';
  return (
    `${head}${ended}, but its tasks could not be stopped (${stop.reason}); ` +
    `${tasksStillRunning(instance, stop.tasks, stop.engine)}; the instance is left recorded as running, not stopped`
  );
}

/** What down did to the tasks an instance that ended earlier left running. */
function leftBehindLine(instance: LocalInstance, stop: InstanceStopOutcome | undefined): string {
  const head = `local instance ${instance.instanceId} (ended earlier, its tasks left running): `;
  if (stop === undefined || stop.tasksStopped) return `${head}its leftover tasks are stopped`;
  return (
    `${head}its tasks could not be stopped (${stop.reason}); ` +
    `${tasksStillRunning(instance, stop.tasks, stop.engine)}; left on record as still to stop`
  );
}

/** What `--forget-tasks` took off the record without asking the engine. */
function forgottenLine(instance: LocalInstance): string {
  const tasks = instance.tasksLeft ?? recordedTasks(instance.dir);
  return (
    `--forget-tasks: recorded the tasks of ${instance.instanceId} as stopped without asking its engine; if they ` +
    `were not removed, ${tasksStillRunning(instance, tasks, readWorkerEngine(instance.dir))}`
  );
}

/** Kill an instance's worker if it still runs (its tasks are left alone: `--forget-tasks`). */
function killWorker(instance: LocalInstance): void {
  if (instance.pid === undefined || !isWorkerOf(instance.pid, instance.instanceId)) return;
  try {
    process.kill(-instance.pid, 'SIGKILL');
  } catch {
    // exited meanwhile
  }
}

/** `--forget-tasks` names instances the records hold. */
function checkForgettable(stateFile: string, ids: readonly string[]): void {
  const known = new Set(
    existsSync(stateFile) || existsSync(journalPathOf(stateFile))
      ? new LocalInstanceFile(stateFile).all().map((i) => i.instanceId)
      : [],
  );
  const unknown = ids.filter((id) => !known.has(id));
  if (unknown.length > 0)
    throw new ValidationError('--forget-tasks', [
      `${unknown.join(', ')}: no such local instance in ${stateFile} (give the ids down named)`,
    ]);
}

/**
 * A controller's own stop tells its state which instances it stopped; `down` cannot reach the state (a PostgreSQL
 * one's URL is not in the directory), so it marks them in the instance records, which the next controller reads at
 * start: their jobs then resume as after a clean stop, not as capacity lost.
 */
function markStoppedByDown(stateFile: string, stopped: readonly LocalInstance[]): void {
  const ids = new Set(stopped.map((i) => i.instanceId));
  const file = new LocalInstanceFile(stateFile);
  file.write(
    file
      .all()
      .filter((i) => ids.has(i.instanceId) && i.state === 'terminated')
      .map((i) => ({ ...i, stoppedBy: 'down' as const })),
  );
}

/** Whether `dir` is (or was) a controller's state directory: it holds what a controller or its workers write there. */
function isStateDirectory(dir: string): boolean {
  if (whatIsAt(dir) !== 'directory') return false;
  const marks = [DB_FILE, ADMIN_TOKEN_FILE, WORKER_TOKEN_FILE, PID_FILE, LOCAL_INSTANCES_FILE, 'instances'];
  if (marks.some((name) => existsSync(join(dir, name))) || existsSync(lockFileOf(dir))) return true;
  if (existsSync(journalPathOf(join(dir, LOCAL_INSTANCES_FILE)))) return true;
  return sharedControllers(dir).length > 0;
}

/**
 * What is at `dir`: a directory, nothing, or something else (a file, or a path through one): that has no state files
 * under it, and cannot be listed.
 */
function whatIsAt(dir: string): 'directory' | 'nothing' | 'other' {
  try {
    const found = statSync(dir, { throwIfNoEntry: false });
    return found === undefined ? 'nothing' : found.isDirectory() ? 'directory' : 'other';
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOTDIR') return 'other';
    throw e;
  }
}

export function registerDown(program: Command): void {
  program
    .command('down')
    .description(
      'stop everything a local controller started: the controller and every worker process its state lists',
    )
    .option(
      '--state-dir <dir>',
      'the local controller state directory (default: .fleetwise here or in a directory above, as the client commands find it)',
    )
    .option(
      '--grace-seconds <s>',
      'how long workers may take to checkpoint their tasks before they are killed (default 90)',
    )
    .option(
      '--forget-tasks [instance...]',
      'record the tasks of these local instances (all, with no id) as stopped without asking their Docker engine: for an engine gone for good, after you removed the containers down named yourself; says what it forgot',
    )
    .action(async (options: DownFlags) => {
      await runDown(options);
    });
}
