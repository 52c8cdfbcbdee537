import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { LOCAL_INSTANCES_FILE, WORKER_TOKEN_FILE } from '../cli/local-state.js';
import { readLocalInstances } from '../cloud/local/instance-file.js';
import { WORKER_MAIN } from '../cloud/local/worker-spawner.js';
import { stopProcesses } from './stop-processes.js';

/**
 * A real controller for the controller benchmark: `fleetwise controller --provider local` as a child process (its own
 * state directory, SQLite, HTTP API on a free port), whose local instances start no worker (the controller's
 * FLEETWISE_EXTERNAL_WORKERS hook): the benchmark's simulated fleet registers and heartbeats for them over HTTP.
 */

/** Clock ticks per second of /proc's CPU times (Linux's USER_HZ). */
const USER_HZ = 100;

/** The controller's hook for workers started elsewhere (cli/commands/controller/provider-setup.ts EXTERNAL_WORKERS_ENV). */
const EXTERNAL_WORKERS_ENV = 'FLEETWISE_EXTERNAL_WORKERS';

export interface ApiAnswer {
  readonly status: number;
  readonly json: unknown;
  /** Wall-clock milliseconds from sending the request to the whole answer read. */
  readonly ms: number;
}

export interface LocalInstanceState {
  /** The cloud id the worker registers with (`local-…`). */
  readonly instanceId: string;
  readonly state: string;
  /** Its tags: the launch token among them, from which the worker's one-time launch secret is derived. */
  readonly tags?: Readonly<Record<string, string>>;
}

/** The benchmark's controllers still running, so that a benchmark stopped by a signal can end them too. */
const running = new Set<ChildProcess>();

/**
 * Stop every benchmark controller still running, as `BenchController.stop` does (SIGTERM, so that a CPU profile is
 * written; SIGKILL after `graceMs`), and resolve once all have exited.
 */
export function stopRunningBenchControllers(graceMs = 10_000): Promise<void> {
  return stopProcesses(running, graceMs);
}

/** How long `killRunningBenchControllersNow` waits for the killed controllers to die. */
const KILL_WAIT_MS = 2_000;

/**
 * SIGKILL every benchmark controller still running and wait, at most `waitMs`, until each has died; synchronous, for a
 * process 'exit' listener. The last resort of a benchmark that exits without having stopped them (an uncaught error,
 * a `process.exit` elsewhere): only a signal to the whole process group (a terminal's Ctrl-C) reaches a controller
 * too, and without one it would run on, on its port, owned by init.
 */
export function killRunningBenchControllersNow(waitMs = KILL_WAIT_MS): void {
  const killed: number[] = [];
  for (const child of running)
    if (
      child.exitCode === null &&
      child.signalCode === null &&
      child.pid !== undefined &&
      child.kill('SIGKILL')
    )
      killed.push(child.pid);
  // Its state directory is removed next: waiting until the controller can write no more into it.
  const deadline = Date.now() + waitMs;
  while (killed.some(isAlive) && Date.now() < deadline) sleepSync(10);
}

/** Whether `pid` still runs: neither gone nor a zombie (a child is not reaped while an 'exit' listener runs). */
function isAlive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state !== 'Z' && state !== 'X';
  } catch {
    return false;
  }
}

function sleepSync(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/** Whether the 'exit' listener that kills the controllers left running is installed (once, with the first start). */
let killOnExitInstalled = false;

function killOnExit(): void {
  if (killOnExitInstalled) return;
  killOnExitInstalled = true;
  process.on('exit', () => killRunningBenchControllersNow());
}

/** How the controller ended: its exit code, or the signal that ended it. */
function exitText(code: number | null, signal: NodeJS.Signals | null): string {
  return signal === null ? `code ${code ?? 'none'}` : `signal ${signal}`;
}

/** How long a request that failed waits for the controller's exit to be seen, to tell a crash from a network error. */
const EXIT_GRACE_MS = 2_000;

export interface BenchControllerStartOptions {
  /** How long its API may take to answer before the controller is stopped and the start fails. */
  readonly startTimeoutMs?: number;
}

export class BenchController {
  private constructor(
    private readonly child: ChildProcess,
    readonly stateDir: string,
    readonly url: string,
    readonly adminToken: string,
    /** Settles with how the controller exited (`code 1`, `signal SIGKILL`). */
    private readonly exited: Promise<string>,
  ) {}

  /** The controller's log: stderr, JSON lines. */
  get logFile(): string {
    return join(this.stateDir, 'controller.log');
  }

  /**
   * Start a controller with these configuration lines (YAML); resolves once its API answers. `nodeArgs` go to its
   * Node.js (e.g. `--cpu-prof --cpu-prof-dir DIR` to profile it).
   */
  static async start(
    stateDir: string,
    configLines: readonly string[],
    nodeArgs: readonly string[] = [],
    { startTimeoutMs = 60_000 }: BenchControllerStartOptions = {},
  ): Promise<BenchController> {
    mkdirSync(stateDir, { recursive: true, mode: 0o700 });
    const configFile = join(stateDir, 'bench-config.yaml');
    writeFileSync(configFile, `${configLines.join('\n')}\n`);
    const adminToken = randomBytes(24).toString('base64url');
    const log = openSync(join(stateDir, 'controller.log'), 'a');
    let child: ChildProcess;
    try {
      child = spawn(
        process.execPath,
        [
          ...nodeArgs,
          WORKER_MAIN,
          'controller',
          '--provider',
          'local',
          '--executor',
          'process',
          '--state-dir',
          stateDir,
          '--listen',
          '127.0.0.1:0',
          '--config',
          configFile,
          '--log-format',
          'json',
        ],
        {
          env: { ...process.env, FLEETWISE_ADMIN_TOKEN: adminToken, [EXTERNAL_WORKERS_ENV]: '1' },
          stdio: ['ignore', 'pipe', log],
        },
      );
    } finally {
      closeSync(log);
    }
    const exited = new Promise<string>((resolve) =>
      child.once('exit', (code, signal) => {
        running.delete(child);
        resolve(exitText(code, signal));
      }),
    );
    running.add(child);
    killOnExit();
    let out = '';
    const logFile = join(stateDir, 'controller.log');
    let timer: NodeJS.Timeout | undefined;
    let timedOut = false;
    const url = await new Promise<string>((resolve, reject) => {
      const fail = (why: string): void =>
        reject(new Error(`the benchmark's controller ${why}; see ${logFile}\n${out}`));
      child.stdout?.on('data', (d: Buffer) => {
        out += d.toString();
        const match = /API (http:\/\/[^\s;]+)/.exec(out);
        if (match !== null) resolve(match[1] as string);
      });
      void exited.then((how) => {
        if (!timedOut) fail(`exited (${how}) before its API answered`);
      });
      timer = setTimeout(() => {
        timedOut = true;
        // A controller that never answers is stopped before the start fails: nothing would stop it later.
        const seconds = startTimeoutMs / 1000;
        void stopProcesses([child], 5_000).then(
          () => fail(`did not start its API within ${seconds} s and was stopped`),
          () => fail(`did not start its API within ${seconds} s`),
        );
      }, startTimeoutMs);
      timer.unref();
    }).finally(() => clearTimeout(timer));
    return new BenchController(child, stateDir, url, adminToken, exited);
  }

  /**
   * `request`, or, when it fails because the controller has exited meanwhile (a crash, an OOM kill), an error saying so
   * and where its log is, rather than the network error alone.
   */
  private async unlessExited<T>(request: () => Promise<T>): Promise<T> {
    try {
      return await request();
    } catch (e) {
      let grace: NodeJS.Timeout | undefined;
      const how = await Promise.race([
        this.exited,
        new Promise<undefined>((resolve) => {
          grace = setTimeout(() => resolve(undefined), EXIT_GRACE_MS);
        }),
      ]).finally(() => clearTimeout(grace));
      if (how === undefined) throw e;
      throw new Error(`the benchmark's controller exited (${how}); see ${this.logFile}`, { cause: e });
    }
  }

  get pid(): number {
    return this.child.pid as number;
  }

  /** The cluster's worker token (the local provider's bootstrap token), for the simulated workers. */
  workerToken(): string {
    return readFileSync(join(this.stateDir, WORKER_TOKEN_FILE), 'utf8').trim();
  }

  /** The local provider's instances (its state file and journal, instance-file.ts), without asking the controller. */
  instances(): LocalInstanceState[] {
    try {
      return readLocalInstances(join(this.stateDir, LOCAL_INSTANCES_FILE));
    } catch {
      return []; // a line being written: read again next time
    }
  }

  /** An admin request to the API. */
  async api(
    method: 'GET' | 'POST',
    path: string,
    body?: unknown,
    headers: Readonly<Record<string, string>> = {},
  ): Promise<ApiAnswer> {
    const started = performance.now();
    const answer = await this.unlessExited(async () => {
      const response = await fetch(`${this.url}${path}`, {
        method,
        headers: {
          ...headers,
          authorization: `Bearer ${this.adminToken}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      return { status: response.status, text: await response.text() };
    });
    const ms = performance.now() - started;
    let json: unknown;
    try {
      json = JSON.parse(answer.text);
    } catch {
      json = answer.text;
    }
    return { status: answer.status, json, ms };
  }

  /** `/metrics` as name{labels} → value. */
  async metrics(): Promise<Map<string, number>> {
    const text = await this.unlessExited(async () => (await fetch(`${this.url}/metrics`)).text());
    const values = new Map<string, number>();
    for (const line of text.split('\n')) {
      if (line.startsWith('#') || line.trim() === '') continue;
      const space = line.lastIndexOf(' ');
      values.set(line.slice(0, space), Number(line.slice(space + 1)));
    }
    return values;
  }

  /** /proc/<pid>/`file`; once the controller has exited, an error saying so rather than that the file is missing. */
  private proc(file: string): string {
    try {
      return readFileSync(`/proc/${this.pid}/${file}`, 'utf8');
    } catch (e) {
      const { exitCode, signalCode } = this.child;
      if (exitCode === null && signalCode === null) throw e;
      throw new Error(
        `the benchmark's controller exited (${exitText(exitCode, signalCode)}); see ${this.logFile}`,
        { cause: e },
      );
    }
  }

  /** The controller process's resident set size (Linux /proc), in MiB. */
  rssMiB(): number {
    const status = this.proc('status');
    const kb = /^VmRSS:\s+(\d+) kB$/m.exec(status)?.[1];
    if (kb === undefined) throw new Error(`no VmRSS in /proc/${this.pid}/status`);
    return Number(kb) / 1024;
  }

  /**
   * CPU seconds the controller process has used so far, all its threads (the prediction worker's too): user + system
   * time from /proc/<pid>/stat, in the kernel's USER_HZ ticks (100 per second on Linux).
   */
  cpuSeconds(): number {
    const stat = this.proc('stat');
    // Fields after the command name (which may contain spaces, in parentheses): utime and stime are the 12th and 13th.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / USER_HZ;
  }

  /** SIGTERM and wait; SIGKILL if it has not exited within `graceMs`. */
  stop(graceMs = 30_000): Promise<void> {
    return stopProcesses([this.child], graceMs);
  }
}
