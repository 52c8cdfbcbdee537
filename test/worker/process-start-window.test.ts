import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import type { TaskLaunch } from '../../src/worker/executor.js';
import { ProcessExecutor } from '../../src/worker/executors/process.js';
import { ensureBuiltCli } from '../helpers/built-cli.js';
import { pidAlive, until } from '../helpers/local-controller.js';

/**
 * A worker that dies after spawning a task's wrapper but before recording its pid: no copy of the task may run
 * unrecorded, since a restarted worker would neither see it nor stop it, and would start a second one on the same
 * checkpoint directory.
 */
const EXECUTOR_MODULE = join(PROJECT_ROOT, 'dist', 'worker', 'executors', 'process.js');
const scratch = mkdtempSync(join(tmpdir(), 'fw-proc-window-'));

beforeAll(() => ensureBuiltCli(['worker/executors/process.ts']));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** The processes whose parent is `parent` (from /proc). */
function childrenOf(parent: number): number[] {
  const out: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === parent) out.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

describe('process executor: a worker killed between spawning a task and recording it', () => {
  it('leaves no copy running, and a restarted worker runs the task once', async () => {
    const stateDir = join(scratch, 'state');
    const marker = join(scratch, 'runs');
    const launch: TaskLaunch = {
      taskId: 'w-1.0',
      jobId: 'w-1',
      // Runs a while: a copy started unrecorded is still there to be seen.
      command: ['sh', '-c', 'echo ran >> "$MARKER"; sleep 0.5'],
      env: { MARKER: marker },
      vcpus: 1,
      memoryGiB: 1,
      gpus: 0,
      shmSizeGiB: 0,
      checkpointDir: join(scratch, 'checkpoint'),
      progressFile: join(scratch, 'progress'),
      restoring: false,
    };
    // The record's temporary file is a FIFO nobody reads: the worker blocks writing it, right after the spawn.
    const taskDir = join(stateDir, 'w-1.0');
    mkdirSync(taskDir, { recursive: true });
    expect(spawnSync('mkfifo', [join(taskDir, 'pid.json.tmp')]).status).toBe(0);
    const worker = spawn(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `import { ProcessExecutor } from ${JSON.stringify(EXECUTOR_MODULE)};
         await new ProcessExecutor({ stateDir: process.argv[1] }).start(JSON.parse(process.argv[2]));`,
        stateDir,
        JSON.stringify(launch),
      ],
      { stdio: 'ignore' },
    );
    const exited = new Promise((resolve) => worker.once('exit', resolve));
    const workerPid = worker.pid as number;
    const wrapper = await until('the task wrapper to be spawned', () => childrenOf(workerPid)[0], 10_000);
    expect(existsSync(join(taskDir, 'pid.json'))).toBe(false);
    worker.kill('SIGKILL');
    await exited;
    // The wrapper, left without its worker's go-ahead, ends without running the command.
    await until('the orphaned wrapper to end', () => (pidAlive(wrapper) ? undefined : true), 10_000);
    expect(existsSync(marker)).toBe(false);
    expect(readFileSync(join(taskDir, 'output.log'), 'utf8')).toContain(
      'the worker did not record this task; not running it',
    );

    // The restarted worker sees no task, starts it, and it runs once.
    rmSync(join(taskDir, 'pid.json.tmp'));
    const restarted = new ProcessExecutor({ stateDir });
    expect(await restarted.list()).toEqual([]);
    await restarted.start(launch);
    const status = await until(
      'the task to exit',
      async () => {
        const s = await restarted.status('w-1.0');
        return s?.state === 'exited' ? s : undefined;
      },
      10_000,
    );
    expect(status.exitCode).toBe(0);
    expect(readFileSync(marker, 'utf8')).toBe('ran\n');
    await restarted.remove('w-1.0');
  });
});
