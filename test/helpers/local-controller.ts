import { spawn, type ChildProcess } from 'node:child_process';
import {
  appendFileSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { readLocalInstances } from '../../src/cloud/local/instance-file.js';
import { isWorkerOf } from '../../src/cloud/local/worker-spawner.js';
import { recordedTaskAlive } from '../../src/worker/executors/process.js';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';
import { PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import { CLI } from './built-cli.js';
import { killProcessGroups } from './processes-under.js';
import { freePort } from './test-ports.js';

/**
 * A local-mode controller as a subprocess (`node dist/cli/main.js controller --provider local …`) for tests of local
 * mode through the real CLI: its own state directory and port, test timings, and helpers to reach its API and read
 * what its workers left on disk.
 */

export const LOCAL_ADMIN_TOKEN = 'local-controller-admin-token-0123456789';
const TEST_CONFIG = ['workerHeartbeatSeconds: 0.5', 'pollSeconds: 0.5', 'roundSeconds: 1'];

export interface LocalInstanceRecord {
  readonly instanceId: string;
  readonly state: string;
  readonly pid?: number;
  readonly dir: string;
  readonly launchTimeMs: number;
  /** When the provider terminated it (absent while it runs). */
  readonly terminatedAtMs?: number | undefined;
}

export interface StartedController {
  readonly process: ChildProcess;
  readonly stateDir: string;
  readonly url: string;
  readonly env: NodeJS.ProcessEnv;
  /** Everything the controller wrote to stdout so far. */
  stdout(): string;
  stderr(): string;
  /** Resolves with the exit code once the controller exits. */
  readonly exited: Promise<number | null>;
  api(method: string, path: string, body?: unknown): Promise<{ status: number; json: unknown; text: string }>;
  instances(): LocalInstanceRecord[];
  /** The last lines of every worker's log. */
  diagnostics(): string;
}

/**
 * How long a test waits for a controller process to serve its API. It starts in about 2 s, but beside the chaos run's
 * fifty workers on two cores a controller once logged its recovered state and then served nothing for 38 s more.
 */
export const CONTROLLER_START_TIMEOUT_MS = 90_000;

export async function until<T>(
  what: string,
  probe: () => Promise<T | undefined> | T | undefined,
  timeoutMs = 40_000,
  diagnostics?: () => string,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await Promise.resolve()
      .then(probe)
      .catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline)
      throw new Error(
        `timed out waiting for ${what}${diagnostics === undefined ? '' : `\n${diagnostics()}`}`,
      );
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** True while `pid` runs (a zombie counts as gone). */
export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    return !/\) Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return true;
  }
}

/**
 * For a test file that runs one local controller (process executor) in a scratch directory: `start()` starts it, and
 * after the file's tests it is stopped, whatever it left running is killed, and the directory removed.
 */
export function oneLocalController(prefix: string): {
  readonly scratch: string;
  start(): Promise<StartedController>;
} {
  const scratch = mkdtempSync(join(tmpdir(), prefix));
  const stateDir = join(scratch, 'state');
  let started: StartedController | undefined;
  afterAll(async () => {
    if (started !== undefined) {
      started.process.kill('SIGTERM');
      await started.exited;
    }
    killLocalLeftovers(stateDir);
    rmSync(scratch, { recursive: true, force: true });
  });
  return {
    scratch,
    start: async () => (started = await startLocalController(stateDir, { executor: 'process' })),
  };
}

export interface LocalControllerOptions {
  readonly executor?: 'process' | 'docker';
  readonly config?: readonly string[];
  readonly args?: readonly string[];
  readonly env?: NodeJS.ProcessEnv;
  /**
   * The API's port; a free one when absent (a restarted controller keeps its workers' port); 0 lets the controller
   * bind any, its `url` then read from what it prints (`env`'s FLEETWISE_SERVER cannot know it).
   */
  readonly port?: number;
  /** Append the controller's log (stderr) to this file as well (several restarts share one file). */
  readonly logFile?: string;
}

/** A local controller started and serving its API. */
export async function startLocalController(
  stateDir: string,
  options: LocalControllerOptions = {},
): Promise<StartedController> {
  const started = await spawnLocalController(stateDir, options);
  // A controller that exits first (a bad flag, a state directory it cannot use) fails the start at once, with what it
  // said: 'close' comes once its output is read to the end.
  let closed: { readonly code: number | null; readonly signal: NodeJS.Signals | null } | undefined;
  started.process.once('close', (code, signal) => (closed = { code, signal }));
  const outcome = await until(
    'the controller API',
    () =>
      started.stdout().includes('API http://') ? 'serving' : closed !== undefined ? 'exited' : undefined,
    CONTROLLER_START_TIMEOUT_MS,
    () => started.diagnostics(),
  );
  if (outcome === 'exited')
    throw new Error(
      `the controller exited (${closed?.code ?? closed?.signal}) before it served its API; its stderr:\n` +
        started.stderr(),
    );
  return started;
}

/** A local controller process, started and not waited for (one that should fail to start, say). */
export async function spawnLocalController(
  stateDir: string,
  options: LocalControllerOptions = {},
): Promise<StartedController> {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run "npm run build" first (npm test does)`);
  const port = options.port ?? (await freePort());
  const config = `${stateDir}.yaml`;
  writeFileSync(config, [...TEST_CONFIG, ...(options.config ?? []), ''].join('\n'));
  const url = `http://127.0.0.1:${port}`;
  const env = {
    ...process.env,
    ...options.env,
    FLEETWISE_ADMIN_TOKEN: LOCAL_ADMIN_TOKEN,
    FLEETWISE_SERVER: url,
    FLEETWISE_TOKEN: LOCAL_ADMIN_TOKEN,
  };
  const child = spawn(
    process.execPath,
    [
      CLI,
      'controller',
      '--config',
      config,
      '--provider',
      'local',
      '--state-dir',
      stateDir,
      '--listen',
      `127.0.0.1:${port}`,
      '--executor',
      options.executor ?? 'process',
      ...(options.args ?? []),
    ],
    { env, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => {
    err = (err + d.toString()).slice(-20_000);
    if (options.logFile !== undefined) appendFileSync(options.logFile, d);
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const instances = (): LocalInstanceRecord[] => {
    return readLocalInstances(join(stateDir, 'local-instances.json'));
  };
  const started: StartedController = {
    process: child,
    stateDir,
    get url(): string {
      return port !== 0 ? url : (/API (http:\/\/\S+?);?\s/.exec(out)?.[1] ?? url);
    },
    env,
    stdout: () => out,
    stderr: () => err,
    exited,
    api: async (method, path, body) => {
      const response = await fetch(`${started.url}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${LOCAL_ADMIN_TOKEN}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      const text = await response.text();
      let json: unknown;
      try {
        json = JSON.parse(text);
      } catch {
        json = undefined;
      }
      return { status: response.status, json, text };
    },
    instances,
    diagnostics: () => {
      const dir = join(stateDir, 'instances');
      const workers = existsSync(dir)
        ? readdirSync(dir).map((i) => {
            const log = join(dir, i, 'worker.log');
            const text = existsSync(log) ? readFileSync(log, 'utf8') : '(no worker.log)';
            return `--- worker ${i}:\n${text.split('\n').slice(-8).join('\n')}`;
          })
        : [];
      return [`--- controller:\n${(out + err).slice(-3000)}`, ...workers].join('\n');
    },
  };
  return started;
}

/** Kill whatever a test's local controller left running (workers are detached process groups). */
export function killLocalLeftovers(stateDir: string): void {
  const records: LocalInstanceRecord[] = readLocalInstances(join(stateDir, 'local-instances.json'));
  const groups = new Set<number>();
  for (const i of records) {
    if (i.pid !== undefined) groups.add(i.pid);
    // Process-executor tasks run in their own process groups.
    const executorDir = join(i.dir, 'executor');
    if (existsSync(executorDir))
      for (const task of readdirSync(executorDir)) {
        const pid = taskPid(i.dir, task);
        if (pid !== undefined) groups.add(pid);
      }
  }
  // A worker whose pid never reached the record (its controller killed right after the spawn) is found by its
  // command line, which names its work directory under the state directory.
  // (Workers run in process groups of their own; never this one, which the test's controller may share.)
  const ownGroup = processGroupOf('self');
  for (const p of liveProcesses())
    if (p.argv.includes('worker') && p.argv.some((arg) => arg.startsWith(stateDir)) && p.pgrp !== ownGroup)
      groups.add(p.pgrp);
  killProcessGroups(groups);
  // SIGKILL is delivered asynchronously: a worker can still finish a write into the state directory after `kill`
  // returns, and deleting the directory then fails with ENOTEMPTY. Wait (bounded) until the groups are empty.
  const deadline = Date.now() + 5000;
  const pause = new Int32Array(new SharedArrayBuffer(4));
  while (liveProcesses().some((p) => groups.has(p.pgrp)) && Date.now() < deadline)
    Atomics.wait(pause, 0, 0, 20);
}

function processGroupOf(pid: string): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]);
}

/** The processes /proc lists, zombies left out (they write nothing, and may have no parent left to reap them). */
function liveProcesses(): { readonly pgrp: number; readonly argv: readonly string[] }[] {
  const found: { pgrp: number; argv: string[] }[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      // The fields after the parenthesised command name: state, ppid, pgrp, …
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (fields[0] === 'Z') continue;
      found.push({
        pgrp: Number(fields[2]),
        argv: readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0'),
      });
    } catch {
      // exited while we looked
    }
  }
  return found;
}

/** The pid of a process-executor task on a local instance, from its record. */
export function taskPid(instanceDir: string, taskId: string): number | undefined {
  const file = join(instanceDir, 'executor', taskId, 'pid.json');
  if (!existsSync(file)) return undefined;
  return (JSON.parse(readFileSync(file, 'utf8')) as { pid: number }).pid;
}

/*
 * A pid alone may name another process by the time it is looked at: with thousands of short processes (a task's
 * `sleep` per step) the kernel's 32,768 pids come round within minutes. These two also check that the process is
 * still the one recorded, as the product does before it signals one.
 */

/** Whether a local instance's worker process still runs (its pid, still running that instance's worker). */
export function workerAlive(instance: LocalInstanceRecord): boolean {
  return (
    instance.pid !== undefined && pidAlive(instance.pid) && isWorkerOf(instance.pid, instance.instanceId)
  );
}

/** Whether a task of the process executor still runs, as the executor itself tells (its pid record). */
export function taskAlive(instanceDir: string, taskId: string): Promise<boolean> {
  return recordedTaskAlive(join(instanceDir, 'executor', taskId));
}

/** This process's environment without FLEETWISE_ variables: a user who exported nothing. */
export function bareEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const key of Object.keys(env)) if (key.startsWith('FLEETWISE_')) delete env[key];
  return env;
}

export interface DryRunController {
  readonly child: ChildProcess;
  readonly exited: Promise<number | null>;
  output(): { stdout: string; stderr: string };
  /** Resolves once the controller printed `text`; fails if it exits first or the time runs out. */
  until(text: string, timeoutMs?: number): Promise<void>;
}

/**
 * `fleetwise controller --provider local --dry-run --executor process --state-dir DIR …args` as a user starts it
 * (bare environment, the project as working directory); `spawned` collects the child for the caller's cleanup.
 */
export function spawnDryRunController(
  stateDir: string,
  args: readonly string[],
  spawned: ChildProcess[],
): DryRunController {
  const child = spawn(
    process.execPath,
    [
      CLI,
      'controller',
      '--provider',
      'local',
      '--dry-run',
      '--executor',
      'process',
      '--state-dir',
      stateDir,
      ...args,
    ],
    { cwd: PROJECT_ROOT, env: bareEnv(), stdio: ['ignore', 'pipe', 'pipe'] },
  );
  spawned.push(child);
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return {
    child,
    exited,
    output: () => ({ stdout, stderr }),
    async until(text: string, timeoutMs = 60_000): Promise<void> {
      const deadline = Date.now() + timeoutMs;
      while (!stdout.includes(text)) {
        if (Date.now() > deadline || child.exitCode !== null)
          throw new Error(`the controller never printed ${JSON.stringify(text)}:\n${stdout}\n${stderr}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    },
  };
}
