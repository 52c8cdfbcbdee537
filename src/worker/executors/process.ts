import { spawn } from 'node:child_process';
import { createReadStream } from 'node:fs';
import {
  mkdir,
  open,
  readdir,
  readFile,
  rename,
  rm,
  stat,
  writeFile,
  type FileHandle,
} from 'node:fs/promises';
import { join } from 'node:path';
import { Socket } from 'node:net';
import type { Readable } from 'node:stream';
import { z } from 'zod';
import {
  SIGKILL_EXIT_CODE,
  type Executor,
  launchedAsOf,
  type LogChunk,
  type LogPosition,
  type TaskLaunch,
  type TaskRunStatus,
} from '../executor.js';
import { taskEnvironment, UnknownTaskError } from './docker.js';
import { prepareHostPaths } from './task-host-paths.js';
import { lastLines, LOG_TAIL_BYTES } from './log-tail.js';

/**
 * Tasks as plain processes, for hosts without Docker: the same contract as the Docker executor, minus isolation.
 * LIMITS ARE NOT ENFORCED (vCPUs, memory, shm, GPUs are recorded, not applied), and `image` is ignored: the command
 * runs on the host, in the build context directory when there is one (so one job spec serves both executors).
 *
 * Each task has a state directory `<stateDir>/<task>/` with `launch.json`, `pid.json` (pid + kernel start time, so a
 * recycled pid is not mistaken for the task), `output.log` (stdout+stderr) and `exit` (the exit code). The command
 * runs under a small sh wrapper that is the leader of its own process group (detached), so it survives the worker,
 * signals reach the whole task, and the wrapper records the exit code even when the worker that started it is gone:
 * a restarted worker adopts the task through these files. The wrapper runs the command only once the worker has
 * recorded it in pid.json (the worker says so on the wrapper's stdin): a worker that dies in between leaves no task
 * running unrecorded, which a restarted worker could neither see nor stop, and would start a second time.
 */
const PID_FILE = 'pid.json';
const EXIT_FILE = 'exit';
const KILLED_FILE = 'killed';
const LOG_FILE = 'output.log';
const LAUNCH_FILE = 'launch.json';

/**
 * The wrapper's first lines: wait for the worker's go-ahead on stdin, sent once pid.json names this wrapper. Without
 * it (stdin closed: the worker died or failed to write the record) it goes on only if pid.json does name it (the worker
 * died just after writing it), else it exits without running the command. The task's stdin is then /dev/null.
 * (pid.json is written as {"pid":<pid>,…}: the text the wrapper looks for.)
 */
const AWAIT_RECORD = [
  'trap : TERM INT HUP QUIT USR1 USR2',
  'if ! read -r _; then',
  `  if ! grep -q '{"pid":'"$$"',' "\${FLEETWISE_EXIT_FILE%/*}/${PID_FILE}" 2>/dev/null; then`,
  '    echo "fleetwise: the worker did not record this task; not running it" >&2',
  '    exit 125',
  '  fi',
  'fi',
  'exec 0</dev/null',
];

// The wrapper traps the checkpoint signals with a no-op (not ignores them: an ignored signal would stay ignored in the
// task), so a signal sent to the group reaches the task and the wrapper lives on to record the exit code (128+n for a
// signal death, as Docker reports it). The trap runs only after the foreground command returns; `$?` is the command's.
const WRAPPER = [
  ...AWAIT_RECORD,
  '"$@"',
  'code=$?',
  'echo "$code" > "$FLEETWISE_EXIT_FILE.tmp" && mv "$FLEETWISE_EXIT_FILE.tmp" "$FLEETWISE_EXIT_FILE"',
  'exit "$code"',
].join('\n');

/**
 * The wrapper of a task that ends with the worker that started it: the worker holds the other end of a pipe on fd 3,
 * and a background reader kills the task's whole process group when that end closes, which the kernel does however
 * the worker ends (a SIGKILL included). Neither the wrapper nor the task keeps fd 3 open; the reader is stopped once
 * the task has exited on its own.
 */
const WRAPPER_ENDING_WITH_WORKER = [
  ...AWAIT_RECORD,
  '{ read -r _ <&3; kill -KILL 0; } &',
  'guard=$!',
  'exec 3<&-',
  '"$@"',
  'code=$?',
  'kill -KILL "$guard" 2>/dev/null',
  'echo "$code" > "$FLEETWISE_EXIT_FILE.tmp" && mv "$FLEETWISE_EXIT_FILE.tmp" "$FLEETWISE_EXIT_FILE"',
  'exit "$code"',
].join('\n');

const pidRecordSchema = z.strictObject({
  pid: z.number().int().positive(),
  /** Field 22 of /proc/<pid>/stat (clock ticks since boot), or null where /proc is unavailable. */
  startTicks: z.number().int().nullable(),
  startedAt: z.string(),
});
type PidRecord = z.infer<typeof pidRecordSchema>;

/** A process's start time, field 22 of its /proc/<pid>/stat text (clock ticks since boot), or null if unreadable. */
function startTicksOfStat(stat: string): number | null {
  // The command name (field 2) may contain spaces and parentheses; fields after the last ')' are fixed.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticks = Number(fields[19]);
  return Number.isFinite(ticks) ? ticks : null;
}

async function processStartTicks(pid: number): Promise<number | null> {
  try {
    return startTicksOfStat(await readFile(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return null;
  }
}

async function isAlive(record: PidRecord): Promise<boolean> {
  try {
    process.kill(record.pid, 0);
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
  if (record.startTicks === null) return true;
  const ticks = await processStartTicks(record.pid);
  // A zombie or a recycled pid has different (or no) stat: only the same start time is our task.
  if (ticks !== record.startTicks) return false;
  const state = await readFile(`/proc/${record.pid}/stat`, 'utf8').catch(() => '');
  return !/\) Z /.test(state);
}

/**
 * Whether the task whose state directory this is still runs: its recorded pid, still the process recorded (its start
 * time) and not a zombie. What the executor checks before it signals a task; also how a test tells a task is gone.
 */
export async function recordedTaskAlive(taskDir: string): Promise<boolean> {
  const record = await readJson(join(taskDir, PID_FILE), pidRecordSchema);
  return record !== undefined && isAlive(record);
}

async function readJson<T>(path: string, schema: z.ZodType<T>): Promise<T | undefined> {
  try {
    const parsed = schema.safeParse(JSON.parse(await readFile(path, 'utf8')));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

function taskDirName(taskId: string): string {
  if (!/^[A-Za-z0-9][A-Za-z0-9_.-]*$/.test(taskId))
    throw new Error(`task id "${taskId}" is not a safe file name`);
  return taskId;
}

/** Where a program is found when the worker itself has no PATH. */
const DEFAULT_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/**
 * A task's whole environment, built from nothing: the worker's own (its worker token, an operator's
 * FLEETWISE_ADMIN_TOKEN, AWS credentials, …) never reaches a task, which is a team's code. On top of a minimal base:
 * the spec's env, then the task's FLEETWISE_ variables (taskEnvironment) and the wrapper's exit file.
 * The base, each overridable by the spec:
 * - PATH: the worker's (not secret) so a command such as `python3` resolves as it does on this host;
 * - HOME: the task's own state directory, so tools that write caches or config under ~ work, and SDKs and CLIs do not
 *   pick up the worker user's ~/.aws, ~/.docker by default (not a boundary: this executor isolates nothing);
 * - LANG: the worker's, else C.UTF-8, so text tools and Python decode and print UTF-8 as they would in a container;
 * - TZ: the worker's when set, so timestamps in the task's log match the worker's.
 */
export function processTaskEnvironment(
  launch: TaskLaunch,
  taskDir: string,
  workerEnv: NodeJS.ProcessEnv = process.env,
): Record<string, string> {
  const tz = workerEnv.TZ;
  return {
    PATH: workerEnv.PATH !== undefined && workerEnv.PATH !== '' ? workerEnv.PATH : DEFAULT_PATH,
    HOME: taskDir,
    LANG: workerEnv.LANG !== undefined && workerEnv.LANG !== '' ? workerEnv.LANG : 'C.UTF-8',
    ...(tz !== undefined && tz !== '' ? { TZ: tz } : {}),
    ...taskEnvironment(launch, launch.checkpointDir, launch.progressFile),
    FLEETWISE_EXIT_FILE: join(taskDir, EXIT_FILE),
  };
}

export interface ProcessExecutorOptions {
  /** Where task records live (pid, exit code, logs); survives worker restarts. */
  readonly stateDir: string;
  /**
   * Tasks end with the process that started them, however it ends: a local instance is its worker process, and its
   * tasks must not run on unsupervised (no checkpoint uploaded, no exit reported) while the controller restarts them
   * elsewhere. Off by default: a worker restarted by a supervisor (systemd on EC2) adopts its running tasks.
   */
  readonly tasksEndWithThisProcess?: boolean;
}

export class ProcessExecutor implements Executor {
  readonly kind = 'process' as const;
  readonly stateDir: string;

  private readonly tasksEndWithThisProcess: boolean;
  /** This process's end of each tied task's pipe (tasksEndWithThisProcess): closed when the task is removed. */
  private readonly lifelines = new Map<string, Socket>();

  constructor(options: ProcessExecutorOptions) {
    this.stateDir = options.stateDir;
    this.tasksEndWithThisProcess = options.tasksEndWithThisProcess === true;
  }

  private dir(taskId: string): string {
    return join(this.stateDir, taskDirName(taskId));
  }

  /**
   * Nothing to fetch or build ahead (a process runs from its build context, already on this host): only what would
   * refuse the start, so that a held task that cannot run fails before its job's release, not after.
   */
  async prepare(launch: TaskLaunch): Promise<void> {
    requireCommand(launch);
  }

  async start(launch: TaskLaunch): Promise<void> {
    const dir = this.dir(launch.taskId);
    // Adoption: any record of this task (running or exited) means it was started; the caller removes it to rerun.
    if ((await readJson(join(dir, PID_FILE), pidRecordSchema)) !== undefined) return;
    requireCommand(launch);
    await mkdir(dir, { recursive: true });
    await prepareHostPaths(launch);
    await writeFile(join(dir, LAUNCH_FILE), `${JSON.stringify(launch, null, 2)}\n`);
    const log = await open(join(dir, LOG_FILE), 'a');
    try {
      const [program, ...args] = launch.command as [string, ...string[]];
      const tied = this.tasksEndWithThisProcess;
      const wrapper = tied ? WRAPPER_ENDING_WITH_WORKER : WRAPPER;
      const child = spawn('/bin/sh', ['-c', wrapper, 'fleetwise-task', program, ...args], {
        cwd: launch.build?.contextDir ?? dir,
        env: processTaskEnvironment(launch, dir),
        detached: true,
        stdio: tied ? ['pipe', log.fd, log.fd, 'pipe'] : ['pipe', log.fd, log.fd],
      });
      // The go-ahead pipe: closed unwritten if this start fails, so the wrapper exits without running the command.
      const goAhead = child.stdin;
      goAhead?.on('error', () => undefined);
      const lifeline = tied ? child.stdio[3] : undefined;
      if (lifeline instanceof Socket) {
        // Held open (never read, never keeping this process alive) until the task is removed or this process ends.
        lifeline.on('error', () => undefined);
        lifeline.pause();
        lifeline.unref();
        this.lifelines.set(launch.taskId, lifeline);
      }
      try {
        const pid = await new Promise<number>((resolve, reject) => {
          child.once('error', reject);
          child.once('spawn', () =>
            child.pid === undefined ? reject(new Error('no pid')) : resolve(child.pid),
          );
        });
        child.unref();
        const record: PidRecord = {
          pid,
          startTicks: await processStartTicks(pid),
          startedAt: new Date().toISOString(),
        };
        await writeFile(join(dir, `${PID_FILE}.tmp`), JSON.stringify(record));
        await rename(join(dir, `${PID_FILE}.tmp`), join(dir, PID_FILE));
        goAhead?.end('go\n');
      } catch (e) {
        goAhead?.destroy();
        throw e;
      }
    } finally {
      await log.close();
    }
  }

  private async record(taskId: string): Promise<PidRecord | undefined> {
    return readJson(join(this.dir(taskId), PID_FILE), pidRecordSchema);
  }

  async signal(taskId: string, signal: NodeJS.Signals): Promise<void> {
    const record = await this.record(taskId);
    if (record === undefined) throw new UnknownTaskError(taskId);
    if (!(await isAlive(record))) return;
    try {
      process.kill(-record.pid, signal); // the whole process group: the wrapper (which traps it) and the task
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ESRCH') throw e;
    }
  }

  async kill(taskId: string): Promise<void> {
    const record = await this.record(taskId);
    if (record === undefined || !(await isAlive(record))) return;
    await writeFile(join(this.dir(taskId), KILLED_FILE), '');
    try {
      process.kill(-record.pid, 'SIGKILL');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ESRCH') throw e;
    }
    const deadline = Date.now() + 5000;
    while ((await isAlive(record)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  }

  async remove(taskId: string): Promise<void> {
    await this.kill(taskId);
    this.lifelines.get(taskId)?.destroy();
    this.lifelines.delete(taskId);
    await rm(this.dir(taskId), { recursive: true, force: true });
  }

  async status(taskId: string): Promise<TaskRunStatus | undefined> {
    const dir = this.dir(taskId);
    const record = await this.record(taskId);
    if (record === undefined) return undefined;
    const startedAt = new Date(record.startedAt);
    // What it was launched as (attempt, checkpoint signal, iterations): a worker whose own record of the task was
    // lost adopts it from this.
    const launched = launchedAsOf(
      await readFile(join(dir, LAUNCH_FILE), 'utf8')
        .then((text) => JSON.parse(text) as unknown)
        .catch(() => undefined),
    );
    const common = {
      taskId,
      startedAt,
      limitsEnforced: false,
      ...(launched === undefined ? {} : { launched }),
    };
    if (await isAlive(record)) return { ...common, state: 'running' };
    const exitPath = join(dir, EXIT_FILE);
    const exitText = await readFile(exitPath, 'utf8').catch(() => undefined);
    const finishedAt = await stat(exitPath)
      .then((s) => s.mtime)
      .catch(() => undefined);
    const code = exitText === undefined ? Number.NaN : Number(exitText.trim());
    if (Number.isInteger(code)) return { ...common, state: 'exited', exitCode: code, finishedAt };
    // No exit file: the wrapper itself died (SIGKILL of the group). Report it as Docker does a SIGKILL: 137.
    const killed = await stat(join(dir, KILLED_FILE)).then(
      () => true,
      () => false,
    );
    const exitCode = killed ? SIGKILL_EXIT_CODE : undefined;
    return { ...common, state: 'exited', exitCode, finishedAt };
  }

  async list(): Promise<TaskRunStatus[]> {
    let names: string[];
    try {
      names = await readdir(this.stateDir);
    } catch {
      return [];
    }
    const out: TaskRunStatus[] = [];
    for (const name of names.sort()) {
      const s = await this.status(name).catch(() => undefined);
      if (s !== undefined) out.push(s);
    }
    return out;
  }

  async logs(taskId: string): Promise<Readable> {
    if ((await this.record(taskId)) === undefined) throw new UnknownTaskError(taskId);
    return createReadStream(join(this.dir(taskId), LOG_FILE));
  }

  /** The log file is only ever appended to, so a byte offset into it is a position that never moves. */
  async readLogs(taskId: string, from: LogPosition, maxBytes: number): Promise<LogChunk> {
    const data = await this.readLogFile(taskId, from.bytes, maxBytes);
    return { data, next: { bytes: from.bytes + data.length } };
  }

  async logTail(taskId: string, lines: number): Promise<string> {
    if ((await this.record(taskId)) === undefined) throw new UnknownTaskError(taskId);
    const size = await stat(join(this.dir(taskId), LOG_FILE)).then(
      (s) => s.size,
      () => 0,
    );
    const start = Math.max(0, size - LOG_TAIL_BYTES);
    const end = await this.readLogFile(taskId, start, size - start);
    return lastLines(end.toString('utf8'), lines, start > 0);
  }

  private async readLogFile(taskId: string, offset: number, maxBytes: number): Promise<Buffer> {
    if ((await this.record(taskId)) === undefined) throw new UnknownTaskError(taskId);
    let file: FileHandle;
    try {
      file = await open(join(this.dir(taskId), LOG_FILE), 'r');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return Buffer.alloc(0);
      throw e;
    }
    try {
      const buffer = Buffer.alloc(Math.max(0, maxBytes));
      const { bytesRead } = await file.read(buffer, 0, buffer.length, offset);
      return buffer.subarray(0, bytesRead);
    } finally {
      await file.close();
    }
  }
}

function requireCommand(launch: TaskLaunch): void {
  if (launch.command.length === 0)
    throw new Error(
      `task ${launch.taskId}: the process executor needs a command (it cannot use an image's default)`,
    );
}
