import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WORKER_PID_FILE } from '../../src/cli/state-dir-lock.js';
import { CLI, ensureBuiltCli } from '../helpers/built-cli.js';
import { bareEnv, pidAlive } from '../helpers/local-controller.js';
import { UNREACHABLE_URL } from '../helpers/unreachable-url.js';

/**
 * One `fleetwise worker` per work directory: a second one (an operator's restart while the first still runs, a
 * supervisor's duplicate) would register with the same saved token and adopt the same tasks. Through the real CLI.
 */
const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-worker-lock-'));
const children: ChildProcess[] = [];

beforeAll(() => ensureBuiltCli(['cli/main.ts']));

afterAll(() => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  rmSync(scratch, { recursive: true, force: true });
});

/** A worker that never reaches a controller (nothing listens at its address) and never gives up: it just runs. */
function workerArgs(workDir: string): string[] {
  return [
    'worker',
    '--controller',
    UNREACHABLE_URL,
    '--token',
    'worker-token-0123456789',
    '--instance-id',
    'i-lock',
    '--executor',
    'process',
    '--work-dir',
    workDir,
    '--give-up-after-seconds',
    '0',
    '--no-probe',
    '--spot-notices',
    'off',
  ];
}

interface Launched {
  readonly child: ChildProcess & { pid: number };
  readonly exited: Promise<number | null>;
  /** Resolves once the worker has claimed its work directory (its start line), or has exited instead. */
  readonly outcome: Promise<'started' | 'exited'>;
  output(): string;
}

function launchWorker(workDir: string): Launched {
  const child = spawn(process.execPath, [CLI, ...workerArgs(workDir)], {
    env: bareEnv(),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  if (child.pid === undefined) throw new Error('the worker did not start');
  let out = '';
  let onStarted: () => void = () => undefined;
  const started = new Promise<'started'>((resolve) => (onStarted = () => resolve('started')));
  child.stdout?.on('data', (d: Buffer) => {
    out += d.toString();
    if (out.includes('fleetwise worker i-lock')) onStarted();
  });
  child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return {
    child: child as ChildProcess & { pid: number },
    exited,
    outcome: Promise.race([started, exited.then(() => 'exited' as const)]),
    output: () => out,
  };
}

async function startWorker(workDir: string): Promise<Launched> {
  const worker = launchWorker(workDir);
  const outcome = await worker.outcome;
  if (outcome !== 'started') throw new Error(`the worker exited:\n${worker.output()}`);
  return worker;
}

describe('fleetwise worker: one per work directory', () => {
  it('refuses a second worker naming the first, and takes over the lock of a dead one', async () => {
    const workDir = join(scratch, 'instance');
    const first = await startWorker(workDir);

    const second = launchWorker(workDir);
    expect(await second.outcome).toBe('exited');
    expect(await second.exited).toBe(1);
    expect(second.output()).toContain(`another worker (pid ${first.child.pid}) is using ${workDir}`);
    expect(pidAlive(first.child.pid)).toBe(true);
    expect(readFileSync(join(workDir, WORKER_PID_FILE), 'utf8')).toMatch(
      new RegExp(`^${first.child.pid} \\d+`),
    );

    // A worker killed outright leaves its lock behind: the next one takes it over.
    first.child.kill('SIGKILL');
    await first.exited;
    expect(existsSync(join(workDir, WORKER_PID_FILE))).toBe(true);
    const third = await startWorker(workDir);
    expect(readFileSync(join(workDir, WORKER_PID_FILE), 'utf8')).toMatch(new RegExp(`^${third.child.pid} `));

    // A worker that stops releases the directory.
    third.child.kill('SIGTERM');
    await third.exited;
    expect(existsSync(join(workDir, WORKER_PID_FILE))).toBe(false);
  }, 60_000);
});
